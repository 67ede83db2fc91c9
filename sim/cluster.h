// The simulated cluster: a real ringside-aggregator on 127.0.0.1, and per node a sysfs tree in the
// kernel's format (one RoCE rail per GPU: mlx5_<k> with its netdev), `ethtool -S` dumps, a fake
// NVML config for its GPUs, a real ringside-agent reading them, and a job process driving the real
// NCCL profiler plugin into the agent's collective socket. Faults of the scenario are applied by
// Step() at their times, through the same files and processes a real cluster would change.
#ifndef RINGSIDE_SIM_CLUSTER_H_
#define RINGSIDE_SIM_CLUSTER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sim/child_process.h"
#include "sim/node_animator.h"
#include "sim/nvml_state.h"
#include "sim/scenario.h"
#include "sim/sysfs_tree.h"

namespace ringside::sim {

struct ClusterOptions {
  std::string agent_bin;       // ringside-agent
  std::string aggregator_bin;  // ringside-aggregator
  std::string plugin;          // libringside_nccl.so
  std::string nvml_library;    // the fake libnvidia-ml.so.1
  std::string work_dir;        // where trees, sockets, logs and the state dir go (must exist)
  // How often Step() is expected to be called; the animators write counters at this pace.
  absl::Duration step = absl::Milliseconds(250);
};

// The phase of a run's clock against the agents' sampling, in [0, 1) of an interval: time 0 comes
// this long after the agents are up. Fixed by the seed, so a rerun of a seed repeats it.
double SeedPhase(uint64_t seed);

class Cluster {
 public:
  static absl::StatusOr<std::unique_ptr<Cluster>> Start(const Scenario& scenario,
                                                        ClusterOptions options);
  ~Cluster();

  // Applies the scenario at simulation time `t` (since t0): counters, faults, agent crashes.
  // Returns lines describing what was injected at this step.
  std::vector<std::string> Step(absl::Duration t);
  void Stop();

  int64_t t0_ns() const { return t0_ns_; }
  absl::Time t0() const { return absl::FromUnixNanos(t0_ns_); }
  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_port_; }
  const std::string& state_dir() const { return state_dir_; }
  std::vector<int> metrics_ports() const;
  // Agents that exited on their own (not by a crash fault).
  std::vector<std::string> DeadAgents();
  // Per process CPU seconds used so far (user + system): the simulator itself, agents, aggregator,
  // job processes.
  struct CpuUse {
    double sim = 0, agents = 0, aggregator = 0, jobs = 0;
  };
  CpuUse Cpu() const;

 private:
  struct Node;
  Cluster(const Scenario& s, ClusterOptions o);
  absl::Status StartAggregator();
  absl::Status BuildNode(int i);
  absl::Status StartAgent(Node& n);
  absl::Status StartJob(Node& n);

  const Scenario& s_;
  ClusterOptions o_;
  std::string state_dir_, topology_;
  ChildProcess aggregator_;
  int grpc_port_ = 0, http_port_ = 0;
  std::vector<std::unique_ptr<Node>> nodes_;
  int64_t t0_ns_ = 0;
  std::vector<bool> announced_, ended_;
  absl::Duration last_t_ = absl::ZeroDuration();
  bool stopped_ = false;
  double sim_cpu_at_start_ = 0;  // this process's CPU seconds when the cluster started
};

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_CLUSTER_H_
