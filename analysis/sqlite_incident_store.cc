#include "analysis/sqlite_incident_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringside::analysis {
namespace {

// Migration N takes a file from user_version N-1 to N. Never edit one that has shipped: add one.
constexpr const char* kMigrations[] = {
    // 1: the first schema.
    R"sql(
CREATE TABLE meta(
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL);
INSERT INTO meta(name, value) VALUES ('next_id', 1);
CREATE TABLE incidents(
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL,
  kind TEXT NOT NULL,
  severity TEXT NOT NULL,
  opened_ns INTEGER NOT NULL,
  updated_ns INTEGER NOT NULL,
  resolved_ns INTEGER,
  entity TEXT NOT NULL,
  evidence TEXT NOT NULL,
  summary TEXT NOT NULL,
  resolution TEXT NOT NULL,
  causes TEXT NOT NULL,
  affected TEXT NOT NULL,
  revision INTEGER NOT NULL);
CREATE UNIQUE INDEX incidents_open_key ON incidents(key) WHERE resolved_ns IS NULL;
CREATE INDEX incidents_updated ON incidents(updated_ns);
)sql",
};
static_assert(std::size(kMigrations) == SqliteIncidentStore::kSchemaVersion);

constexpr const char* kColumns =
    "id, key, kind, severity, opened_ns, updated_ns, resolved_ns, entity, evidence, summary, "
    "resolution, causes, affected, revision";

absl::Status SqliteStatus(sqlite3* db, int rc, absl::string_view what) {
  const std::string msg =
      absl::StrCat("incident store: ", what, ": ", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_DONE:
    case SQLITE_ROW:
      return absl::OkStatus();
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
      return absl::UnavailableError(msg);
    case SQLITE_CONSTRAINT:
      return absl::AlreadyExistsError(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(msg);
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(msg);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return absl::PermissionDeniedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  absl::Status status(absl::string_view what) const { return SqliteStatus(db_, rc_, what); }
  sqlite3_stmt* get() { return s_; }
  void Text(int i, absl::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Int(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void Null(int i) { sqlite3_bind_null(s_, i); }
  int Step() { return sqlite3_step(s_); }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
  int rc_;
};

std::string ColumnText(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t ? std::string(reinterpret_cast<const char*>(t),
                         static_cast<size_t>(sqlite3_column_bytes(s, i)))
           : std::string();
}

// JSON is decoded by SQLite's own json_each (built in since 3.38).
absl::StatusOr<std::map<std::string, std::string>> DecodeLabels(sqlite3* db,
                                                                const std::string& json) {
  Stmt q(db, "SELECT key, value FROM json_each(?1)");
  if (absl::Status s = q.status("prepare"); !s.ok()) return s;
  q.Text(1, json);
  std::map<std::string, std::string> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) out[ColumnText(q.get(), 0)] = ColumnText(q.get(), 1);
  if (rc != SQLITE_DONE) return SqliteStatus(db, rc, "decode labels");
  return out;
}

absl::StatusOr<std::map<std::string, double>> DecodeEvidence(sqlite3* db, const std::string& json) {
  Stmt q(db, "SELECT key, value, type FROM json_each(?1)");
  if (absl::Status s = q.status("prepare"); !s.ok()) return s;
  q.Text(1, json);
  std::map<std::string, double> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    const std::string type = ColumnText(q.get(), 2);
    if (type == "real" || type == "integer") {
      out[ColumnText(q.get(), 0)] = sqlite3_column_double(q.get(), 1);
    }
  }
  if (rc != SQLITE_DONE) return SqliteStatus(db, rc, "decode evidence");
  return out;
}

absl::StatusOr<std::vector<CauseLink>> DecodeCauses(sqlite3* db, const std::string& json) {
  Stmt q(db,
         "SELECT json_extract(value, '$.incident_id'), json_extract(value, '$.kind'), "
         "json_extract(value, '$.scope'), json_extract(value, '$.entity'), "
         "json_extract(value, '$.summary'), json_extract(value, '$.key'), "
         "json_extract(value, '$.shard'), json_extract(value, '$.evidence') FROM json_each(?1)");
  if (absl::Status s = q.status("prepare"); !s.ok()) return s;
  q.Text(1, json);
  std::vector<CauseLink> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    CauseLink c;
    c.incident_id = static_cast<uint64_t>(sqlite3_column_int64(q.get(), 0));
    c.kind = ColumnText(q.get(), 1);
    c.scope = ColumnText(q.get(), 2);
    absl::StatusOr<std::map<std::string, std::string>> e = DecodeLabels(db, ColumnText(q.get(), 3));
    if (!e.ok()) return e.status();
    c.entity = *std::move(e);
    c.summary = ColumnText(q.get(), 4);
    c.key = ColumnText(q.get(), 5);  // NULL (absent) reads as ""
    c.shard = ColumnText(q.get(), 6);
    if (std::string ev = ColumnText(q.get(), 7); !ev.empty()) {
      absl::StatusOr<std::map<std::string, double>> decoded = DecodeEvidence(db, ev);
      if (!decoded.ok()) return decoded.status();
      c.evidence = *std::move(decoded);
    }
    out.push_back(std::move(c));
  }
  if (rc != SQLITE_DONE) return SqliteStatus(db, rc, "decode causes");
  return out;
}

absl::StatusOr<std::vector<AffectedJob>> DecodeAffected(sqlite3* db, const std::string& json) {
  Stmt q(db,
         "SELECT json_extract(value, '$.job'), json_extract(value, '$.ranks'), "
         "json_extract(value, '$.nodes'), json_extract(value, '$.pods') FROM json_each(?1)");
  if (absl::Status s = q.status("prepare"); !s.ok()) return s;
  q.Text(1, json);
  std::vector<AffectedJob> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    AffectedJob a;
    a.job = ColumnText(q.get(), 0);
    Stmt items(db, "SELECT value FROM json_each(?1)");
    items.Text(1, ColumnText(q.get(), 1));
    while (items.Step() == SQLITE_ROW) a.ranks.push_back(sqlite3_column_int64(items.get(), 0));
    Stmt nodes(db, "SELECT value FROM json_each(?1)");
    nodes.Text(1, ColumnText(q.get(), 2));
    while (nodes.Step() == SQLITE_ROW) a.nodes.push_back(ColumnText(nodes.get(), 0));
    if (sqlite3_column_type(q.get(), 3) != SQLITE_NULL) {  // rows from before pods have none
      Stmt pods(db, "SELECT value FROM json_each(?1)");
      pods.Text(1, ColumnText(q.get(), 3));
      while (pods.Step() == SQLITE_ROW) a.pods.push_back(ColumnText(pods.get(), 0));
    }
    out.push_back(std::move(a));
  }
  if (rc != SQLITE_DONE) return SqliteStatus(db, rc, "decode affected");
  return out;
}

