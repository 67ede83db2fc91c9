// A timed wait on an absl::Mutex measured on the monotonic clock. Debian 12's Abseil (20220623)
// times Mutex::AwaitWithTimeout/AwaitWithDeadline, CondVar::WaitWithTimeout and
// Notification::WaitForNotificationWithTimeout against an absolute CLOCK_REALTIME deadline
// (futex FUTEX_CLOCK_REALTIME), so a step back of the wall clock (NTP, an operator's `date`)
// during the wait stretches it by the step. Here in collectors/ because the collectors' own
// threads need it too; the daemons take it through daemon/common/steady_time.h.
#ifndef RINGSIDE_COLLECTORS_COMMON_STEADY_WAIT_H_
#define RINGSIDE_COLLECTORS_COMMON_STEADY_WAIT_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ringside::collectors {

// An absl::Time on the monotonic clock (CLOCK_MONOTONIC: the epoch is the boot, not 1970). Only
// differences and comparisons with other SteadyNow() values mean anything; never print it, send
// it or pass it to an API that takes a wall-clock deadline (absl::Mutex::AwaitWithDeadline: use
// SteadyCondVar::AwaitWithTimeout(mu, pred, until - SteadyNow())).
inline absl::Time SteadyNow() {
  return absl::UnixEpoch() + absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

// A condition variable for an absl::Mutex whose timeout runs on the monotonic clock:
// std::condition_variable_any, which libstdc++ waits with pthread_cond_clockwait(CLOCK_MONOTONIC),
// so a step back of the wall clock does not stretch the wait (Mutex::AwaitWithTimeout's would
// be, in this build's Abseil). Unlike Mutex::Await, a change of what the predicate reads wakes the
// waiter only through Notify(): change it holding the mutex, then call Notify().
class SteadyCondVar {
 public:
  // Called holding `mu`, returns holding it: true once pred() holds, false when `timeout` passed
  // (monotonic) with pred() still false. pred() runs with `mu` held.
  template <typename Pred>
  bool AwaitWithTimeout(absl::Mutex& mu, Pred pred, absl::Duration timeout)
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    // Clamped: a day is as good as forever to a loop that wakes on its condition.
    const absl::Duration d = std::clamp(timeout, absl::ZeroDuration(), absl::Hours(24));
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::nanoseconds(absl::ToInt64Nanoseconds(d));
    Unlockable lock{mu};
    return cv_.wait_until(lock, until, std::move(pred));
  }
  void Notify() { cv_.notify_all(); }

 private:
  struct Unlockable {
    absl::Mutex& mu;
    void lock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu.Lock(); }
    void unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu.Unlock(); }
  };
  std::condition_variable_any cv_;
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_COMMON_STEADY_WAIT_H_
