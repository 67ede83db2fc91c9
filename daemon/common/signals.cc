#include "daemon/common/signals.h"

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace ringside::daemon {

void InstallStopSignals(absl::Notification* stop, std::function<void()> on_signal) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set, stop, on_signal = std::move(on_signal)]() {
    int sig = 0;
    sigwait(&set, &sig);
    if (stop->HasBeenNotified()) return;
    if (on_signal) on_signal();
    stop->Notify();
  }).detach();
}

}  // namespace ringside::daemon
