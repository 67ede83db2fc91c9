// ringside-aggregator as a library: the ingest gRPC server, the journal, the HTTP endpoints
// (/metrics, /healthz, /readyz, /api/v1/...) and a housekeeping thread, started and stopped as one.
// main.cc turns flags into AggregatorOptions; tests start one in-process on 127.0.0.1:0 and read
// its state through core().
//
//   AggregatorOptions o;
//   o.listen = "127.0.0.1:0";
//   o.http_listen = "127.0.0.1:0";
//   o.state_dir = dir;                       // empty: memory only
//   auto agg = Aggregator::Start(o);         // StatusOr<std::unique_ptr<Aggregator>>
//   (*agg)->grpc_port(); (*agg)->http_port();
//   (*agg)->core().Series("node-1");         // per-series state
//   (*agg)->Shutdown();                      // also on destruction
#ifndef RINGSIDE_DAEMON_AGGREGATOR_AGGREGATOR_H_
#define RINGSIDE_DAEMON_AGGREGATOR_AGGREGATOR_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/aggregator/ingest/ingest_core.h"
#include "daemon/aggregator/ingest/ingest_stats.h"
#include "daemon/aggregator/journal/journal.h"
#include "daemon/aggregator/serving/async_grpc_service.h"
#include "daemon/aggregator/serving/completion_threads.h"
#include "daemon/common/grpc_roles.h"
#include "daemon/common/http_server.h"
#include "daemon/common/steady_time.h"
#include "daemon/common/tls.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace ringside::daemon {

class AggregatorCollectable;
class HttpServer;
class IngestService;

struct GrpcKeepaliveOptions {
  absl::Duration time = absl::Seconds(30);     // the server pings an idle connection this often
  absl::Duration timeout = absl::Seconds(10);  // and drops it when a ping is not answered
  // Client pings are accepted down to this interval (an agent pinging faster is told
  // too_many_pings).
  absl::Duration min_client_ping_interval = absl::Seconds(5);
  // A connection with no call for this long is closed (GOAWAY): connections opened and left
  // idle cannot pile up. Agents always have their stream open.
  absl::Duration max_connection_idle = absl::Minutes(5);
  // A connection that has not finished its handshake (TLS, the HTTP/2 preface) within this is
  // closed.
  absl::Duration handshake_timeout = absl::Seconds(10);
};

struct AggregatorOptions {
  std::string listen = ":9472";       // gRPC ingest; port 0 picks one
  std::string http_listen = ":9473";  // /metrics, /healthz, /api/v1/...; empty: no HTTP
  // exporter-toolkit web configuration of the HTTP side (TLS, client certificates, users);
  // empty: plaintext, where /api/v1 answers only loopback peers unless tls.allow_insecure.
  std::string web_config_file;
  TlsOptions tls;
  // Roles on the gRPC port (grpc_roles.h): who may ingest. The Query API takes the same
  // authorizer in its QueryServiceOptions. Null: no role checks (tests; plaintext).
  std::shared_ptr<RoleAuthorizer> roles;
  // The protocol versions spoken (default: this build's, daemon/common/protocol.h).
  uint32_t min_protocol_version = kMinProtocolVersion;
  uint32_t max_protocol_version = kProtocolVersion;
  IngestLimits limits;
  // Threads that admit a node's definitions after its Hello (IngestServiceOptions); 0: one per
  // four cores, at least one.
  int admission_threads = 0;
  // Threads of the gRPC server (serving/completion_threads.h), each with its own completion
  // queue. One reads every socket with no hand-off between threads, the least CPU a sample; more
  // spread a shard over more cores at a higher cost a sample (docs/scale.md).
  int grpc_threads = 1;
  WindowOptions windows;
  absl::Duration stale_after = absl::Seconds(30);
  absl::Duration hello_timeout = absl::Seconds(10);
  // Started without --peers: warn when an agent says it streams to several replicas
  // (IngestOptions::warn_replicas_without_peers).
  bool warn_replicas_without_peers = false;
  int max_streams_per_connection = 16;
  GrpcKeepaliveOptions keepalive;
  // The journal lives in <state_dir>/journal. Empty: memory only.
  std::string state_dir;
  JournalOptions journal;  // dir, watermarks and log are filled in by Start()
  absl::Duration housekeeping_interval = absl::Milliseconds(500);
  // Runs on the housekeeping thread after every pass (main.cc pets the systemd watchdog here). A
  // pass takes the ingest service's and the core's locks, so a deadlocked or wedged ingest path
  // stops the calls. Must not block.
  std::function<void()> heartbeat;
  // Sees every accepted sample, collective batch and link-event batch (the analysis host); may be
  // null. Must outlive the aggregator.
  IngestObserver* observer = nullptr;
  // More families for /metrics, after the aggregator's own (the analysis metrics); each must
  // outlive the aggregator's HTTP server (shared ownership keeps them alive).
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables;
  std::function<absl::Time()> now = absl::Now;
  // Intervals (node staleness) are measured on this monotonic clock, not on `now`.
  std::function<absl::Time()> steady_now = SteadyNow;
  std::function<void(const std::string&)> log;  // default: LogLine to stderr
  std::string version = "dev";
  // More gRPC services on the ingest port, with the same TLS and client-certificate check (the
  // Query API), on the same completion-queue threads. Start() calls it once, before the server
  // starts, with the core they may read; the aggregator keeps what it returns until its gRPC
  // server and threads have stopped.
  std::function<std::vector<std::shared_ptr<AsyncGrpcService>>(IngestCore* core)> extra_services;
  // Run first thing in Shutdown(), before the gRPC server stops: end long-lived streams of the
  // extra services (WatchIncidents) so the server need not wait for its deadline.
  std::vector<std::function<void()>> on_shutdown;
  // More HTTP GET routes (exact path → handler) next to the aggregator's own (/api/v1/incidents).
  std::vector<std::pair<std::string, HttpServer::Handler>> http_handlers;
};

