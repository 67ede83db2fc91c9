// ringside-straggler-bench (issue #15): what the straggler detector costs per collective record at
// scale, in one process and on one thread.
//
//   ringside-straggler-bench [--ranks=1024] [--iterations=300] [--slow=0,2,8] [--rounds=3]
//                            [--enqueue] [--ranks_per_gpu=1]
//
// A synthetic data-parallel job of `ranks` ranks in one communicator: every iteration each rank
// computes ~100 ms (jitter 0.5 ms; the `slow` ranks 8-40 % longer), then all-reduces; one
// CollectiveObservation per rank per iteration, clocks unsynchronised (the detector works from
// kernel durations). The records are made before the clock starts; the bench reports the CPU time
// of this thread per record fed to StragglerDetector::Observe (the last record of each instance
// completes it and judges the window), the median over `rounds`, per count of slow ranks.
// --enqueue (issue #27): the records also carry host enqueue times, a GPU (cuda device, 8 per
// node) and a 10 µs clock bound, so every instance is split into host and GPU lateness;
// --ranks_per_gpu=K puts K ranks on each GPU (time-shared: the sharing rule runs for every rank).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "analysis/straggler_detector.h"

ABSL_FLAG(int, ranks, 1024, "Ranks in the communicator.");
ABSL_FLAG(int, iterations, 300, "Collective instances per round.");
ABSL_FLAG(std::string, slow, "0,2,8", "Counts of slow ranks, one measurement each.");
ABSL_FLAG(int, rounds, 3, "Rounds per count; the median is reported.");
ABSL_FLAG(bool, enqueue, false, "Records with enqueue times, GPUs and a clock bound (issue #27).");
ABSL_FLAG(int, ranks_per_gpu, 1, "With --enqueue: ranks time-sharing each GPU.");

namespace {

using ringside::analysis::CollectiveObservation;
using ringside::analysis::Finding;
using ringside::analysis::StragglerDetector;

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::vector<CollectiveObservation> MakeJob(int nranks, int iterations, int slow, uint64_t seed,
                                           bool enqueue, int ranks_per_gpu) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> jitter(0, 0.0005);
  std::map<int, double> factor;
  for (int k = 0; k < slow; ++k) factor[(k * 131 + 7) % nranks] = 1.08 + 0.32 * k / std::max(1, slow - 1);
  std::vector<CollectiveObservation> out;
  out.reserve(static_cast<size_t>(nranks) * iterations);
  int64_t now = 1'700'000'000'000'000'000LL;
  std::vector<int64_t> arrive(nranks);
  for (int i = 0; i < iterations; ++i) {
    int64_t latest = 0;
    for (int r = 0; r < nranks; ++r) {
      const double f = factor.count(r) ? factor[r] : 1.0;
      arrive[r] = now + static_cast<int64_t>((0.1 * f + std::abs(jitter(rng))) * 1e9);
      latest = std::max(latest, arrive[r]);
    }
    const int64_t done = latest + 5'000'000;
    for (int r = 0; r < nranks; ++r) {
      CollectiveObservation o;
      o.job = "bench";
      o.comm_id = 1;
      o.comm_name = "dp";
      o.rank = r;
      o.nranks = nranks;
      o.global_rank = r;
      o.function = "AllReduce";
      o.seq = i;
      o.bytes = 1 << 26;
      // Unsynchronised clocks, or with --enqueue synchronised ones with a 10 µs bound.
      const int64_t offset = enqueue ? 0 : int64_t{r} * 1'000'000'000;
      o.start_ns = arrive[r] + offset;
      o.stop_ns = done + offset;
      o.host = "node-" + std::to_string(r / 8);
      if (enqueue) {
        o.enqueue_ns = arrive[r] - 2'000'000;  // 2 ms of GPU work queued before the collective
        o.clock_error_ns = 10'000;
        o.cuda_device = (r % 8) / std::max(1, ranks_per_gpu);
      }
      out.push_back(std::move(o));
    }
    now = done;
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int nranks = std::max(2, absl::GetFlag(FLAGS_ranks));
  const int iterations = std::max(1, absl::GetFlag(FLAGS_iterations));
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  std::printf("ringside-straggler-bench: %d ranks, %d instances, %d rounds\n", nranks, iterations,
              rounds);
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_slow), ',')) {
    int slow = 0;
    if (!absl::SimpleAtoi(s, &slow)) return 2;
    const std::vector<CollectiveObservation> records =
        MakeJob(nranks, iterations, slow, 17, absl::GetFlag(FLAGS_enqueue),
                absl::GetFlag(FLAGS_ranks_per_gpu));
    std::vector<double> ns;
    size_t findings = 0;
    for (int r = 0; r < rounds; ++r) {
      StragglerDetector d;
      std::vector<Finding> out;
      const double c0 = ThreadCpuSeconds();
      for (const CollectiveObservation& o : records) d.Observe(o, out);
      ns.push_back((ThreadCpuSeconds() - c0) * 1e9 / static_cast<double>(records.size()));
      findings = out.size();
    }
    std::printf("  %d slow ranks: %.1f ns/record (median of %d; %zu findings)\n", slow, Median(ns),
                rounds, findings);
    std::fflush(stdout);
  }
  return 0;
}
