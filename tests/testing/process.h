// Real processes and loopback HTTP for integration tests. Every wait is bounded.
#ifndef RINGSIDE_TESTS_TESTING_PROCESS_H_
#define RINGSIDE_TESTS_TESTING_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ringside::testing {

// A child process with stdout and stderr sent to files. Killed (SIGKILL) on destruction if still
// running.
class Process {
 public:
  // argv[0] is the program path. Output goes to `out_dir`/<name>.{out,err}.
  Process(std::vector<std::string> argv, const std::string& out_dir,
          const std::string& stdin_text = "");
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // Sends a signal.
  void Signal(int sig);
  // Waits up to `timeout` for exit; returns the exit code, 128+signal, or -1 on timeout.
  int Wait(absl::Duration timeout);
  std::string Stdout() const;
  std::string Stderr() const;
  // Waits until stderr contains `needle`; false on timeout or exit.
  bool WaitForStderr(const std::string& needle, absl::Duration timeout);

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
  std::string out_path_;
  std::string err_path_;
};

// Runs a command to completion (bounded), returning exit code and output.
struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
RunResult Run(std::vector<std::string> argv, const std::string& stdin_text = "",
              absl::Duration timeout = absl::Seconds(60));

// HTTP/1.0 GET of http://127.0.0.1:port/path. Returns the body; empty string and `status` 0 on
// failure.
std::string HttpGet(int port, const std::string& path, int* status = nullptr,
                    absl::Duration timeout = absl::Seconds(10));

// The path of a built binary, relative to the build folder ("daemon/ringside-agent").
std::string BinaryPath(const std::string& relative);

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_PROCESS_H_
