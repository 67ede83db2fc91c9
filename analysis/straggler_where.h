// Where a straggler's lateness is, from its incident's evidence: "host" (it enqueued its
// collectives late), "gpu" (it enqueued on time, its kernels started late) or "unknown" (the
// clocks did not allow the split). The straggler detector writes host_share (the host part of the
// lateness, summed over its late instances with a known split) only when the split is known; the
// larger part names where. One function, so the incident, the CLI, the alerts and the Query API
// all say the same.
#ifndef RINGSIDE_ANALYSIS_STRAGGLER_WHERE_H_
#define RINGSIDE_ANALYSIS_STRAGGLER_WHERE_H_

#include <map>
#include <string>

namespace ringside::analysis {

// "host", "gpu" or "unknown".
std::string StragglerWhere(const std::map<std::string, double>& evidence);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_STRAGGLER_WHERE_H_