int64_t Nanos(absl::Time t) {
  if (t == absl::InfinitePast()) return INT64_MIN;
  if (t == absl::InfiniteFuture()) return INT64_MAX;
  return absl::ToUnixNanos(t);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteIncidentStore>> SqliteIncidentStore::Open(
    const std::string& state_dir, SqliteStoreOptions options) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("incident store: cannot create state dir ", state_dir, ": ", ec.message()));
  }
  const std::string path = (std::filesystem::path(state_dir) / options.file_name).string();
  absl::StatusOr<std::unique_ptr<SqliteIncidentStore>> store = OpenFile(path, options);
  if (store.ok() || !options.set_aside_damaged || !absl::IsDataLoss(store.status())) return store;
  // Damaged: keep it for a post-mortem under another name, and start an empty history.
  const std::string aside = absl::StrCat(path, ".damaged-", absl::ToUnixSeconds(absl::Now()));
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string from = absl::StrCat(path, suffix);
    std::filesystem::rename(from, absl::StrCat(aside, suffix), ec);
    if (ec && std::filesystem::exists(from)) {
      return absl::DataLossError(absl::StrCat(store.status().message(), " (cannot set it aside: ",
                                              ec.message(), ")"));
    }
  }
  absl::StatusOr<std::unique_ptr<SqliteIncidentStore>> fresh = OpenFile(path, options);
  if (!fresh.ok()) return fresh.status();
  (*fresh)->recovery_ = absl::StrCat(
      path, " is damaged (", store.status().message(), "): set aside as ", aside,
      "; its incidents are not restored, an empty incident history starts");
  return fresh;
}