class Aggregator {
 public:
  // Replays the journal, binds both ports and starts serving.
  static absl::StatusOr<std::unique_ptr<Aggregator>> Start(AggregatorOptions options);
  ~Aggregator();
  Aggregator(const Aggregator&) = delete;
  Aggregator& operator=(const Aggregator&) = delete;

  // Ends every session (UNAVAILABLE "aggregator shutting down"), stops the gRPC server, flushes
  // the journal and writes its final checkpoint, stops HTTP. Idempotent.
  void Shutdown();

  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_port_; }  // 0 without HTTP

  IngestCore& core() { return *core_; }
  const IngestStats& stats() const { return *stats_; }
  const Journal* journal() const { return journal_.get(); }  // null in memory-only mode
  IngestService& service() { return *service_; }
  // What /metrics serves, as families and as Prometheus text.
  std::vector<prometheus::MetricFamily> CollectMetrics() const;
  std::string MetricsText() const;
  // Why the aggregator cannot take data now (what /readyz answers 503 with), or "" when it can:
  // the gRPC server is listening and, with a state dir, the journal's last write succeeded.
  std::string NotReadyReason() const;
  // What the replay at Start() found.
  const JournalReadStats& replay_stats() const { return replay_stats_; }
  const AggregatorOptions& options() const { return options_; }

 private:
  explicit Aggregator(AggregatorOptions options);
  void Housekeeping();
  void Log(const std::string& message) const;

  AggregatorOptions options_;
  std::unique_ptr<IngestStats> stats_;
  std::unique_ptr<IngestCore> core_;
  std::unique_ptr<Journal> journal_;
  JournalReadStats replay_stats_;
  std::unique_ptr<IngestService> service_;
  std::vector<std::shared_ptr<AsyncGrpcService>> extra_services_;  // outlive server_ and threads_
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<CompletionThreads> threads_;  // after server_: stopped first
  std::shared_ptr<AggregatorCollectable> collectable_;
  std::unique_ptr<HttpServer> http_;
  int grpc_port_ = 0;
  int http_port_ = 0;
  absl::Notification stop_;
  std::thread housekeeping_;
  bool shut_down_ = false;
  std::atomic<bool> serving_{false};  // gRPC server started and not shut down
};

// ":9472" → "[::]:9472" (every interface), anything else unchanged: gRPC's address syntax.
std::string GrpcListenAddress(const std::string& listen);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_AGGREGATOR_H_
