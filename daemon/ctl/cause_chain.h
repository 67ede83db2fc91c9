// The cause chain of an incident: its CauseLinks followed through GetIncident, recursively, so a
// straggler shows the fabric incident behind it and whatever is behind that ("straggler rank 5
// (job j1) ← pause_storm node-b mlx5_0 prio 3 (#12)"). Safe against cycles (an id already on the
// path is not followed again), bounded in depth and in fetches, and a cause that cannot be
// fetched is shown with the reason instead of failing the command.
#ifndef RINGSIDE_DAEMON_CTL_CAUSE_CHAIN_H_
#define RINGSIDE_DAEMON_CTL_CAUSE_CHAIN_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ringside/v1/query.pb.h"

namespace ringside::daemon::ctl {

struct ChainStep {
  v1::CauseLink link;                    // as the incident one step closer to the root names it
  std::optional<v1::Incident> incident;  // fetched (not for incident_id 0 or on failure)
  std::string note;                      // "", "cycle", "not found", "depth limit" or an error
};

// One path from the root's direct cause to a final cause (root not included).
using CausePath = std::vector<ChainStep>;

using IncidentFetcher = std::function<absl::StatusOr<v1::Incident>(uint64_t id)>;

struct ChainLimits {
  int max_depth = 8;     // steps on one path
  int max_fetches = 64;  // GetIncident calls in all
  int max_paths = 32;
};

// Every path through the root's causes, depth first, in the order the causes are listed. An
// incident fetched once is not fetched again.
std::vector<CausePath> ResolveCauseChains(const v1::Incident& root, const IncidentFetcher& fetch,
                                          ChainLimits limits = {});

// "straggler rank 5 (job j1) on node-a ← pause_storm node-b mlx5_0 prio 3 (#12)".
std::string ChainText(const v1::Incident& root, const CausePath& path);

// One step: "pause_storm node-b mlx5_0 prio 3 (#12)", "host node-a", "... (#12, cycle)".
std::string StepText(const ChainStep& step);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_CAUSE_CHAIN_H_
