// A process the simulator starts (the aggregator, an agent): fork/exec with its output in a log
// file, its own process group (a terminal's Ctrl-C reaches the simulator, which then stops its
// children in order), and SIGTERM to it should the simulator die.
#ifndef RINGSIDE_SIM_CHILD_PROCESS_H_
#define RINGSIDE_SIM_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringside::sim {

class ChildProcess {
 public:
  ChildProcess() = default;
  // `env`: "NAME=VALUE" entries added to the simulator's environment.
  static absl::StatusOr<ChildProcess> Spawn(const std::vector<std::string>& argv,
                                            const std::vector<std::string>& env,
                                            const std::string& log_path);
  pid_t pid() const { return pid_; }
  bool running();                  // reaps it when it has exited
  int exit_status() const { return status_; }
  void Signal(int sig);
  // SIGTERM, then SIGKILL after `grace`; returns the wait status.
  int Stop(absl::Duration grace = absl::Seconds(5));
  // The log so far.
  std::string Log() const;
  // Waits until the log contains `needle`; false on timeout or exit.
  bool WaitForLog(const std::string& needle, absl::Duration timeout);
  const std::string& log_path() const { return log_path_; }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  std::string log_path_;
};

// A port from a log line "... (port N)" after `marker`; 0 if absent.
int PortAfter(const std::string& log, const std::string& marker);

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_CHILD_PROCESS_H_
