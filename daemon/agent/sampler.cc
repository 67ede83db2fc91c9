#include "daemon/agent/sampler.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringside::daemon {

Sampler::Sampler(SamplerOptions options,
                 std::vector<std::unique_ptr<collectors::Collector>> collectors, NowFn now,
                 LogFn log)
    : options_(std::move(options)),
      collectors_(std::move(collectors)),
      now_(std::move(now)),
      log_(std::move(log)) {
  health_.resize(collectors_.size());
  for (size_t i = 0; i < collectors_.size(); ++i) {
    health_[i].name = std::string(collectors_[i]->name());
  }
  last_error_log_.assign(collectors_.size(), absl::InfinitePast());
  errors_since_log_.assign(collectors_.size(), 0);
}

std::shared_ptr<const AgentSnapshot> Sampler::RunOnce() {
  auto snap = std::make_shared<AgentSnapshot>();
  snap->node = options_.node;
  snap->cycle = ++cycle_;
  snap->overruns_total = overruns_;
  snap->collectors.resize(collectors_.size());
  const absl::Time cycle_start = now_();
  last_start_ = cycle_start;
  snap->timestamp = cycle_start;
  for (size_t i = 0; i < collectors_.size(); ++i) {
    collectors::CycleErrors errors;
    collectors::CollectorSnapshot& out = snap->collectors[i];
    const absl::Time start = now_();
    collectors_[i]->Collect(start, out, errors);
    out.timestamp = start;
    out.duration = now_() - start;
    out.read_errors = errors.count;

    CollectorHealth& h = health_[i];
    ++h.cycles;
    h.read_errors_total += errors.count;
    h.last_duration = out.duration;
    h.series = out.table ? out.table->defs.size() : 0;
    h.availability = collectors_[i]->Availability();

    errors_since_log_[i] += errors.count;
    if (log_ && errors.count > 0 && start - last_error_log_[i] >= options_.error_log_period) {
      log_(absl::StrCat("collector ", h.name, ": ", errors_since_log_[i],
                        " read errors since last report; e.g. ",
                        absl::StrJoin(errors.messages, "; ")));
      last_error_log_[i] = start;
      errors_since_log_[i] = 0;
    }
  }
  snap->health = health_;
  std::shared_ptr<const AgentSnapshot> published = std::move(snap);
  {
    absl::MutexLock lock(&mu_);
    latest_ = published;
  }
  return published;
}

void Sampler::Run(absl::Notification& stop,
                  const std::function<void(const std::shared_ptr<const AgentSnapshot>&)>& on_cycle) {
  // After a RunOnce() the schedule continues one interval after that cycle began.
  absl::Time next = cycle_ > 0 ? last_start_ + options_.interval : now_();
  while (!stop.HasBeenNotified()) {
    const absl::Time wait_until = next;
    if (now_() < wait_until) {
      if (stop.WaitForNotificationWithTimeout(wait_until - now_())) break;
    }
    std::shared_ptr<const AgentSnapshot> snap = RunOnce();
    if (on_cycle) on_cycle(snap);
    next += options_.interval;
    const absl::Time now = now_();
    if (now > next) {
      // Overran: skip the slots already missed, start the next cycle now.
      const int64_t missed = (now - next) / options_.interval;
      overruns_ += static_cast<uint64_t>(missed) + 1;
      next += options_.interval * missed;
      if (next < now) next = now;
    }
  }
}

std::shared_ptr<const AgentSnapshot> Sampler::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

}  // namespace ringside::daemon
