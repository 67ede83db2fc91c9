// The incident history in SQLite: one file, `incidents.db`, under the aggregator's --state-dir.
//
// WAL journal (readers never block the writer; a crash loses at most the last transaction),
// synchronous=NORMAL, a busy timeout. The schema is versioned with PRAGMA user_version and marked
// with PRAGMA application_id: Open() creates it in an empty file, applies the migrations from the
// file's version up to kSchemaVersion in one transaction, and refuses (FailedPrecondition) a file
// written by a newer ringside or by something else. A partial unique index on `key` where
// `resolved_ns IS NULL` keeps at most one open incident per key, so a restart can never open a
// duplicate. `meta.next_id` keeps ids from ever being reused.
//
// Columns hold the entity, evidence, causes and blast radius as JSON (incidents.h), readable with
// the sqlite3 shell: `sqlite3 incidents.db "select id, kind, entity from incidents"`.
//
// Thread-safe (one connection under a mutex).
#ifndef RINGSIDE_ANALYSIS_SQLITE_INCIDENT_STORE_H_
#define RINGSIDE_ANALYSIS_SQLITE_INCIDENT_STORE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "analysis/incident_store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ringside::analysis {

struct SqliteStoreOptions {
  std::string file_name = "incidents.db";
  absl::Duration busy_timeout = absl::Seconds(5);
  // A file SQLite finds damaged (not a database, malformed, failing PRAGMA quick_check, or open
  // incidents that cannot be read back; after a failing disk, or a copy cut short) is renamed to <file>.damaged-<unix seconds>
  // (with its -wal and -shm) and an empty store is created in its place; recovery() says so.
  // Otherwise Open() refuses such a file (DataLoss).
  bool set_aside_damaged = false;
};

class SqliteIncidentStore : public IncidentStore {
 public:
  static constexpr int kSchemaVersion = 1;
  static constexpr int kApplicationId = 0x52534944;  // "RSID"

  // Opens (creating the folder and the file when missing) `state_dir`/`options.file_name`.
  static absl::StatusOr<std::unique_ptr<SqliteIncidentStore>> Open(const std::string& state_dir,
                                                                   SqliteStoreOptions options = {});
  ~SqliteIncidentStore() override;
  SqliteIncidentStore(const SqliteIncidentStore&) = delete;
  SqliteIncidentStore& operator=(const SqliteIncidentStore&) = delete;

  absl::Status Put(const Incident& incident) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<Incident>> LoadOpen() override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<uint64_t> NextId() override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<Incident>> Get(uint64_t id) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<Incident>> List(const IncidentQuery& query) override
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& path() const { return path_; }
  // What Open() did about a damaged file (set_aside_damaged), or empty.
  const std::string& recovery() const { return recovery_; }
  std::string journal_mode() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  SqliteIncidentStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  static absl::StatusOr<std::unique_ptr<SqliteIncidentStore>> OpenFile(
      const std::string& path, const SqliteStoreOptions& options);
  absl::Status Migrate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status QuickCheck() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Incident> Row(sqlite3_stmt* stmt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<Incident>> Select(const std::string& where_order,
                                               const IncidentQuery* q, const uint64_t* id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  const std::string path_;
  std::string recovery_;
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_SQLITE_INCIDENT_STORE_H_
