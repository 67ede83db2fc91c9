// Reads the aggregator's incidents back: from its Query HTTP endpoint (GET /api/v1/incidents, a
// JSON array of analysis::IncidentJson objects) when it answers, else from incidents.db in its
// state dir (read-only SQLite, the same JSON in its columns).
#ifndef RINGSIDE_SIM_INCIDENT_READER_H_
#define RINGSIDE_SIM_INCIDENT_READER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringside::sim {

struct SimCause {
  std::string kind;  // "pause_storm", ..., "host"
  std::string summary;
};

struct SimIncident {
  uint64_t id = 0;
  std::string kind;
  std::string severity;
  std::map<std::string, std::string> entity;
  absl::Time opened;
  std::optional<absl::Time> resolved;
  std::string summary;
  std::vector<SimCause> causes;
  std::vector<std::string> affected_jobs;
};

class IncidentReader {
 public:
  IncidentReader(int http_port, std::string state_dir)
      : http_port_(http_port), state_dir_(std::move(state_dir)) {}
  // Every incident, open and resolved, by id.
  absl::StatusOr<std::vector<SimIncident>> Fetch();
  // "http" or "sqlite": where the last Fetch read from.
  const std::string& source() const { return source_; }

 private:
  absl::StatusOr<std::vector<SimIncident>> FromHttp();
  absl::StatusOr<std::vector<SimIncident>> FromSqlite();

  int http_port_;
  std::string state_dir_;
  std::string source_;
  bool http_missing_ = false;
  int http_checks_ = 0;
};

// Parses a JSON array of incidents (the HTTP endpoint's answer).
absl::StatusOr<std::vector<SimIncident>> ParseIncidentsJson(const std::string& text);

// One HTTP/1.0 GET on 127.0.0.1; the status code and body.
absl::StatusOr<std::pair<int, std::string>> HttpGet(int port, const std::string& path,
                                                    absl::Duration timeout = absl::Seconds(5));

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_INCIDENT_READER_H_
