// `ringside import-trace --analyze`: the detectors run over imported records on the trace's own
// clock, and the incidents they raised, as a JSON array or a table.
#ifndef RINGSIDE_DAEMON_CTL_ANALYZE_TRACE_H_
#define RINGSIDE_DAEMON_CTL_ANALYZE_TRACE_H_

#include <ostream>
#include <string>
#include <vector>

#include "analysis/finding.h"
#include "analysis/import/import_result.h"
#include "analysis/straggler_detector.h"

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
  // The collective sequence number of the instance whose completion opened (resolved) it; -1 when
  // still open.
  int64_t opened_seq = -1;
  int64_t resolved_seq = -1;
};

// Feeds every record (collectives and point-to-point) to the straggler/job_slowdown detector (the
// aggregator's, with `options`) in stop-time order, converted as the aggregator converts them
// (analysis/import/record_observation.h), and folds its findings into incidents.
std::vector<TraceIncident> AnalyzeRecords(const analysis::ImportResult& imported,
                                          const analysis::StragglerOptions& options = {});

void WriteIncidentsJson(const std::vector<TraceIncident>& incidents, std::ostream& out);
void WriteIncidentsTable(const std::vector<TraceIncident>& incidents, std::ostream& out);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_ANALYZE_TRACE_H_
