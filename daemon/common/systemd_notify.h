// The service manager's notification protocol (sd_notify(3)): READY=1, STATUS=, STOPPING=1 and
// the watchdog's WATCHDOG=1. Without $NOTIFY_SOCKET (not started by systemd with Type=notify)
// every call is a no-op.
//
//   SystemdNotifier notifier;                 // reads NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID
//   notifier.Ready("sampling every 1s");      // once the daemon serves
//   notifier.PetWatchdog();                   // from the loop whose progress proves health
//   notifier.Stopping();                      // on SIGTERM
//
// Library code: tests inject `send` and `watchdog_period` through SystemdNotifyOptions.
#ifndef RINGSIDE_DAEMON_COMMON_SYSTEMD_NOTIFY_H_
#define RINGSIDE_DAEMON_COMMON_SYSTEMD_NOTIFY_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ringside::daemon {

struct SystemdNotifyOptions {
  // Sends one notification ("READY=1\nSTATUS=..."): > 0 sent, 0 nowhere to send (no
  // $NOTIFY_SOCKET), < 0 a negative errno. Default: sd_notify(0, state).
  std::function<int(const std::string& state)> send;
  // The watchdog timeout (WatchdogSec=). Unset: from sd_watchdog_enabled(), i.e. $WATCHDOG_USEC
  // when $WATCHDOG_PID is unset or this process; zero: no watchdog.
  std::optional<absl::Duration> watchdog_period;
  // Pets closer together than this fraction of the period are skipped (systemd asks for one
  // every half period; a quarter leaves room for a late cycle).
  double min_pet_fraction = 0.25;
  std::function<absl::Time()> now = absl::Now;
};

class SystemdNotifier {
 public:
  explicit SystemdNotifier(SystemdNotifyOptions options = {});

  // READY=1 (with STATUS= when `status` is not empty).
  void Ready(absl::string_view status = {});
  void Status(absl::string_view status);
  // STOPPING=1 (with STATUS=).
  void Stopping(absl::string_view status = {});
  // WATCHDOG=1, at most once per min_pet_fraction of the period; nothing without a watchdog.
  // Thread-safe.
  void PetWatchdog() ABSL_LOCKS_EXCLUDED(mu_);

  // Zero without a watchdog.
  absl::Duration watchdog_period() const { return watchdog_period_; }
  // $NOTIFY_SOCKET was set at construction (or a `send` was injected).
  bool active() const { return active_; }
  // Notifications sent (send() > 0), for tests and logs.
  uint64_t sent() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Send(const std::string& state) ABSL_LOCKS_EXCLUDED(mu_);

  SystemdNotifyOptions options_;
  absl::Duration watchdog_period_;
  bool active_ = false;
  mutable absl::Mutex mu_;
  absl::Time last_pet_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  bool warned_ ABSL_GUARDED_BY(mu_) = false;
};

// A warning for the log when a loop that pets the watchdog once per `loop_period` cannot pet it
// every half `watchdog_period` (empty when it can, or without a watchdog).
std::string WatchdogPeriodWarning(absl::string_view loop_name, absl::Duration loop_period,
                                  absl::Duration watchdog_period);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_SYSTEMD_NOTIFY_H_
