// The agent's end of the NCCL profiler plugin: a unix stream socket (--collectives-socket, mode
// 0660, optionally owned by --collectives-socket-group) where every training process on the node
// sends batches of fixed-size collective records (docs/collective-record.md).
//
// One thread serves every connection with poll(). For each connection it learns the sender's
// pid/uid with SO_PEERCRED, decodes each frame with the strict decoder, applies a per-connection
// token bucket (records/s with a burst; the excess is dropped and counted), and hands the records
// to the sink as a ringside.v1.CollectiveBatch together with the drops the plugin reported. A
// connection that sends garbage, a truncated frame or an oversized one is cut off, counted by
// reason and logged (at a limited rate); other connections never notice.
//
// Library code: no flags. main.cc turns --collectives-* into CollectiveListenerOptions.
#ifndef RINGSIDE_DAEMON_AGENT_COLLECTIVE_LISTENER_H_
#define RINGSIDE_DAEMON_AGENT_COLLECTIVE_LISTENER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectors/nccl_plugin/record_format.h"
#include "daemon/common/steady_time.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::daemon {

struct CollectiveListenerOptions {
  // Where the plugins connect (their RINGSIDE_SOCKET). A stale socket file is replaced; a path
  // where another process still listens is an error.
  std::string socket_path = "/run/ringside/collectives.sock";
  // A listening AF_UNIX stream socket to adopt instead of binding socket_path (systemd socket
  // activation: the .socket unit made it with its own mode and group). The listener closes it on
  // stop but never unlinks its file, which belongs to systemd; socket_path and socket_group are
  // then only for the log.
  int inherited_fd = -1;
  // The group that owns the socket (a name or a number), so that training processes of that group
  // may connect; empty: the agent's own group. The mode is always 0660.
  std::string socket_group;
  // Token bucket per connection: sustained records per second and the burst allowed at once.
  // Records beyond it are dropped and counted (rate_limited), the connection stays open.
  double records_per_second = 50000;
  double burst_records = 100000;
  // Connections served at once; one more is closed at accept and counted (too_many_connections).
  int max_connections = 256;
  // A frame must arrive whole within this time of its first byte, else the connection is cut off
  // as truncated.
  absl::Duration frame_timeout = absl::Seconds(10);
  // Distinct `job` label values kept in the metrics; records of further jobs are counted under
  // job="_other" (the records themselves keep their job id).
  int max_jobs = 256;
  // Each reason is logged at most once per interval, with the number of lines held back.
  absl::Duration log_interval = absl::Seconds(10);
  // When set, replaces every record's host: records on this socket come from this node, and the
  // agent's node name is what the rest of ringside joins on (a container's hostname is not).
  std::string node;
};

// Counters since the listener started, for /metrics (collective_metrics.h).
struct CollectiveListenerStats {
  struct Job {
    uint64_t records = 0;       // decoded and handed to the sink
    uint64_t drops = 0;         // drops the plugins reported in their batch headers
    uint64_t rate_limited = 0;  // records this agent dropped for the rate limit
  };
  std::map<std::string, Job> jobs;  // at most max_jobs entries plus "_other"
  uint64_t connections_accepted = 0;
  uint64_t connections_open = 0;
  // Connections cut off or refused, by reason: the decoder's (bad_magic, bad_version, bad_length,
  // oversized, truncated, bad_string, bad_value) and too_many_connections. Every reason is present.
  std::map<std::string, uint64_t> rejections;
};

// The reasons in CollectiveListenerStats::rejections.
const std::vector<std::string>& CollectiveRejectionReasons();

// Receives each decoded frame's records (and the drops reported with it). Runs on the listener's
// thread: it must not block.
using CollectiveSink = std::function<void(v1::CollectiveBatch)>;

class CollectiveListener {
 public:
  // Binds the socket (or adopts options.inherited_fd) and starts the thread. InvalidArgument for
  // a bad path or an inherited fd that is not a stream socket, NotFound for an
  // unknown group, AlreadyExists when another process listens there, or the failing system call.
  // `clock` times only intervals (the rate limit, the frame timeout, the log gates): a monotonic
  // clock, so that a wall-clock step neither refills the buckets nor cuts off a frame half sent.
  static absl::StatusOr<std::unique_ptr<CollectiveListener>> Start(
      CollectiveListenerOptions options, CollectiveSink sink,
      std::function<absl::Time()> clock = SteadyNow,
      std::function<void(const std::string&)> log = nullptr);
  // Stops the thread, closes every connection, removes the socket file (unless inherited).
  ~CollectiveListener();
  CollectiveListener(const CollectiveListener&) = delete;
  CollectiveListener& operator=(const CollectiveListener&) = delete;

  CollectiveListenerStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);
  const CollectiveListenerOptions& options() const { return options_; }
  // The cgroups (format version 4: the sender's cgroup v2 path) of records received within
  // `max_age` of now (the listener's clock), at most 1024, for the host collector's cpu.stat reads
  // (collectors/host/host_collector.h).
  std::vector<std::string> RecentCgroups(absl::Duration max_age) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Connection;
  CollectiveListener(CollectiveListenerOptions options, CollectiveSink sink,
                     std::function<absl::Time()> clock,
                     std::function<void(const std::string&)> log);

  // Start() with options.inherited_fd: serves that socket.
  static absl::StatusOr<std::unique_ptr<CollectiveListener>> Adopt(
      CollectiveListenerOptions options, CollectiveSink sink, std::function<absl::Time()> clock,
      std::function<void(const std::string&)> log);
  void Loop();
  void Accept();
  // Reads what is available; false when the connection is finished (closed, cut off).
  bool Read(Connection& c);
  // Decodes complete frames from the connection's buffer; false when it was cut off.
  bool ProcessFrames(Connection& c);
  void Deliver(Connection& c, const collectors::BatchHeaderFields& header);
  void Reject(const Connection* c, const std::string& reason, const std::string& detail);
  void Log(const std::string& reason, const std::string& message);
  void NoteCgroup(const std::string& cgroup) ABSL_LOCKS_EXCLUDED(mu_);
  CollectiveListenerStats::Job& JobLocked(const std::string& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CollectiveListenerOptions options_;
  const CollectiveSink sink_;
  const std::function<absl::Time()> clock_;
  const std::function<void(const std::string&)> log_;
  int listen_fd_ = -1;
  bool unlink_on_stop_ = true;  // false for an inherited socket
  int wake_fd_ = -1;
  std::vector<std::unique_ptr<Connection>> connections_;  // listener thread only
  struct LogGate {
    absl::Time last = absl::InfinitePast();
    uint64_t held_back = 0;
  };
  std::map<std::string, LogGate> log_gates_;                 // listener thread only
  std::vector<collectors::CollectiveRecordFields> records_;  // decoded frame, listener thread only
  std::thread thread_;

  mutable absl::Mutex mu_;
  CollectiveListenerStats stats_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Time> cgroups_ ABSL_GUARDED_BY(mu_);  // last record from each
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_COLLECTIVE_LISTENER_H_
