// `ringside import-trace --analyze`: the detectors run over imported records on the trace's own
// clock, and the incidents they raised, as a JSON array or a table.
#ifndef RINGSIDE_DAEMON_CTL_ANALYZE_TRACE_H_
#define RINGSIDE_DAEMON_CTL_ANALYZE_TRACE_H_

#include <ostream>
#include <string>
#include <vector>

#include "analysis/finding.h"
#include "analysis/import/import_result.h"

namespace ringside::daemon::ctl {

struct TraceIncident {
  analysis::IncidentKind kind;
  analysis::Severity severity;
  std::map<std::string, std::string> entity;
  absl::Time opened;
  absl::Time updated;
  absl::Time resolved = absl::InfinitePast();  // InfinitePast: still open at the end of the trace
  std::map<std::string, double> evidence;
  std::string summary;
};

// Feeds every record (collectives and point-to-point) to the straggler/job_slowdown detector in
// stop-time order and folds its findings into incidents.
std::vector<TraceIncident> AnalyzeRecords(const analysis::ImportResult& imported);

void WriteIncidentsJson(const std::vector<TraceIncident>& incidents, std::ostream& out);
void WriteIncidentsTable(const std::vector<TraceIncident>& incidents, std::ostream& out);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_ANALYZE_TRACE_H_
