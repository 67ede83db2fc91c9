// The virtual-clock soak (`ringside-sim soak SCENARIO.yaml --node-hours=N`, docs/simulator.md):
// the scenario's cluster run in one process on an injected clock, as fast as the CPU allows, to
// measure false alarms per 1,000 node-hours. Per node the real sysfs tree writer and animator, the
// agent's real collectors and Sampler (sim/soak_node.h); the aggregator's real IngestCore with the
// real AnalysisHost as its observer, flushed on the virtual clock, with the simulator's topology;
// the job model's all-reduces turned into the CollectiveRecords the plugin and agent would send.
// Not in the soak: gRPC and the Uploader's session machinery, the NCCL plugin and its socket, the
// fake NVML, link events (the agents run with --link-events=false in `run` too), agent crashes.
#ifndef RINGSIDE_SIM_SOAK_H_
#define RINGSIDE_SIM_SOAK_H_

#include <csignal>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sim/incident_reader.h"
#include "sim/scenario.h"
#include "sim/scoring.h"

namespace ringside::sim {

struct SoakOptions {
  double node_hours = 1000;  // simulated node-hours to run (duration = node_hours / nodes)
  std::string work_dir;      // the nodes' trees go here (must exist)
  // Progress lines (at most every progress_every of wall time); null: none.
  std::function<void(const std::string&)> progress;
  absl::Duration progress_every = absl::Seconds(5);
  // Each incident opened, as it opens (null: none).
  std::function<void(const SimIncident&)> on_incident;
};

struct SoakResult {
  absl::Time t0;             // virtual time of simulation time 0
  absl::Duration simulated;  // simulation time covered
  double node_hours = 0;     // nodes × simulated hours
  uint64_t cycles = 0;       // sampling cycles (all nodes)
  uint64_t samples = 0;      // counter values sent to ingest
  uint64_t collective_records = 0;
  uint64_t read_errors = 0;            // the collectors' failed reads
  std::vector<SimIncident> incidents;  // every incident raised, by id
  ScoreReport score;                   // against the scenario's faults
  double wall_seconds = 0;
  bool interrupted = false;
  size_t false_alarms() const { return score.false_alarms.size(); }
  double false_alarms_per_1000h() const {
    return node_hours > 0 ? 1000.0 * static_cast<double>(false_alarms()) / node_hours : 0;
  }
  double speedup() const {
    return wall_seconds > 0 ? absl::ToDoubleSeconds(simulated) / wall_seconds : 0;
  }
};

// Runs the soak; `stop` (optional) ends it early (the result says interrupted). InvalidArgument
// for a scenario the soak cannot simulate (agent_crash, nvlink_degraded, aggregator_args).
absl::StatusOr<SoakResult> RunSoak(const Scenario& s, const SoakOptions& o,
                                   volatile std::sig_atomic_t* stop = nullptr);

// A plain-text summary and a Markdown section (with the command that produced it).
std::string FormatSoakSummary(const Scenario& s, const SoakResult& r, double max_per_1000h);
std::string SoakMarkdown(const Scenario& s, const SoakResult& r, double max_per_1000h,
                         const std::string& command);

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_SOAK_H_
