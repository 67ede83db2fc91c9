#include "daemon/common/systemd_notify.h"

#include <systemd/sd-daemon.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "daemon/common/log.h"

namespace ringside::daemon {
namespace {

// STATUS= is one line.
std::string StatusLine(absl::string_view status) {
  return absl::StrReplaceAll(status, {{"\n", " "}});
}

}  // namespace

SystemdNotifier::SystemdNotifier(SystemdNotifyOptions options) : options_(std::move(options)) {
  if (!options_.now) options_.now = absl::Now;
  if (options_.send) {
    active_ = true;
  } else {
    const char* socket = std::getenv("NOTIFY_SOCKET");
    active_ = socket != nullptr && socket[0] != '\0';
    options_.send = [](const std::string& state) { return sd_notify(0, state.c_str()); };
  }
  if (options_.watchdog_period.has_value()) {
    watchdog_period_ = *options_.watchdog_period;
  } else {
    uint64_t usec = 0;
    // > 0: enabled for this process (WATCHDOG_PID unset or ours); keeps the variables for children
    // that are not ours to worry about (the agent execs none).
    if (sd_watchdog_enabled(0, &usec) > 0) watchdog_period_ = absl::Microseconds(usec);
  }
  if (!active_) watchdog_period_ = absl::ZeroDuration();
}

void SystemdNotifier::Send(const std::string& state) {
  if (!active_) return;
  const int r = options_.send(state);
  absl::MutexLock lock(&mu_);
  if (r > 0) {
    ++sent_;
  } else if (r < 0 && !warned_) {
    warned_ = true;
    LogLine(absl::StrCat("sd_notify to $NOTIFY_SOCKET failed: ", std::strerror(-r),
                         " (further failures not logged)"));
  }
}

void SystemdNotifier::Ready(absl::string_view status) {
  std::string state = "READY=1";
  if (!status.empty()) absl::StrAppend(&state, "\nSTATUS=", StatusLine(status));
  Send(state);
}

void SystemdNotifier::Status(absl::string_view status) {
  Send(absl::StrCat("STATUS=", StatusLine(status)));
}

void SystemdNotifier::Stopping(absl::string_view status) {
  std::string state = "STOPPING=1";
  if (!status.empty()) absl::StrAppend(&state, "\nSTATUS=", StatusLine(status));
  Send(state);
}

void SystemdNotifier::PetWatchdog() {
  if (!active_ || watchdog_period_ <= absl::ZeroDuration()) return;
  const absl::Time now = options_.now();
  {
    absl::MutexLock lock(&mu_);
    if (now - last_pet_ < watchdog_period_ * options_.min_pet_fraction) return;
    last_pet_ = now;
  }
  Send("WATCHDOG=1");
}

uint64_t SystemdNotifier::sent() const {
  absl::MutexLock lock(&mu_);
  return sent_;
}

std::string WatchdogPeriodWarning(absl::string_view loop_name, absl::Duration loop_period,
                                  absl::Duration watchdog_period) {
  if (watchdog_period <= absl::ZeroDuration() || loop_period * 2 <= watchdog_period) return "";
  return absl::StrCat(
      "warning: the systemd watchdog (WatchdogSec=", absl::FormatDuration(watchdog_period),
      ") is pet once per ", loop_name, " (every ", absl::FormatDuration(loop_period),
      "), which cannot happen every half period: systemd will kill this process "
      "between ",
      loop_name, "s. Set WatchdogSec= to at least ", absl::FormatDuration(loop_period * 2),
      " or shorten the ", loop_name, ".");
}

}  // namespace ringside::daemon
