// Which incidents a query selects, shared by the Query API (ListIncidents, WatchIncidents) and the
// HTTP endpoint GET /api/v1/incidents: the open incidents from the analysis in memory, the
// history from the incident store (SQLite under --state-dir), filtered by kind, node, job and time.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_QUERY_INCIDENT_QUERIES_H_
#define RINGSIDE_DAEMON_AGGREGATOR_QUERY_INCIDENT_QUERIES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/incidents.h"
#include "daemon/common/http_server.h"

namespace ringside::daemon {

class AnalysisHost;

struct IncidentFilter {
  bool open_only = false;
  std::optional<analysis::IncidentKind> kind;  // unset: every kind
  std::string node;                            // entity node equals; empty: any
  std::string job;  // entity job equals, or the job is among the affected; empty: any
  absl::Time since = absl::InfinitePast();  // updated at or after
  size_t limit = 100;                       // newest (highest id) first
};

constexpr size_t kMaxIncidentLimit = 10000;

// "" → no kind; a known kind name → it; anything else → InvalidArgument naming the kinds.
absl::StatusOr<std::optional<analysis::IncidentKind>> ParseKindFilter(absl::string_view kind);
// Whether `inc` passes the filter's kind, node, job, since and open_only (not its limit).
bool IncidentMatches(const IncidentFilter& filter, const analysis::Incident& inc);

// The incidents `filter` selects, newest first, at most `limit` (0 is taken as 100, more than
// kMaxIncidentLimit as that). `host` may be null (no analysis: nothing). An incident in memory
// wins over its stored copy. Fails only when the store fails (Unavailable).
absl::StatusOr<std::vector<analysis::Incident>> QueryIncidents(const AnalysisHost* host,
                                                               const IncidentFilter& filter);
// One incident by id: memory first, then the store. NotFound for an id never had.
absl::StatusOr<analysis::Incident> FindIncident(const AnalysisHost* host, uint64_t id);

// GET /api/v1/incidents?open=1&kind=K&node=N&job=J&since=UNIX_SECONDS&limit=L → a JSON array of
// analysis::IncidentJson objects; 400 with {"error": ...} for a bad parameter.
HttpResponse IncidentsHttp(const AnalysisHost* host, const HttpRequest& request);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_QUERY_INCIDENT_QUERIES_H_
