// A simulator scenario: the cluster's shape, its traffic and training job, the faults injected at
// given times, and the ground truth — the incidents each fault must raise (kind, entity, cause).
// Read from YAML (docs/simulator.md describes every key); the demo's scenario is built in.
#ifndef RINGSIDE_SIM_SCENARIO_H_
#define RINGSIDE_SIM_SCENARIO_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringside::sim {

// An incident a fault must raise.
struct Expectation {
  std::string kind;                           // "pause_storm", "straggler", ...
  std::map<std::string, std::string> entity;  // keys that must match the incident's entity
  std::string cause;                          // "" any; "host", "pause_storm", ... (first cause)
};

enum class FaultKind {
  kLinkFlap,        // port down 3 s of every 10 s (state, phys_state, link_downed, carrier)
  kLinkDown,        // port down for the whole duration
  kLinkDegraded,    // symbol errors on an RDMA port
  kNvlinkDegraded,  // NVLink replay and CRC errors (fake NVML)
  kPauseStorm,      // the port sends PFC pauses; the other nodes of its leaf are paused
  kCongestion,      // ECN marks and CNPs on a RoCE port
  kStraggler,       // one rank computes slower
  kJobSlowdown,     // every collective takes longer (no culprit)
  kCounterReset,    // driver reload: every counter of the node back to 0
  kAgentCrash,      // the node's agent is killed and restarted after `duration`
  // GPU faults through the fake NVML (sim/nvml_state.h; docs/simulator.md). With `rank` and
  // `slowdown_pct` the GPU's rank also computes slower, as a throttled GPU makes it.
  kGpuThermalSlowdown,  // `gpu` of `node` in hardware thermal slowdown
  kGpuPowerCap,         // every GPU of every node at its software power cap (normal under load)
  kGpuXid,              // XID `xid` on `gpu` of `node`, once at `start`
  kCpuThrottled,        // `rank`'s cgroup hits its CPU quota (sim/host_state.h); with
                        // `slowdown_pct` the rank also computes (arrives) that much later
};

absl::string_view FaultKindName(FaultKind k);
bool ParseFaultKind(absl::string_view name, FaultKind* out);

struct FaultSpec {
  FaultKind kind = FaultKind::kLinkFlap;
  int node = 0;            // node index
  std::string device;      // "mlx5_3" (port faults); default: the rail of `rank` or mlx5_0
  int gpu = 0, link = 0;   // NVLink faults
  int rank = -1;           // straggler: the global rank; fabric faults: a rank they slow (-1 none)
  double slowdown_pct = 0; // straggler / fabric-caused straggler: compute slower by this much
  double factor = 2.0;     // job_slowdown: collectives take this many times longer
  uint64_t xid = 79;       // gpu_xid: the XID number
  double throttled_share = 0.4;  // cpu_throttled: share of each quota period throttled
  absl::Duration start;
  absl::Duration duration = absl::Seconds(30);
  std::string note;        // printed when injected
  std::vector<Expectation> expect;
  std::vector<std::string> allow;  // kinds it may also raise without counting as false alarms
};

struct Scenario {
  std::string name = "scenario";
  std::string description;
  int nodes = 8;
  int gpus = 8;            // GPUs and RoCE rails (mlx5_<i>, one per GPU) per node
  int nodes_per_leaf = 4;  // topology: nodes under each leaf switch
  int nvlinks = 18;        // NVLinks per GPU
  absl::Duration duration = absl::Seconds(120);
  absl::Duration interval = absl::Seconds(1);  // the agents' sampling interval
  uint64_t seed = 1;
  // Traffic.
  double gbytes_per_second = 20;  // per rail, each way
  double noise = 0.05;            // relative noise of traffic
  bool background_noise = true;   // single symbol errors, short pause bursts, ECN blips
  // The training job.
  bool job = true;
  std::string job_id = "llm-pretrain-42";
  absl::Duration compute = absl::Milliseconds(120);   // per iteration, per rank
  absl::Duration collective = absl::Milliseconds(15);  // the all-reduce itself
  double jitter = 0.01;                                // relative compute noise
  std::vector<FaultSpec> faults;
  // Extra aggregator flags (e.g. shorter detector windows once the aggregator has them).
  std::vector<std::string> aggregator_args;
  // How long after a fault ends an incident still counts as its detection.
  absl::Duration grace = absl::Seconds(30);

  std::string NodeName(int i) const;
  int ranks() const { return nodes * gpus; }
};

absl::StatusOr<Scenario> ParseScenario(absl::string_view yaml_text);
absl::StatusOr<Scenario> LoadScenario(const std::string& path);

// The demo's scenario: 8 nodes × 8 GPUs, a 64-rank job, five faults over about two minutes.
Scenario DemoScenario(int nodes, int gpus, absl::Duration duration);

// Expected incidents filled in for faults that give none (the defaults of docs/simulator.md).
void FillDefaultExpectations(Scenario& s);

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_SCENARIO_H_
