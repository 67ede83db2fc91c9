// A collector wrapper that adds up the CPU time (of the calling thread) its collector spends in
// Collect, so the agent bench can split a sampling cycle's cost by collector. It costs two
// clock_gettime(CLOCK_THREAD_CPUTIME_ID) system calls per cycle.
#ifndef RINGSIDE_BENCH_TIMED_COLLECTOR_H_
#define RINGSIDE_BENCH_TIMED_COLLECTOR_H_

#include <time.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collectors/common/collector.h"

namespace ringside::bench {

class TimedCollector final : public collectors::Collector {
 public:
  explicit TimedCollector(std::unique_ptr<collectors::Collector> inner)
      : inner_(std::move(inner)) {}

  absl::string_view name() const override { return inner_->name(); }
  void Collect(absl::Time now, collectors::CollectorSnapshot& out,
               collectors::CycleErrors& errors) override {
    const int64_t start = ThreadCpuNanos();
    inner_->Collect(now, out, errors);
    cpu_ns_ += ThreadCpuNanos() - start;
  }
  absl::Status Availability() const override { return inner_->Availability(); }

  // CPU spent in Collect so far.
  int64_t cpu_ns() const { return cpu_ns_; }

 private:
  static int64_t ThreadCpuNanos() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  }

  std::unique_ptr<collectors::Collector> inner_;
  int64_t cpu_ns_ = 0;
};

}  // namespace ringside::bench

#endif  // RINGSIDE_BENCH_TIMED_COLLECTOR_H_