absl::StatusOr<std::unique_ptr<SqliteIncidentStore>> SqliteIncidentStore::OpenFile(
    const std::string& path, const SqliteStoreOptions& options) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s = SqliteStatus(db, rc, absl::StrCat("open ", path));
    sqlite3_close(db);
    return s;
  }
  if (sqlite3_db_readonly(db, "main") == 1) {
    // SQLite falls back to reading a file it may not write (a read-only file system, no write
    // permission); the store must write, and SQLite's later errors would not say why.
    const std::string why = ::access(path.c_str(), W_OK) != 0 ? std::strerror(errno) : "read-only";
    sqlite3_close(db);
    return absl::PermissionDeniedError(
        absl::StrCat("incident store: cannot write ", path, ": ", why));
  }
  sqlite3_busy_timeout(db, static_cast<int>(absl::ToInt64Milliseconds(options.busy_timeout)));
  std::unique_ptr<SqliteIncidentStore> store(new SqliteIncidentStore(db, path));
  absl::MutexLock lock(&store->mu_);
  if (absl::Status s = store->Migrate(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " [", path, "]"));
  }
  if (options.set_aside_damaged) {
    if (absl::Status s = store->QuickCheck(); !s.ok()) return s;
    // Damage inside a row (its JSON) passes quick_check but would fail the load of the open
    // incidents at startup.
    absl::StatusOr<std::vector<Incident>> open =
        store->Select("WHERE resolved_ns IS NULL ORDER BY id", nullptr, nullptr);
    if (!open.ok()) {
      return absl::DataLossError(
          absl::StrCat("open incidents unreadable: ", open.status().message()));
    }
  }
  return store;
}

absl::Status SqliteIncidentStore::QuickCheck() {
  // Pages the schema cannot reach, broken b-trees, a file shorter than its pages: what a torn copy
  // or a damaged disk leaves, and what would otherwise fail later, in the middle of a Put.
  Stmt q(db_, "PRAGMA quick_check(1)");
  if (absl::Status s = q.status("quick_check"); !s.ok()) return s;
  const int rc = q.Step();
  if (rc != SQLITE_ROW) return SqliteStatus(db_, rc, "quick_check");
  const std::string verdict = ColumnText(q.get(), 0);
  if (verdict == "ok") return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("incident store: quick_check: ", verdict));
}

SqliteIncidentStore::~SqliteIncidentStore() {
  absl::MutexLock lock(&mu_);
  sqlite3_close_v2(db_);
}

absl::Status SqliteIncidentStore::Exec(const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return absl::OkStatus();
  // Named by the statement when short ("COMMIT": "incident store: COMMIT: database or disk is
  // full"); SqliteStatus adds SQLite's message, which `err` repeats.
  sqlite3_free(err);
  absl::Status s = SqliteStatus(db_, rc, std::strlen(sql) <= 40 ? sql : "exec");
  return s;
}

std::string SqliteIncidentStore::journal_mode() const {
  absl::MutexLock lock(&mu_);
  Stmt q(db_, "PRAGMA journal_mode");
  return q.Step() == SQLITE_ROW ? ColumnText(q.get(), 0) : "";
}

absl::Status SqliteIncidentStore::Migrate() {
  auto pragma_int = [&](const char* sql, int64_t& out) -> absl::Status {
    Stmt q(db_, sql);
    if (absl::Status s = q.status(sql); !s.ok()) return s;
    const int rc = q.Step();
    if (rc != SQLITE_ROW) return SqliteStatus(db_, rc, sql);
    out = sqlite3_column_int64(q.get(), 0);
    return absl::OkStatus();
  };
  int64_t app = 0, version = 0, tables = 0;
  // Reading the schema first tells a file that is not a database (DataLoss) from the rest.
  if (absl::Status s = pragma_int("SELECT count(*) FROM sqlite_master", tables); !s.ok()) return s;
  {
    Stmt q(db_, "PRAGMA journal_mode=WAL");
    const int rc = q.Step();
    if (rc != SQLITE_ROW) return SqliteStatus(db_, rc, "journal_mode=WAL");
    if (ColumnText(q.get(), 0) != "wal") {
      return absl::FailedPreconditionError(
          absl::StrCat("incident store: ", path_, " cannot use the WAL journal"));
    }
  }
  if (absl::Status s = Exec("PRAGMA synchronous=NORMAL"); !s.ok()) return s;
  if (absl::Status s = pragma_int("PRAGMA application_id", app); !s.ok()) return s;
  if (absl::Status s = pragma_int("PRAGMA user_version", version); !s.ok()) return s;
  if (app != 0 && app != kApplicationId) {
    return absl::FailedPreconditionError(
        absl::StrCat("incident store: ", path_, " is not a ringside incident database"));
  }
  if (app == 0 && tables > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("incident store: ", path_,
                     " holds tables that ringside did not write; refusing to use it"));
  }
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "incident store: ", path_, " has schema version ", version,
        ", newer than this ringside supports (", kSchemaVersion, "); upgrade ringside"));
  }
  if (version == kSchemaVersion) return absl::OkStatus();
  if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  for (int64_t v = version + 1; v <= kSchemaVersion; ++v) {
    if (absl::Status s = Exec(kMigrations[v - 1]); !s.ok()) {
      Exec("ROLLBACK").IgnoreError();
      return absl::Status(s.code(), absl::StrCat(s.message(), " (migration to version ", v, ")"));
    }
  }
  const std::string set = absl::StrCat("PRAGMA user_version=", kSchemaVersion,
                                       "; PRAGMA application_id=", kApplicationId, ";");
  if (absl::Status s = Exec(set.c_str()); !s.ok()) {
    Exec("ROLLBACK").IgnoreError();
    return s;
  }
  return Exec("COMMIT");
}

