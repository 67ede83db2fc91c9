#include "sim/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringside::sim {

absl::StatusOr<ChildProcess> ChildProcess::Spawn(const std::vector<std::string>& argv,
                                                 const std::vector<std::string>& env,
                                                 const std::string& log_path) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  std::vector<std::string> args = argv;
  std::vector<char*> ptrs;
  for (std::string& a : args) ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  std::vector<std::string> envs = env;
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", log_path, ": ", strerror(errno)));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    dup2(fd, 1);
    dup2(fd, 2);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    for (std::string& e : envs) putenv(e.data());
    execv(ptrs[0], ptrs.data());
    std::fprintf(stderr, "ringside-sim: cannot run %s: %s\n", ptrs[0], strerror(errno));
    _exit(127);
  }
  ::close(fd);
  ChildProcess c;
  c.pid_ = pid;
  c.log_path_ = log_path;
  return c;
}

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  int st = 0;
  const pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = st;
    pid_ = -1;
    return false;
  }
  return r == 0;
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

int ChildProcess::Stop(absl::Duration grace) {
  if (pid_ <= 0) return status_;
  kill(pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  while (absl::Now() < deadline) {
    if (!running()) return status_;
    usleep(20000);
  }
  kill(pid_, SIGKILL);
  int st = 0;
  waitpid(pid_, &st, 0);
  status_ = st;
  pid_ = -1;
  return status_;
}

std::string ChildProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool ChildProcess::WaitForLog(const std::string& needle, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (Log().find(needle) != std::string::npos) return true;
    if (!running()) return Log().find(needle) != std::string::npos;
    usleep(20000);
  }
  return false;
}

int PortAfter(const std::string& log, const std::string& marker) {
  const size_t at = log.find(marker);
  if (at == std::string::npos) return 0;
  const size_t p = log.find("(port ", at);
  if (p == std::string::npos) return 0;
  const size_t end = log.find(')', p);
  int port = 0;
  if (end == std::string::npos || !absl::SimpleAtoi(log.substr(p + 6, end - p - 6), &port)) return 0;
  return port;
}

}  // namespace ringside::sim
