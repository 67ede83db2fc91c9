#include "daemon/agent/sampler.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "daemon/common/steady_time.h"

namespace ringside::daemon {

Sampler::Sampler(SamplerOptions options,
                 std::vector<std::unique_ptr<collectors::Collector>> collectors, NowFn now,
                 LogFn log)
    : options_(std::move(options)),
      collectors_(std::move(collectors)),
      clock_(std::make_shared<ForwardClock>(std::move(now))),
      log_(std::move(log)) {
  health_.resize(collectors_.size());
  for (size_t i = 0; i < collectors_.size(); ++i) {
    health_[i].name = std::string(collectors_[i]->name());
  }
  last_error_log_.assign(collectors_.size(), absl::InfinitePast());
  errors_since_log_.assign(collectors_.size(), 0);
}

std::shared_ptr<const AgentSnapshot> Sampler::RunOnce(bool early) {
  std::shared_ptr<const AgentSnapshot> previous;
  if (early && !early_collectors_.empty()) {
    absl::MutexLock lock(&mu_);
    previous = latest_;
  }
  auto snap = std::make_shared<AgentSnapshot>();
  snap->carried.assign(collectors_.size(), false);
  snap->node = options_.node;
  snap->cycle = ++cycle_;
  snap->overruns_total = overruns_;
  snap->early_total = early_;
  snap->collectors.resize(collectors_.size());
  // Sample times are wall-clock (the aggregator lines nodes up by them) but must never go back:
  // the aggregator drops a sample not newer than its series' last, and rates divide by the
  // difference. ForwardClock (daemon/common/forward_clock.h) goes on at the monotonic clock's
  // pace after a step back of the wall clock and takes a step forward.
  const absl::Time steady_start = SteadyNow();
  const absl::Time cycle_start = clock_->Now();
  last_steady_start_ = steady_start;
  snap->timestamp = cycle_start;
  // Within the cycle each collector's time is the cycle's plus the monotonic time elapsed.
  auto now = [&] { return cycle_start + (SteadyNow() - steady_start); };
  for (size_t i = 0; i < collectors_.size(); ++i) {
    collectors::CycleErrors errors;
    collectors::CollectorSnapshot& out = snap->collectors[i];
    if (previous != nullptr && i < previous->collectors.size() &&
        std::find(early_collectors_.begin(), early_collectors_.end(), collectors_[i]->name()) ==
            early_collectors_.end()) {
      out = previous->collectors[i];  // not run in this early cycle
      snap->carried[i] = true;
      continue;
    }
    const absl::Time start = now();
    collectors_[i]->Collect(start, out, errors);
    out.timestamp = start;
    out.duration = now() - start;
    out.read_errors = errors.count;

    CollectorHealth& h = health_[i];
    ++h.cycles;
    h.read_errors_total += errors.count;
    h.last_duration = out.duration;
    h.series = out.table ? out.table->defs.size() : 0;
    h.availability = collectors_[i]->Availability();

    errors_since_log_[i] += errors.count;
    if (log_ && errors.count > 0 &&
        cycle_start - last_error_log_[i] >= options_.error_log_period) {
      log_(absl::StrCat("collector ", h.name, ": ", errors_since_log_[i],
                        " read errors since last report; e.g. ",
                        absl::StrJoin(errors.messages, "; ")));
      last_error_log_[i] = cycle_start;
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
  if (!early_enabled_ || wake_fd_ < 0) return;
  wake_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

void Sampler::EnableEarlyCycles(std::vector<std::string> only) {
  early_collectors_ = std::move(only);
  if (wake_fd_ < 0) wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  early_enabled_ = wake_fd_ >= 0;
}

Sampler::~Sampler() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Sampler::Run(absl::Notification& stop,
                  const std::function<void(const std::shared_ptr<const AgentSnapshot>&)>& on_cycle) {
  // The schedule is on the monotonic clock: a wall-clock step neither holds sampling for the
  // step's length nor counts the step as missed slots. After a RunOnce() it continues one
  // interval after that cycle began.
  absl::Time next = cycle_ > 0 ? last_steady_start_ + options_.interval : SteadyNow();
  bool early_used = false;  // this slot already had its early cycle
  while (!stop.HasBeenNotified()) {
    bool early = false;
    if (!SleepUntil(stop, next, !early_used, &early)) break;
    if (early) ++early_;  // before RunOnce, which publishes the count
    std::shared_ptr<const AgentSnapshot> snap = RunOnce(early);
    if (on_cycle) on_cycle(snap);
    if (early) {
      early_used = true;
      continue;  // the schedule is unchanged
    }
    early_used = false;
    next += options_.interval;
    const absl::Time now = SteadyNow();
    if (now > next) {
      // Overran: skip the slots already missed, start the next cycle now.
      const int64_t missed = (now - next) / options_.interval;
      overruns_ += static_cast<uint64_t>(missed) + 1;
      next += options_.interval * missed;
      if (next < now) next = now;
    }
  }
}

bool Sampler::SleepUntil(absl::Notification& stop, absl::Time steady_deadline, bool allow_early,
                         bool* early) {
  // Abseil's timed waits (this build's) take an absolute CLOCK_REALTIME deadline, which a step
  // back of the wall clock during the wait would push out by the step; nanosleep and poll()
  // measure monotonic time. Slices of at most 50 ms bound how long a stop waits.
  *early = false;
  for (absl::Duration left = steady_deadline - SteadyNow(); left > absl::ZeroDuration();
       left = steady_deadline - SteadyNow()) {
    if (stop.HasBeenNotified()) return false;
    const absl::Duration slice = std::min(left, absl::Milliseconds(50));
    if (wake_fd_ < 0) {
      absl::SleepFor(slice);
      continue;
    }
    if (allow_early && wake_.exchange(false, std::memory_order_acq_rel)) {
      *early = true;
      return true;
    }
    // Rounded up to whole milliseconds, so a slice never ends early and spins.
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(slice + absl::Milliseconds(1) -
                                                              absl::Nanoseconds(1)));
    pollfd p{wake_fd_, POLLIN, 0};
    if (::poll(&p, 1, ms) > 0) {
      uint64_t n = 0;
      (void)!::read(wake_fd_, &n, sizeof(n));  // drained; wake_ says whether to act
    }
  }
  // The slot came: its scheduled cycle reads whatever moved, so a pending request is done.
  if (wake_fd_ >= 0) wake_.store(false, std::memory_order_release);
  return !stop.HasBeenNotified();
}

std::shared_ptr<const AgentSnapshot> Sampler::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

}  // namespace ringside::daemon
