#include "tests/testing/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/testing/temp_dir.h"

namespace ringside::testing {

Process::Process(std::vector<std::string> argv, const std::string& out_dir,
                 const std::string& stdin_text) {
  static int counter = 0;
  std::string base = argv[0].substr(argv[0].find_last_of('/') + 1);
  std::string stem = absl::StrCat(out_dir, "/", base, ".", getpid(), ".", counter++);
  out_path_ = stem + ".out";
  err_path_ = stem + ".err";
  std::string in_path = stem + ".in";
  {
    int fd = ::open(in_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      (void)!::write(fd, stdin_text.data(), stdin_text.size());
      ::close(fd);
    }
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    int in = ::open(in_path.c_str(), O_RDONLY);
    int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
}

Process::~Process() {
  if (pid_ > 0 && !exited_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
  }
}

void Process::Signal(int sig) {
  if (pid_ > 0 && !exited_) ::kill(pid_, sig);
}

int Process::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!exited_) {
    pid_t r = ::waitpid(pid_, &status_, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      break;
    }
    if (absl::Now() > deadline) return -1;
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
  return -1;
}

std::string Process::Stdout() const { return ReadFileOrEmpty(out_path_); }
std::string Process::Stderr() const { return ReadFileOrEmpty(err_path_); }

bool Process::WaitForStderr(const std::string& needle, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (Stderr().find(needle) != std::string::npos) return true;
    if (!exited_ && ::waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
    if (exited_) return Stderr().find(needle) != std::string::npos;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

RunResult Run(std::vector<std::string> argv, const std::string& stdin_text,
              absl::Duration timeout) {
  TempDir tmp;
  RunResult r;
  {
    Process p(std::move(argv), tmp.path(), stdin_text);
    r.exit_code = p.Wait(timeout);
    r.out = p.Stdout();
    r.err = p.Stderr();
  }
  return r;
}

std::string HttpGet(int port, const std::string& path, int* status, absl::Duration timeout) {
  if (status) *status = 0;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  struct timeval tv;
  tv.tv_sec = static_cast<time_t>(absl::ToInt64Seconds(timeout));
  tv.tv_usec = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  (void)!::write(fd, req.data(), req.size());
  std::string resp;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    resp.append(buf, static_cast<size_t>(n));
    if (resp.size() > (256u << 20)) break;
  }
  ::close(fd);
  size_t sp = resp.find(' ');
  if (status && sp != std::string::npos) *status = std::atoi(resp.c_str() + sp + 1);
  size_t body = resp.find("\r\n\r\n");
  return body == std::string::npos ? "" : resp.substr(body + 4);
}

std::string BinaryPath(const std::string& relative) {
  return absl::StrCat(RINGSIDE_BINARY_DIR, "/", relative);
}

}  // namespace ringside::testing
