// A simulated node's host signals as the agent reads them (collectors/host/host_collector.h):
// <node>/proc/pressure/{cpu,memory,io} (quiet, fixed) and, per local rank, a cgroup of its own,
// /ringside-sim.slice/rank-<r>.scope, with <node>/sys/fs/cgroup/<that>/cpu.stat and the
// /proc/self/cgroup file its plugin reads ($RINGSIDE_PROC_SELF_CGROUP). A `cpu_throttled` fault
// makes a rank's cgroup hit its CPU quota: nr_throttled and throttled_usec grow while it lasts.
#ifndef RINGSIDE_SIM_HOST_STATE_H_
#define RINGSIDE_SIM_HOST_STATE_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ringside::sim {

// The cgroup path of a simulated rank.
std::string RankCgroup(int rank);

class HostState {
 public:
  // `dir` is the node's folder (its sys/ and proc/ are written under it).
  HostState(std::string dir, int first_rank, int ranks);
  // The file a rank's plugin reads as /proc/self/cgroup.
  std::string CgroupFile(int rank) const;
  // The rank's cgroup throttled (`share` of each 100 ms period, 0..1) or not, from `t` on.
  void SetThrottled(int rank, double share, absl::Duration t);
  // Advances the cgroups' counters to `t` and writes what changed (everything the first time).
  absl::Status Write(absl::Duration t);
  const std::string& procfs_root() const { return proc_; }

 private:
  struct Rank {
    double share = 0;  // throttled share of each period
    double usage_us = 0, periods = 0, throttled = 0, throttled_us = 0;
  };
  std::string dir_, proc_, sys_;
  int first_rank_;
  std::map<int, Rank> ranks_;
  absl::Duration last_ = absl::ZeroDuration();
  bool written_ = false;
};

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_HOST_STATE_H_
