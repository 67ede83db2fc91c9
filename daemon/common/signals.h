// SIGINT/SIGTERM → a notification, for the daemons' clean shutdown. Call InstallStopSignals()
// before starting any thread, so every thread inherits the blocked mask and only the waiter sees
// the signals.
#ifndef RINGSIDE_DAEMON_COMMON_SIGNALS_H_
#define RINGSIDE_DAEMON_COMMON_SIGNALS_H_

#include "absl/synchronization/notification.h"

namespace ringside::daemon {

// Blocks SIGINT and SIGTERM and starts a detached thread that notifies `stop` on the first one.
void InstallStopSignals(absl::Notification* stop);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_SIGNALS_H_
