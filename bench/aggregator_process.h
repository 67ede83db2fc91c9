// A real ringside-aggregator child process for the benchmarks that drive one over loopback
// (ringside-ingest-bench, ringside-shard-capacity-bench), and what they read of it from /proc and
// its /metrics.
#ifndef RINGSIDE_BENCH_AGGREGATOR_PROCESS_H_
#define RINGSIDE_BENCH_AGGREGATOR_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace ringside::bench {

// ringside-aggregator on ephemeral 127.0.0.1 ports, memory only, its log in a temporary file.
class AggregatorProcess {
 public:
  AggregatorProcess() = default;
  AggregatorProcess(const AggregatorProcess&) = delete;
  AggregatorProcess& operator=(const AggregatorProcess&) = delete;
  ~AggregatorProcess() { Stop(); }

  // Starts `binary` with --listen/--http-listen on 127.0.0.1:0 plus `flags`, and waits (up to
  // 10 s) for both ports in its log. False (and a message on stderr) when it does not start.
  bool Start(const std::string& binary, const std::vector<std::string>& flags);
  // SIGTERM, wait, remove the log. Idempotent.
  void Stop();

  pid_t pid() const { return pid_; }
  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_port_; }
  const std::string& log_path() const { return log_path_; }

 private:
  pid_t pid_ = 0;
  int grpc_port_ = 0;
  int http_port_ = 0;
  std::string log_path_;
};

// utime + stime of `pid` in seconds (/proc/<pid>/stat).
double ProcCpuSeconds(pid_t pid);
// Minor page faults of `pid` so far, every thread (/proc/<pid>/stat); -1 if unreadable.
long long ProcMinorFaults(pid_t pid);
// A field of /proc/<pid>/status in its unit (kB for VmRSS, a count for Threads); -1 if absent.
long ProcStatusField(pid_t pid, const std::string& field);
inline long RssKib(pid_t pid) { return ProcStatusField(pid, "VmRSS"); }
// Context switches of every thread of `pid`, voluntary plus involuntary (/proc/<pid>/task/*/status;
// threads that have ended no longer count).
long ContextSwitches(pid_t pid);
// Open file descriptors of `pid` (entries of /proc/<pid>/fd).
long OpenFds(pid_t pid);
// GET http://127.0.0.1:<port><path>, the whole response with its headers ("" on failure).
std::string HttpGet(int port, const std::string& path);
// The value of the first sample of family `name` in a Prometheus text page; -1 if absent.
double Metric(const std::string& text, const std::string& name);
// The sum of every sample of family `name` (all label values); 0 if absent.
double MetricSum(const std::string& text, const std::string& name);

}  // namespace ringside::bench

#endif  // RINGSIDE_BENCH_AGGREGATOR_PROCESS_H_
