// Runs tasks in forked child processes, up to K at once (`ringside-sim run --jobs=K`). Each
// simulated cluster run is a child of its own: its ports (all chosen by the kernel), work folder,
// CPU accounting, signal handling and job processes stay apart from the other runs', and the
// parent never runs a cluster itself, so it stays single-threaded and safe to fork.
#ifndef RINGSIDE_SIM_FORK_POOL_H_
#define RINGSIDE_SIM_FORK_POOL_H_

#include <csignal>
#include <functional>

namespace ringside::sim {

struct ForkPoolOptions {
  int jobs = 1;  // children at once (< 1 counts as 1)
  // Set (by a signal handler) to stop starting tasks; the running children are sent SIGTERM once
  // (if the signal interrupted the wait) and waited for.
  volatile std::sig_atomic_t* stop = nullptr;
};

// Runs task(i) for i in [0, count) in children; `task` returns the child's exit code (the child
// ends with _exit after flushing stdio). done(i, exit_code) runs in the parent as each child ends,
// in the order they end; a child killed by a signal reports 128 + the signal. Returns how many
// tasks were started. A failed fork() runs no further task and reports -1 for it.
int RunInChildren(int count, const std::function<int(int)>& task,
                  const std::function<void(int, int)>& done, const ForkPoolOptions& o);

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_FORK_POOL_H_