absl::Status SqliteIncidentStore::Put(const Incident& inc) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  const std::string sql = absl::StrCat(
      "INSERT INTO incidents(", kColumns,
      ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) "
      "ON CONFLICT(id) DO UPDATE SET key=excluded.key, kind=excluded.kind, "
      "severity=excluded.severity, opened_ns=excluded.opened_ns, updated_ns=excluded.updated_ns, "
      "resolved_ns=excluded.resolved_ns, entity=excluded.entity, evidence=excluded.evidence, "
      "summary=excluded.summary, resolution=excluded.resolution, causes=excluded.causes, "
      "affected=excluded.affected, revision=excluded.revision");
  absl::Status status;
  {
    Stmt q(db_, sql.c_str());
    status = q.status("prepare put");
    if (status.ok()) {
      q.Int(1, static_cast<int64_t>(inc.id));
      q.Text(2, inc.key);
      q.Text(3, IncidentKindName(inc.kind));
      q.Text(4, SeverityName(inc.severity));
      q.Int(5, Nanos(inc.opened));
      q.Int(6, Nanos(inc.updated));
      if (inc.resolved) {
        q.Int(7, Nanos(*inc.resolved));
      } else {
        q.Null(7);
      }
      q.Text(8, LabelsJson(inc.entity));
      q.Text(9, EvidenceJson(inc.evidence));
      q.Text(10, inc.summary);
      q.Text(11, inc.resolution);
      q.Text(12, CausesJson(inc.causes));
      q.Text(13, AffectedJson(inc.affected));
      q.Int(14, static_cast<int64_t>(inc.revision));
      const int rc = q.Step();
      if (rc != SQLITE_DONE) {
        status = SqliteStatus(db_, rc, absl::StrCat("put incident ", inc.id));
        if (status.code() == absl::StatusCode::kAlreadyExists) {
          status = absl::AlreadyExistsError(
              absl::StrCat("incident store: another incident is already open for ", inc.key));
        }
      }
    }
  }
  if (status.ok()) {
    Stmt q(db_, "UPDATE meta SET value = max(value, ?1) WHERE name = 'next_id'");
    q.Int(1, static_cast<int64_t>(inc.id + 1));
    const int rc = q.Step();
    if (rc != SQLITE_DONE) status = SqliteStatus(db_, rc, "next id");
  }
  if (!status.ok()) {
    Exec("ROLLBACK").IgnoreError();
    return status;
  }
  status = Exec("COMMIT");
  // A COMMIT that fails (a full disk: SQLITE_FULL, an I/O error) may leave the transaction open;
  // then every later BEGIN would fail ("cannot start a transaction within a transaction") even
  // once the disk has room again. Roll it back: the caller keeps the incident and retries.
  if (!status.ok() && sqlite3_get_autocommit(db_) == 0) Exec("ROLLBACK").IgnoreError();
  return status;
}

