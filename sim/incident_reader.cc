#include "sim/incident_reader.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringside::sim {
namespace {

using nlohmann::json;

std::map<std::string, std::string> Labels(const json& j) {
  std::map<std::string, std::string> out;
  if (!j.is_object()) return out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    out[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
  }
  return out;
}

std::vector<SimCause> Causes(const json& j) {
  std::vector<SimCause> out;
  if (!j.is_array()) return out;
  for (const json& c : j) {
    SimCause sc;
    if (c.contains("kind") && c["kind"].is_string()) sc.kind = c["kind"].get<std::string>();
    if (c.contains("summary") && c["summary"].is_string()) sc.summary = c["summary"].get<std::string>();
    out.push_back(sc);
  }
  return out;
}

std::vector<std::string> AffectedJobs(const json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const json& a : j) {
    if (a.contains("job") && a["job"].is_string()) out.push_back(a["job"].get<std::string>());
  }
  return out;
}

std::optional<absl::Time> ParseTimeJson(const json& j) {
  if (!j.is_string()) return std::nullopt;
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, j.get<std::string>(), &t, &err)) return std::nullopt;
  return t;
}

}  // namespace

absl::StatusOr<std::vector<SimIncident>> ParseIncidentsJson(const std::string& text) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return absl::DataLossError("incidents: not JSON");
  if (doc.is_object() && doc.contains("incidents")) doc = doc["incidents"];
  if (!doc.is_array()) return absl::DataLossError("incidents: not a JSON array");
  std::vector<SimIncident> out;
  for (const json& j : doc) {
    if (!j.is_object()) continue;
    SimIncident inc;
    if (j.contains("id") && j["id"].is_number()) inc.id = j["id"].get<uint64_t>();
    if (j.contains("kind") && j["kind"].is_string()) inc.kind = j["kind"].get<std::string>();
    if (j.contains("severity") && j["severity"].is_string()) inc.severity = j["severity"].get<std::string>();
    if (j.contains("entity")) inc.entity = Labels(j["entity"]);
    if (j.contains("opened")) inc.opened = ParseTimeJson(j["opened"]).value_or(absl::InfinitePast());
    if (j.contains("resolved")) inc.resolved = ParseTimeJson(j["resolved"]);
    if (j.contains("summary") && j["summary"].is_string()) inc.summary = j["summary"].get<std::string>();
    if (j.contains("causes")) inc.causes = Causes(j["causes"]);
    if (j.contains("affected")) inc.affected_jobs = AffectedJobs(j["affected"]);
    out.push_back(std::move(inc));
  }
  return out;
}

absl::StatusOr<std::pair<int, std::string>> HttpGet(int port, const std::string& path,
                                                    absl::Duration timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("connect 127.0.0.1:", port, ": ", strerror(errno)));
  }
  const std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return absl::UnavailableError("send");
  }
  std::string resp;
  const absl::Time deadline = absl::Now() + timeout;
  char buf[65536];
  for (;;) {
    const int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (left <= 0) {
      ::close(fd);
      return absl::DeadlineExceededError("HTTP GET timed out");
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    resp.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  const size_t sp = resp.find(' ');
  const size_t body = resp.find("\r\n\r\n");
  int code = 0;
  if (sp == std::string::npos || body == std::string::npos ||
      !absl::SimpleAtoi(resp.substr(sp + 1, 3), &code)) {
    return absl::DataLossError("bad HTTP response");
  }
  return std::make_pair(code, resp.substr(body + 4));
}

absl::StatusOr<std::vector<SimIncident>> IncidentReader::FromHttp() {
  absl::StatusOr<std::pair<int, std::string>> r = HttpGet(http_port_, "/api/v1/incidents");
  if (!r.ok()) return r.status();
  if (r->first == 404) return absl::NotFoundError("no /api/v1/incidents");
  if (r->first != 200) return absl::UnavailableError(absl::StrCat("HTTP ", r->first));
  return ParseIncidentsJson(r->second);
}

absl::StatusOr<std::vector<SimIncident>> IncidentReader::FromSqlite() {
  const std::string path = state_dir_ + "/incidents.db";
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    const std::string msg = db ? sqlite3_errmsg(db) : "open failed";
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat(path, ": ", msg));
  }
  sqlite3_busy_timeout(db, 2000);
  sqlite3_stmt* st = nullptr;
  const char* q =
      "SELECT id, kind, severity, opened_ns, resolved_ns, entity, summary, causes, affected "
      "FROM incidents ORDER BY id";
  if (sqlite3_prepare_v2(db, q, -1, &st, nullptr) != SQLITE_OK) {
    const std::string msg = sqlite3_errmsg(db);
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat(path, ": ", msg));
  }
  std::vector<SimIncident> out;
  auto text = [&](int col) {
    const unsigned char* t = sqlite3_column_text(st, col);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  };
  while (sqlite3_step(st) == SQLITE_ROW) {
    SimIncident inc;
    inc.id = static_cast<uint64_t>(sqlite3_column_int64(st, 0));
    inc.kind = text(1);
    inc.severity = text(2);
    inc.opened = absl::FromUnixNanos(sqlite3_column_int64(st, 3));
    if (sqlite3_column_type(st, 4) != SQLITE_NULL) {
      inc.resolved = absl::FromUnixNanos(sqlite3_column_int64(st, 4));
    }
    inc.entity = Labels(json::parse(text(5), nullptr, false));
    inc.summary = text(6);
    inc.causes = Causes(json::parse(text(7), nullptr, false));
    inc.affected_jobs = AffectedJobs(json::parse(text(8), nullptr, false));
    out.push_back(std::move(inc));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

absl::StatusOr<std::vector<SimIncident>> IncidentReader::Fetch() {
  // The Query endpoint is preferred; whether it exists is asked again now and then (it may be a
  // newer aggregator than this simulator knows).
  if (!http_missing_ || ++http_checks_ % 30 == 0) {
    absl::StatusOr<std::vector<SimIncident>> h = FromHttp();
    if (h.ok()) {
      http_missing_ = false;
      source_ = "http";
      return h;
    }
    if (absl::IsNotFound(h.status())) http_missing_ = true;
  }
  source_ = "sqlite";
  return FromSqlite();
}

}  // namespace ringside::sim
