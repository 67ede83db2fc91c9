#include "bench/aggregator_process.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringside::bench {

bool AggregatorProcess::Start(const std::string& binary, const std::vector<std::string>& flags) {
  char log_path[] = "/tmp/ringside-bench-aggregator-XXXXXX";
  const int log_fd = mkstemp(log_path);
  if (log_fd < 0) {
    std::perror("mkstemp");
    return false;
  }
  log_path_ = log_path;
  std::vector<std::string> args = {binary, "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0"};
  args.insert(args.end(), flags.begin(), flags.end());
  pid_ = fork();
  if (pid_ == 0) {
    dup2(log_fd, 2);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(log_fd);
  const std::regex grpc_re("ingest \\(gRPC\\) listening on \\S+ \\(port ([0-9]+)\\)");
  const std::regex http_re("HTTP \\S+ \\S+ \\S+ listening on \\S+ \\(port ([0-9]+)\\)");
  for (int i = 0; i < 200 && (grpc_port_ == 0 || http_port_ == 0); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    std::ifstream in(log_path_);
    std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::smatch m;
    if (std::regex_search(log, m, grpc_re)) grpc_port_ = std::stoi(m[1].str());
    if (std::regex_search(log, m, http_re)) http_port_ = std::stoi(m[1].str());
  }
  if (grpc_port_ == 0 || http_port_ == 0) {
    std::fprintf(stderr, "aggregator did not start (log %s)\n", log_path_.c_str());
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
    return false;
  }
  return true;
}

void AggregatorProcess::Stop() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  if (!log_path_.empty()) {
    unlink(log_path_.c_str());
    log_path_.clear();
  }
}

namespace {

// Fields 3..last of /proc/<pid>/stat (after the command name, which may hold spaces and
// parentheses): element i is field i + 3. Empty when unreadable.
std::vector<std::string> ProcStatFields(pid_t pid, int last) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = s.rfind(')');
  if (close == std::string::npos || close + 2 > s.size()) return {};
  std::istringstream rest(s.substr(close + 2));
  std::vector<std::string> fields;
  std::string field;
  for (int i = 3; i <= last && rest >> field; ++i) fields.push_back(field);
  return fields;
}

}  // namespace

double ProcCpuSeconds(pid_t pid) {
  const std::vector<std::string> f = ProcStatFields(pid, 15);
  unsigned long long utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return 0;
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

long long ProcMinorFaults(pid_t pid) {
  const std::vector<std::string> f = ProcStatFields(pid, 10);
  long long v = 0;
  return f.size() >= 8 && absl::SimpleAtoi(f[7], &v) ? v : -1;
}

long ProcStatusField(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  const std::string prefix = field + ":";
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::stol(line.substr(prefix.size()));
  }
  return -1;
}

long ContextSwitches(pid_t pid) {
  DIR* d = opendir(absl::StrCat("/proc/", pid, "/task").c_str());
  if (d == nullptr) return -1;
  long n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/task/", e->d_name, "/status"));
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) n += std::stol(line.substr(24));
      if (line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) n += std::stol(line.substr(27));
    }
  }
  closedir(d);
  return n;
}

long OpenFds(pid_t pid) {
  DIR* d = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (d == nullptr) return -1;
  long n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

std::string HttpGet(int port, const std::string& path) {
  const std::string cmd = absl::StrCat("exec 3<>/dev/tcp/127.0.0.1/", port, "; printf 'GET ", path,
                                       " HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3");
  FILE* f = popen(absl::StrCat("bash -c \"", cmd, "\"").c_str(), "r");
  std::string out;
  char buf[65536];
  size_t n;
  while (f && (n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  if (f) pclose(f);
  return out;
}

namespace {

// Calls `f(value)` for every sample of family `name` ("\nname value" or "\nname{...} value") in
// a Prometheus text page, until it returns false. A plain scan: the aggregator's page at 10,000
// nodes is megabytes, which std::regex took seconds over.
template <typename F>
void ForEachSample(const std::string& text, const std::string& name, F f) {
  const std::string needle = "\n" + name;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    size_t p = at + needle.size();
    if (p >= text.size()) return;
    if (text[p] == '{') {
      p = text.find('}', p);
      if (p == std::string::npos) return;
      ++p;
    }
    if (p >= text.size() || text[p] != ' ') continue;  // another family with this prefix
    char* end = nullptr;
    const double v = std::strtod(text.c_str() + p + 1, &end);
    if (end == text.c_str() + p + 1) continue;
    if (!f(v)) return;
  }
}

}  // namespace

double Metric(const std::string& text, const std::string& name) {
  double out = -1;
  ForEachSample(text, name, [&](double v) {
    out = v;
    return false;
  });
  return out;
}

double MetricSum(const std::string& text, const std::string& name) {
  double sum = 0;
  ForEachSample(text, name, [&](double v) {
    sum += v;
    return true;
  });
  return sum;
}

}  // namespace ringside::bench
