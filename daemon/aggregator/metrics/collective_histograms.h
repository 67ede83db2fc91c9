// Histograms of collective durations by job and function for the aggregator's /metrics
// (ringside_collective_duration_seconds): each collective record received counts once, with its
// GPU kernel time (kernel stop - kernel start, one rank's view). Buckets span 100 µs .. 100 s.
//
// Cardinality is bounded: at most `max_jobs` jobs and `max_functions` functions per job have
// series of their own; records of further jobs count under job "_other" (and in
// other_job_records()), further functions of a job under function "_other". A job with no record
// for `job_idle_after` gives its place to the next new job.
//
// Observe runs on the ingest threads (one short lock per batch); Snapshot copies on the scrape
// thread. Thread-safe.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_METRICS_COLLECTIVE_HISTOGRAMS_H_
#define RINGSIDE_DAEMON_AGGREGATOR_METRICS_COLLECTIVE_HISTOGRAMS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::daemon {

// The upper bounds (seconds) of the buckets, +Inf not included.
inline constexpr std::array<double, 19> kCollectiveDurationBuckets = {
    1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1,
    0.25, 0.5,    1,    2.5,  5,      10,   25,   50,     100};

struct DurationHistogram {
  std::array<uint64_t, kCollectiveDurationBuckets.size() + 1> counts{};  // per bucket, last: +Inf
  uint64_t count = 0;
  double sum = 0;  // seconds
  void Add(double seconds);
};

struct CollectiveHistogramOptions {
  size_t max_jobs = 50;
  size_t max_functions = 16;  // per job
  absl::Duration job_idle_after = absl::Minutes(30);
};

class CollectiveHistograms {
 public:
  struct Series {
    std::string job;
    std::string function;
    DurationHistogram histogram;
  };

  explicit CollectiveHistograms(CollectiveHistogramOptions options = {}) : options_(options) {}

  // Counts every record of the batch that has a kernel start and stop; `now`: aggregator clock.
  void Observe(const v1::CollectiveBatch& batch, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Every series, jobs and functions sorted.
  std::vector<Series> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  // Records counted under job "_other" because max_jobs jobs were live.
  uint64_t other_job_records() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Job {
    std::map<std::string, DurationHistogram> functions;
    absl::Time last_record;
  };
  Job* JobFor(const std::string& job, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CollectiveHistogramOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Job> jobs_ ABSL_GUARDED_BY(mu_);
  Job other_ ABSL_GUARDED_BY(mu_);
  uint64_t other_records_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_METRICS_COLLECTIVE_HISTOGRAMS_H_
