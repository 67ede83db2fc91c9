// Time for intervals, timeouts and schedules that a wall-clock step (NTP, an operator's `date`)
// does not move. absl::Now() is CLOCK_REALTIME: a step back of minutes would hold a timer or a
// schedule for those minutes, a step forward would fire every timeout at once.
#ifndef RINGSIDE_DAEMON_COMMON_STEADY_TIME_H_
#define RINGSIDE_DAEMON_COMMON_STEADY_TIME_H_

#include <algorithm>
#include <chrono>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "collectors/common/steady_wait.h"

namespace ringside::daemon {

// The monotonic clock for intervals and deadlines (collectors/common/steady_wait.h).
using collectors::SteadyNow;

// Notification::WaitForNotificationWithTimeout on the monotonic clock: true once `n` is notified,
// false after `timeout`. This build's Abseil waits on an absolute CLOCK_REALTIME deadline, which a
// step back of the wall clock during the wait pushes out by the step; this sleeps (nanosleep,
// monotonic) in slices of at most 50 ms instead, so a notification is seen within 50 ms.
inline bool WaitForNotificationSteady(const absl::Notification& n, absl::Duration timeout) {
  const absl::Time until = SteadyNow() + timeout;
  while (!n.HasBeenNotified()) {
    const absl::Duration left = until - SteadyNow();
    if (left <= absl::ZeroDuration()) return false;
    absl::SleepFor(std::min(left, absl::Milliseconds(50)));
  }
  return true;
}

// The monotonic timed wait on an absl::Mutex (collectors/common/steady_wait.h).
using collectors::SteadyCondVar;

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_STEADY_TIME_H_
