#include "daemon/agent/sampler.h"

#include <thread>

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
  snap->early_total = early_;
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

void Sampler::RequestCycle() {
  absl::MutexLock lock(&wake_mu_);
  wake_ = true;
  wake_cv_.Signal();
}

void Sampler::Run(absl::Notification& stop,
                  const std::function<void(const std::shared_ptr<const AgentSnapshot>&)>& on_cycle) {
  // With early cycles the wait is on wake_cv_, so a stop must wake it too: relayed from `stop`.
  std::thread relay;
  if (early_enabled_) {
    relay = std::thread([this, &stop] {
      stop.WaitForNotification();
      absl::MutexLock lock(&wake_mu_);
      stopping_ = true;
      wake_cv_.Signal();
    });
  }
  // After a RunOnce() the schedule continues one interval after that cycle began.
  absl::Time next = cycle_ > 0 ? last_start_ + options_.interval : now_();
  bool early_used = false;  // this slot already had its early cycle
  while (!stop.HasBeenNotified()) {
    const absl::Time wait_until = next;
    bool early = false;
    if (!early_enabled_) {
      if (now_() < wait_until && stop.WaitForNotificationWithTimeout(wait_until - now_())) break;
    } else {
      absl::MutexLock lock(&wake_mu_);
      // A request in a slot that had its early cycle waits for the slot's scheduled cycle.
      while (!stopping_ && !(wake_ && !early_used)) {
        const absl::Duration left = wait_until - now_();
        if (left <= absl::ZeroDuration()) break;
        wake_cv_.WaitWithTimeout(&wake_mu_, left);
      }
      if (stopping_) break;
      early = wake_ && !early_used && now_() < wait_until;
      wake_ = false;  // an early cycle, or the scheduled one, reads what moved
    }
    if (early) ++early_;  // before RunOnce, which publishes the count
    std::shared_ptr<const AgentSnapshot> snap = RunOnce();
    if (on_cycle) on_cycle(snap);
    if (early) {
      early_used = true;
      continue;  // the schedule is unchanged
    }
    early_used = false;
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
  if (relay.joinable()) relay.join();
}

std::shared_ptr<const AgentSnapshot> Sampler::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

}  // namespace ringside::daemon
