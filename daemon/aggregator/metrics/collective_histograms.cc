#include "daemon/aggregator/metrics/collective_histograms.h"

#include <algorithm>

namespace ringside::daemon {
namespace {

constexpr char kOther[] = "_other";

}  // namespace

void DurationHistogram::Add(double seconds) {
  const auto* it = std::lower_bound(kCollectiveDurationBuckets.begin(),
                                    kCollectiveDurationBuckets.end(), seconds);
  ++counts[static_cast<size_t>(it - kCollectiveDurationBuckets.begin())];
  ++count;
  sum += seconds;
}

CollectiveHistograms::Job* CollectiveHistograms::JobFor(const std::string& job, absl::Time now) {
  auto it = jobs_.find(job);
  if (it != jobs_.end()) return &it->second;
  if (job == kOther) return &other_;
  if (jobs_.size() >= options_.max_jobs) {
    // The idlest job gives its place if it has been quiet long enough.
    auto idlest = jobs_.end();
    for (auto j = jobs_.begin(); j != jobs_.end(); ++j) {
      if (idlest == jobs_.end() || j->second.last_record < idlest->second.last_record) idlest = j;
    }
    if (idlest == jobs_.end() || now - idlest->second.last_record < options_.job_idle_after) {
      return nullptr;
    }
    jobs_.erase(idlest);
  }
  return &jobs_[job];
}

void CollectiveHistograms::Observe(const v1::CollectiveBatch& batch, absl::Time now) {
  if (batch.records_size() == 0) return;
  absl::MutexLock lock(&mu_);
  const std::string* last_job = nullptr;
  Job* job = nullptr;
  for (const v1::CollectiveRecord& r : batch.records()) {
    const int64_t start = r.kernel_start_unix_nanos();
    const int64_t stop = r.kernel_stop_unix_nanos();
    if (start <= 0 || stop < start) continue;
    if (last_job == nullptr || *last_job != r.job_id()) {  // batches are mostly one job
      last_job = &r.job_id();
      job = JobFor(r.job_id(), now);
    }
    Job* into = job;
    if (into == nullptr) {
      into = &other_;
      ++other_records_;
    }
    into->last_record = now;
    auto f = into->functions.find(r.function());
    if (f == into->functions.end()) {
      const std::string& name =
          into->functions.size() >= options_.max_functions ? std::string(kOther) : r.function();
      f = into->functions.try_emplace(name).first;
    }
    f->second.Add(static_cast<double>(stop - start) * 1e-9);
  }
}

std::vector<CollectiveHistograms::Series> CollectiveHistograms::Snapshot() const {
  std::vector<Series> out;
  absl::MutexLock lock(&mu_);
  auto add = [&out](const std::string& job, const Job& j) {
    for (const auto& [function, h] : j.functions) out.push_back(Series{job, function, h});
  };
  for (const auto& [name, j] : jobs_) add(name, j);
  add(kOther, other_);
  return out;
}

uint64_t CollectiveHistograms::other_job_records() const {
  absl::MutexLock lock(&mu_);
  return other_records_;
}

}  // namespace ringside::daemon