absl::StatusOr<Incident> SqliteIncidentStore::Row(sqlite3_stmt* s) {
  Incident inc;
  inc.id = static_cast<uint64_t>(sqlite3_column_int64(s, 0));
  inc.key = ColumnText(s, 1);
  std::optional<IncidentKind> kind = ParseIncidentKind(ColumnText(s, 2));
  std::optional<Severity> sev = ParseSeverity(ColumnText(s, 3));
  if (!kind || !sev) {
    return absl::DataLossError(
        absl::StrCat("incident store: incident ", inc.id, " has an unknown kind or severity"));
  }
  inc.kind = *kind;
  inc.severity = *sev;
  inc.opened = absl::FromUnixNanos(sqlite3_column_int64(s, 4));
  inc.updated = absl::FromUnixNanos(sqlite3_column_int64(s, 5));
  if (sqlite3_column_type(s, 6) != SQLITE_NULL) {
    inc.resolved = absl::FromUnixNanos(sqlite3_column_int64(s, 6));
  }
  absl::StatusOr<std::map<std::string, std::string>> entity = DecodeLabels(db_, ColumnText(s, 7));
  if (!entity.ok()) return entity.status();
  inc.entity = *std::move(entity);
  absl::StatusOr<std::map<std::string, double>> evidence = DecodeEvidence(db_, ColumnText(s, 8));
  if (!evidence.ok()) return evidence.status();
  inc.evidence = *std::move(evidence);
  inc.summary = ColumnText(s, 9);
  inc.resolution = ColumnText(s, 10);
  absl::StatusOr<std::vector<CauseLink>> causes = DecodeCauses(db_, ColumnText(s, 11));
  if (!causes.ok()) return causes.status();
  inc.causes = *std::move(causes);
  absl::StatusOr<std::vector<AffectedJob>> affected = DecodeAffected(db_, ColumnText(s, 12));
  if (!affected.ok()) return affected.status();
  inc.affected = *std::move(affected);
  inc.revision = static_cast<uint64_t>(sqlite3_column_int64(s, 13));
  return inc;
}

absl::StatusOr<std::vector<Incident>> SqliteIncidentStore::Select(const std::string& where_order,
                                                                  const IncidentQuery* query,
                                                                  const uint64_t* id) {
  const std::string sql = absl::StrCat("SELECT ", kColumns, " FROM incidents ", where_order);
  Stmt q(db_, sql.c_str());
  if (absl::Status s = q.status("prepare select"); !s.ok()) return s;
  if (id != nullptr) q.Int(1, static_cast<int64_t>(*id));
  if (query != nullptr) {
    q.Int(1, query->open_only ? 1 : 0);
    q.Text(2, query->kind ? IncidentKindName(*query->kind) : "");
    q.Int(3, Nanos(query->since));
    q.Int(4, static_cast<int64_t>(std::min<size_t>(query->limit, INT64_MAX)));
  }
  std::vector<Incident> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    absl::StatusOr<Incident> inc = Row(q.get());
    if (!inc.ok()) return inc.status();
    out.push_back(*std::move(inc));
  }
  if (rc != SQLITE_DONE) return SqliteStatus(db_, rc, "select");
  return out;
}

absl::StatusOr<std::vector<Incident>> SqliteIncidentStore::LoadOpen() {
  absl::MutexLock lock(&mu_);
  return Select("WHERE resolved_ns IS NULL ORDER BY id", nullptr, nullptr);
}

absl::StatusOr<uint64_t> SqliteIncidentStore::NextId() {
  absl::MutexLock lock(&mu_);
  Stmt q(db_,
         "SELECT max((SELECT value FROM meta WHERE name = 'next_id'), "
         "(SELECT coalesce(max(id), 0) + 1 FROM incidents))");
  const int rc = q.Step();
  if (rc != SQLITE_ROW) return SqliteStatus(db_, rc, "next id");
  return static_cast<uint64_t>(sqlite3_column_int64(q.get(), 0));
}

absl::StatusOr<std::optional<Incident>> SqliteIncidentStore::Get(uint64_t id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<Incident>> rows = Select("WHERE id = ?1", nullptr, &id);
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::optional<Incident>();
  return std::optional<Incident>(std::move(rows->front()));
}

absl::StatusOr<std::vector<Incident>> SqliteIncidentStore::List(const IncidentQuery& query) {
  absl::MutexLock lock(&mu_);
  return Select(
      "WHERE (?1 = 0 OR resolved_ns IS NULL) AND (?2 = '' OR kind = ?2) AND updated_ns >= ?3 "
      "ORDER BY id DESC LIMIT ?4",
      &query, nullptr);
}

}  // namespace ringside::analysis
