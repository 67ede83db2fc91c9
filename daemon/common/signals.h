// SIGINT/SIGTERM → a notification, for the daemons' clean shutdown. Call InstallStopSignals()
// before starting any thread, so every thread inherits the blocked mask and only the waiter sees
// the signals.
#ifndef RINGSIDE_DAEMON_COMMON_SIGNALS_H_
#define RINGSIDE_DAEMON_COMMON_SIGNALS_H_

#include <functional>

#include "absl/synchronization/notification.h"

namespace ringside::daemon {

// Blocks SIGINT and SIGTERM and starts a detached thread that notifies `stop` on the first one.
// `on_signal` (optional) runs on that thread just before, e.g. to tell systemd STOPPING=1 while
// the main thread may still be inside a sampling cycle; what it captures must live for the rest
// of the process.
void InstallStopSignals(absl::Notification* stop, std::function<void()> on_signal = nullptr);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_SIGNALS_H_
