// Runs one scenario on a simulated cluster: starts it, applies the faults at their times, polls the
// aggregator's incidents (printing them as they open and resolve when asked), and scores what was
// raised against the ground truth when the time is up or the run is interrupted.
#ifndef RINGSIDE_SIM_RUNNER_H_
#define RINGSIDE_SIM_RUNNER_H_

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sim/cluster.h"
#include "sim/incident_reader.h"
#include "sim/scenario.h"
#include "sim/scoring.h"

namespace ringside::sim {

struct RunOptions {
  bool live = false;            // print injections and incidents as they happen
  std::string ctl_bin;          // the `ringside` CLI, for the "how to look" lines
  absl::Duration poll = absl::Seconds(1);
  std::FILE* out = stdout;
};

struct RunResult {
  absl::Time t0;
  absl::Duration ran;
  bool interrupted = false;
  std::vector<SimIncident> incidents;
  ScoreReport score;
  Cluster::CpuUse cpu;
  std::string incident_source;  // "http" or "sqlite"
  std::vector<std::string> problems;  // agents that died, read errors
};

absl::StatusOr<RunResult> RunScenario(const Scenario& s, const ClusterOptions& co,
                                      const RunOptions& ro, volatile std::sig_atomic_t* stop);

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_RUNNER_H_
