// The simulated training job's timing: iteration after iteration, every rank computes (its own
// speed, jitter, and any straggler fault slowing it), then joins an all-reduce that ends when the
// last rank has arrived plus the collective's own time (longer under a job-wide slowdown). Each
// rank's GPU kernel starts when it arrives and stops at the end, so the late rank shows the
// shortest kernel time, as in NCCL. Deterministic in (seed, iteration, rank): every node's job
// process computes the same timeline without talking to the others.
#ifndef RINGSIDE_SIM_JOB_MODEL_H_
#define RINGSIDE_SIM_JOB_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "sim/scenario.h"

namespace ringside::sim {

struct Iteration {
  uint64_t index = 0;
  int64_t begin_ns = 0;              // unix ns: every rank leaves the previous collective
  std::vector<int64_t> arrive_ns;    // per global rank: kernel start
  std::vector<int64_t> stop_ns;      // per global rank: kernel stop
  int64_t end_ns = 0;                // the collective's end
};

class JobModel {
 public:
  // `t0_ns`: unix ns of simulation time 0 (the faults' clock).
  JobModel(const Scenario& scenario, int64_t t0_ns);
  // The next iteration (the first starts at t0).
  const Iteration& Next();
  // How much slower (fraction) `rank` computes at simulation time `t`, and the collective factor.
  double RankSlowdown(int rank, absl::Duration t) const;
  double CollectiveFactor(absl::Duration t) const;

 private:
  double Noise(uint64_t i, uint64_t r, uint64_t salt) const;  // ~N(0, 1)

  const Scenario& s_;
  int64_t t0_ns_;
  Iteration it_;
  bool started_ = false;
};

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_JOB_MODEL_H_
