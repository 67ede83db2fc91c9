// The agent's clock for times it sends (sample times, link-event times): the wall clock, made to
// never go back. Such times are wall-clock (the aggregator lines nodes up by them) but the
// aggregator drops a sample not newer than its series' last and rates divide by the difference,
// and a link event must not look older than the sampled state it follows.
//
// After a step back of the wall clock (NTP, an operator's `date`), times go on from the last one
// given at the monotonic clock's pace, ahead of the wall clock by the step (until the process
// restarts); a step forward is taken. A wall clock that advanced at least half the monotonic time
// since the last reading is followed (slewing, drift). One instance shared by every reader keeps
// their times in one order: a time read after another is never earlier.
#ifndef RINGSIDE_DAEMON_COMMON_FORWARD_CLOCK_H_
#define RINGSIDE_DAEMON_COMMON_FORWARD_CLOCK_H_

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/common/steady_time.h"

namespace ringside::daemon {

class ForwardClock {
 public:
  using NowFn = std::function<absl::Time()>;

  // `wall`: the wall clock followed; `steady`: a monotonic clock (SteadyNow()).
  explicit ForwardClock(NowFn wall = absl::Now, NowFn steady = SteadyNow)
      : wall_(std::move(wall)), steady_(std::move(steady)) {}
  ForwardClock(const ForwardClock&) = delete;
  ForwardClock& operator=(const ForwardClock&) = delete;

  // Thread-safe; never earlier than any time returned before.
  absl::Time Now() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const absl::Time steady = steady_();
    absl::Time t = wall_();
    if (started_) {
      const absl::Duration elapsed = std::max(absl::ZeroDuration(), steady - last_steady_);
      if (t < last_ + elapsed / 2) t = last_ + elapsed;
    }
    started_ = true;
    last_ = t;
    last_steady_ = steady;
    return t;
  }

 private:
  const NowFn wall_;
  const NowFn steady_;
  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_ ABSL_GUARDED_BY(mu_);
  absl::Time last_steady_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_FORWARD_CLOCK_H_
