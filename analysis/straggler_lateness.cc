#include "analysis/straggler_lateness.h"

#include <algorithm>
#include <cmath>

namespace ringside::analysis {
namespace {

// The lower median (for two values, the smaller): one selection, linear.
int64_t LowerMedian(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  const size_t mid = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

bool EnqueueComparable(const std::vector<RankArrival>& ranks, int64_t need_ns, double ratio) {
  bool one_host = ranks.front().host >= 0;
  int64_t bound = 0;
  bool bounded = true;
  for (const RankArrival& a : ranks) {
    if (a.enqueue_ns <= 0) return false;
    one_host &= a.host == ranks.front().host;
    if (a.clock_error_ns < 0) bounded = false;
    bound = std::max(bound, a.clock_error_ns);
  }
  if (one_host) return true;
  return bounded && 2.0 * static_cast<double>(bound) <= ratio * static_cast<double>(need_ns);
}

}  // namespace

InstanceLateness JudgeInstance(const std::vector<RankArrival>& ranks,
                               const LatenessOptions& options) {
  InstanceLateness out;
  const size_t n = ranks.size();
  out.ranks.resize(n);
  if (n == 0) return out;
  bool synced = true;
  for (const RankArrival& a : ranks) synced &= a.synced;
  // Kernel-level arrival, larger = later: the start with synchronised clocks, else minus the kernel
  // time (a late rank waits less for the others).
  std::vector<int64_t> key(n);
  for (size_t r = 0; r < n; ++r) {
    key[r] = synced ? ranks[r].start_ns : -ranks[r].duration_ns;
    if (key[r] > key[out.latest]) out.latest = r;
  }
  const int64_t median = LowerMedian(key);
  out.base_ns = ranks[out.latest].duration_ns;  // the latest rank waits for no one
  // Rounded up: an integer lateness reaches it exactly when it reaches the real-valued margin.
  out.need_ns = static_cast<int64_t>(
      std::ceil(std::max(absl::ToDoubleNanoseconds(options.min_margin),
                         options.min_margin_ratio * static_cast<double>(out.base_ns))));

  out.enqueue_comparable = EnqueueComparable(ranks, out.need_ns, options.clock_error_ratio);
  int64_t median_enqueue = 0;
  if (out.enqueue_comparable) {
    std::vector<int64_t> e(n);
    for (size_t r = 0; r < n; ++r) e[r] = ranks[r].enqueue_ns;
    median_enqueue = LowerMedian(std::move(e));
  }

  // Ranks by GPU (sorted, no map: one allocation per instance); only a GPU with two ranks or
  // more is shared. For a shared GPU's ranks, the kernel wait that sharing does not explain.
  std::vector<std::pair<int32_t, uint32_t>> by_gpu;
  for (size_t r = 0; r < n; ++r) {
    if (ranks[r].gpu >= 0) by_gpu.emplace_back(ranks[r].gpu, static_cast<uint32_t>(r));
  }
  std::sort(by_gpu.begin(), by_gpu.end());
  std::vector<int64_t> unexplained;  // per rank; -1: not on a shared GPU
  std::vector<int64_t> starts;
  for (size_t b = 0; b < by_gpu.size();) {
    size_t e = b;
    while (e < by_gpu.size() && by_gpu[e].first == by_gpu[b].first) ++e;
    const int32_t k = static_cast<int32_t>(e - b);
    for (size_t i = b; i < e; ++i) out.ranks[by_gpu[i].second].gpu_sharers = k;
    if (k > 1 && options.gpu_sharing && out.enqueue_comparable) {
      if (unexplained.empty()) unexplained.assign(n, -1);
      // One time slice: the median gap between the group's kernel starts (one node, one clock).
      starts.clear();
      for (size_t i = b; i < e; ++i) starts.push_back(ranks[by_gpu[i].second].start_ns);
      std::sort(starts.begin(), starts.end());
      std::vector<int64_t> gaps;
      gaps.reserve(starts.size() - 1);
      // The gap before the group's latest start is left out (with three ranks or more): it is the
      // one being judged, and a rank held back on its own GPU work would stretch its own excuse.
      const size_t judged = starts.size() > 2 ? 1 : 0;
      for (size_t i = 1; i + judged < starts.size(); ++i) gaps.push_back(starts[i] - starts[i - 1]);
      const int64_t slice = LowerMedian(std::move(gaps));
      for (size_t i = b; i < e; ++i) {
        const RankArrival& a = ranks[by_gpu[i].second];
        if (a.start_ns < a.enqueue_ns) continue;  // clocks disagree: judged as before
        // The group's other kernels that were running while this one waited to start.
        int64_t running = 0;
        for (size_t o = b; o < e; ++o) {
          if (o == i) continue;
          const RankArrival& c = ranks[by_gpu[o].second];
          if (c.start_ns < a.start_ns && c.start_ns + c.duration_ns > a.enqueue_ns) ++running;
        }
        const int64_t wait = a.start_ns - a.enqueue_ns;
        unexplained[by_gpu[i].second] = wait - std::min(wait, running * slice);
      }
    }
    b = e;
  }

  for (size_t r = 0; r < n; ++r) {
    RankLateness& l = out.ranks[r];
    l.kernel_ns = key[r] - median;
    l.lateness_ns = l.kernel_ns;
    if (!out.enqueue_comparable) continue;
    const int64_t host = ranks[r].enqueue_ns - median_enqueue;
    if (!unexplained.empty() && unexplained[r] >= 0) {
      l.lateness_ns = std::min(l.kernel_ns, std::max<int64_t>(0, host) + unexplained[r]);
    }
    if (l.lateness_ns > 0) {
      l.host_ns = std::clamp<int64_t>(host, 0, l.lateness_ns);
      l.gpu_ns = l.lateness_ns - l.host_ns;
    }
  }
  return out;
}

}  // namespace ringside::analysis
