#include "sim/fork_pool.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <map>

namespace ringside::sim {

int RunInChildren(int count, const std::function<int(int)>& task,
                  const std::function<void(int, int)>& done, const ForkPoolOptions& o) {
  const int jobs = o.jobs < 1 ? 1 : o.jobs;
  std::map<pid_t, int> running;  // pid → task
  int next = 0;
  bool fork_failed = false, forwarded = false;
  while (true) {
    while (!fork_failed && next < count && static_cast<int>(running.size()) < jobs &&
           !(o.stop != nullptr && *o.stop)) {
      std::fflush(nullptr);  // or the child would print the parent's buffered output again
      const pid_t pid = fork();
      if (pid < 0) {
        fork_failed = true;
        done(next, -1);
        break;
      }
      if (pid == 0) {
        const int rc = task(next);
        std::fflush(nullptr);
        _exit(rc);
      }
      running[pid] = next++;
    }
    if (running.empty()) break;
    int st = 0;
    const pid_t pid = waitpid(-1, &st, 0);
    if (pid < 0) {
      if (errno == EINTR) {
        // Stopped by a signal that reached only this process (kill PID rather than Ctrl-C to the
        // process group): pass it on, so the runs end now and still report what they saw.
        if (o.stop != nullptr && *o.stop && !forwarded) {
          forwarded = true;
          for (const auto& [child, task_index] : running) kill(child, SIGTERM);
        }
        continue;
      }
      break;  // ECHILD: nothing left to wait for
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;  // not one of ours
    const int i = it->second;
    running.erase(it);
    done(i, WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1);
  }
  return next;
}

}  // namespace ringside::sim
