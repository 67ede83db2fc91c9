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
  // Aggregators: `shards` × `replicas` (issue #14). With more than one of either, every
  // aggregator gets --shard-map (a file "shard-<k> 127.0.0.1:<port> ..." in the work dir) and
  // --shard, and --peers naming the other replicas of its shard; the agents get --shard-map and
  // --topology and route by them. One of each: the single aggregator of every scenario.
  int shards = 1;
  int replicas = 1;
  // False: the aggregators get no --topology and learn the fabric from the agents (LLDP, subnet
  // discovery; docs/lldp.md). Sharded agents still route by the file.
  bool topology_file = true;
  // Extra flags for node i's agent (index i; missing or empty: none), e.g. --lldp-socket.
  std::vector<std::vector<std::string>> agent_args;
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
  // Shard 0's first replica (the only aggregator of a plain scenario).
  int grpc_port() const { return aggregators_[0].grpc_port; }
  int http_port() const { return aggregators_[0].http_port; }
  const std::string& state_dir() const { return aggregators_[0].state_dir; }
  // Every aggregator, shard by shard.
  int grpc_port(int shard, int replica) const { return Agg(shard, replica).grpc_port; }
  int http_port(int shard, int replica) const { return Agg(shard, replica).http_port; }
  std::string aggregator_log(int shard, int replica) const { return Agg(shard, replica).proc.Log(); }
  const std::string& shard_map_file() const { return shard_map_; }
  const std::string& topology_file() const { return topology_; }
  // Kills one aggregator (SIGKILL) / starts it again on the same ports, with its state dir
  // emptied first when `wipe_state` (a replaced replica).
  void KillAggregator(int shard, int replica);
  absl::Status RestartAggregator(int shard, int replica, bool wipe_state);
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
  struct Aggregator {
    int shard = 0, replica = 0;
    std::string state_dir, log;
    int grpc_port = 0, http_port = 0;
    ChildProcess proc;
  };
  Cluster(const Scenario& s, ClusterOptions o);
  const Aggregator& Agg(int shard, int replica) const {
    return aggregators_[static_cast<size_t>(shard * o_.replicas + replica)];
  }
  bool Sharded() const { return o_.shards > 1 || o_.replicas > 1; }
  absl::Status StartAggregator(Aggregator& a);
  absl::Status BuildNode(int i);
  absl::Status StartAgent(Node& n);
  absl::Status StartJob(Node& n);

  const Scenario& s_;
  ClusterOptions o_;
  std::string topology_, shard_map_;
  std::vector<Aggregator> aggregators_;
  std::vector<std::unique_ptr<Node>> nodes_;
  int64_t t0_ns_ = 0;
  std::vector<bool> announced_, ended_;
  absl::Duration last_t_ = absl::ZeroDuration();
  bool stopped_ = false;
  double sim_cpu_at_start_ = 0;  // this process's CPU seconds when the cluster started
};

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_CLUSTER_H_
