// How late each rank of one completed collective instance was, and where: on the host (it
// enqueued the collective late) or on the GPU (it enqueued on time, its kernel started late).
//
// Kernel-level lateness (what holds the others back) is measured as the straggler detector always
// did: behind the communicator's median arrival, from kernel start times when every rank's clock
// is marked synchronised, else from kernel durations (a late rank waits less), each on its own
// clock. Host lateness is the rank's enqueue time behind the median enqueue time, used only on
// clocks that allow it: every rank on one node (one clock), or every rank's node reporting a clock
// error bound (adjtimex) with twice the largest bound at most `clock_error_ratio` of the margin.
//
// GPU sharing. Ranks whose processes time-share one GPU (same node, same GPU: the PCI bus id, else
// the CUDA ordinal) cannot all run at once: their kernels start one time slice after another, so
// the later-scheduled ranks look late although nobody is (kernel starts 6.8 ms apart with host
// enqueues within 0.8 ms, on a real H200 with four processes). For such a rank, the time its
// kernel waited after its enqueue is explained by sharing for one time slice (the median gap
// between the group's kernel starts in this instance) per other process of the group whose kernel
// was already running while it waited; only the rest counts as GPU lateness. Its lateness is then
// min(kernel-level lateness, host lateness + unexplained GPU wait): a rank held back on its host
// still shows, a rank whose own GPU work delays its collective still shows, and a rank that is
// merely scheduled after the others does not. Without comparable enqueue times it is judged by
// its kernel-level lateness alone, as before.
#ifndef RINGSIDE_ANALYSIS_STRAGGLER_LATENESS_H_
#define RINGSIDE_ANALYSIS_STRAGGLER_LATENESS_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace ringside::analysis {

struct RankArrival {
  int64_t start_ns = 0;     // kernel start, the rank's clock
  int64_t duration_ns = 0;  // kernel stop - start
  int64_t enqueue_ns = 0;   // host enqueue, the rank's clock; 0: unknown
  bool synced = false;      // the plugin's clock_synchronized
  int64_t clock_error_ns = -1;  // its node's clock error bound; -1: unknown
  int32_t host = -1;        // its node, as an index (same index: same clock); -1: unknown
  int32_t gpu = -1;         // its GPU, as an index (same index: one GPU shared); -1: unknown
};

struct LatenessOptions {
  absl::Duration min_margin = absl::Microseconds(200);
  double min_margin_ratio = 0.5;
  // Enqueue times of ranks on different nodes are compared only when 2 × the largest clock error
  // bound is at most this fraction of the margin.
  double clock_error_ratio = 0.25;
  // Discount the GPU wait that GPU sharing explains (false: judge kernel arrival alone).
  bool gpu_sharing = true;
};

struct RankLateness {
  int64_t lateness_ns = 0;  // what the detector judges: behind the median, sharing discounted
  int64_t kernel_ns = 0;    // kernel-level lateness, behind the median kernel arrival
  // The split of a positive lateness_ns (host_ns + gpu_ns == lateness_ns); -1 when the clocks do
  // not allow it.
  int64_t host_ns = -1;
  int64_t gpu_ns = -1;
  int32_t gpu_sharers = 1;  // ranks of this instance on its GPU, itself included
};

struct InstanceLateness {
  std::vector<RankLateness> ranks;
  int64_t need_ns = 0;   // the margin: a rank is late when lateness_ns >= need_ns
  int64_t base_ns = 0;   // the collective's own time (the latest rank's kernel time)
  size_t latest = 0;     // the rank that arrived last at kernel level
  bool enqueue_comparable = false;
};

InstanceLateness JudgeInstance(const std::vector<RankArrival>& ranks,
                               const LatenessOptions& options);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_STRAGGLER_LATENESS_H_
