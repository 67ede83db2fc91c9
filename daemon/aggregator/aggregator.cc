#include "daemon/aggregator/aggregator.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/aggregator/ingest/ingest_service.h"
#include "daemon/aggregator/metrics/aggregator_metrics.h"
#include "daemon/aggregator/query/aggregator_json.h"
#include "daemon/common/http_server.h"
#include "daemon/common/log.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "prometheus/text_serializer.h"

namespace ringside::daemon {

std::string GrpcListenAddress(const std::string& listen) {
  if (absl::StartsWith(listen, ":")) return absl::StrCat("[::]", listen);
  return listen;
}

Aggregator::Aggregator(AggregatorOptions options) : options_(std::move(options)) {}

Aggregator::~Aggregator() { Shutdown(); }

void Aggregator::Log(const std::string& message) const {
  if (options_.log) options_.log(message);
}

absl::StatusOr<std::unique_ptr<Aggregator>> Aggregator::Start(AggregatorOptions options) {
  std::unique_ptr<Aggregator> a(new Aggregator(std::move(options)));
  AggregatorOptions& o = a->options_;
  if (!o.log) o.log = [](const std::string& m) { LogLine(m); };
  if (!o.now) o.now = absl::Now;
  if (!o.steady_now) o.steady_now = SteadyNow;
  if (o.limits.max_sessions == 0) o.limits.max_sessions = 2 * o.limits.max_nodes + 64;
  if (o.limits.max_message_bytes == 0 || o.limits.max_message_bytes > (1u << 30)) {
    return absl::InvalidArgumentError("--max-message-bytes must be in 1..1073741824");
  }

  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds =
      MakeServerCredentials(o.tls, o.listen);
  if (!creds.ok()) return creds.status();

  a->stats_ = std::make_unique<IngestStats>();
  IngestOptions io;
  io.min_protocol_version = o.min_protocol_version;
  io.max_protocol_version = o.max_protocol_version;
  io.limits = o.limits;
  io.windows = o.windows;
  io.stale_after = o.stale_after;
  io.now = o.now;
  io.steady_now = o.steady_now;
  io.log = o.log;
  io.warn_replicas_without_peers = o.warn_replicas_without_peers;
  a->core_ = std::make_unique<IngestCore>(io, a->stats_.get());
  IngestCore* core = a->core_.get();
  core->SetObserver(o.observer);

  if (!o.state_dir.empty()) {
    JournalOptions jo = o.journal;
    jo.dir = absl::StrCat(o.state_dir, "/journal");
    jo.watermarks = [core] { return core->Watermarks(); };
    jo.log = o.log;
    std::vector<Watermark> marks;
    absl::StatusOr<std::unique_ptr<Journal>> j = Journal::Open(
        jo, [core](const JournalEntry& e) { core->RestoreEntry(e); }, &marks, &a->replay_stats_);
    if (!j.ok()) {
      return absl::Status(j.status().code(),
                          absl::StrCat("journal in ", jo.dir, ": ", j.status().message()));
    }
    a->journal_ = std::move(*j);
    core->RestoreWatermarks(marks);
    core->SetJournal(a->journal_.get());
    const JournalReadStats& r = a->replay_stats_;
    a->Log(absl::StrCat("journal ", jo.dir, ": restored ", marks.size(), " watermarks and ",
                        r.payloads - r.duplicates, " payloads from ", r.segments, " segments (",
                        r.duplicates, " duplicates skipped, ", r.corrupt_segments,
                        " torn segment tails, ", r.unreadable_segments, " unreadable segments)"));
  } else {
    a->Log(
        "no --state-dir: memory only (a restart forgets watermarks and windows; agents resend "
        "only what was not acked)");
  }

  IngestServiceOptions so;
  so.hello_timeout = o.hello_timeout;
  so.max_sessions = o.limits.max_sessions;
  so.aggregator_version = o.version;
  so.now = o.steady_now;  // the Hello timeout is an interval
  so.max_message_bytes = o.limits.max_message_bytes;
  so.roles = o.roles;
  so.admission_threads = o.admission_threads;
  a->service_ = std::make_unique<IngestService>(core, a->stats_.get(), so);

  grpc::ServerBuilder builder;
  builder.AddListeningPort(GrpcListenAddress(o.listen), *creds, &a->grpc_port_);
  builder.RegisterService(a->service_->grpc_service());
  if (o.extra_services) a->extra_services_ = o.extra_services(core);
  for (const std::shared_ptr<AsyncGrpcService>& extra : a->extra_services_) {
    if (extra) builder.RegisterService(extra->grpc_service());
  }
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
  for (int i = 0; i < std::max(1, o.grpc_threads); ++i) {
    queues.push_back(builder.AddCompletionQueue());
  }
  // gRPC cuts off a message over its limit without telling the service; the service checks
  // --max-message-bytes itself (and counts), gRPC only what is far over it.
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<size_t>(2 * o.limits.max_message_bytes, (1u << 31) - 1)));
  builder.SetMaxSendMessageSize(1 << 20);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(o.keepalive.time)));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(o.keepalive.timeout)));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      static_cast<int>(absl::ToInt64Milliseconds(o.keepalive.min_client_ping_interval)));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, o.max_streams_per_connection);
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_IDLE_MS,
      static_cast<int>(absl::ToInt64Milliseconds(o.keepalive.max_connection_idle)));
  builder.AddChannelArgument(
      GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
      static_cast<int>(absl::ToInt64Milliseconds(o.keepalive.handshake_timeout)));
  // No HTTP/2 BDP probing: with it, gRPC answers a stream's data with a PING that the agent must
  // acknowledge — two more writes and wake-ups on both sides for every 1-s batch, which at
  // thousands of streams cost as much CPU as the samples themselves (ringside-shard-capacity-bench,
  // 2,048 agents at 0.25 Hz: 380-448 -> 215-218 ns a sample). The streams carry ~20 KB a second;
  // the default 64 KiB window needs no tuning.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  a->server_ = builder.BuildAndStart();
  a->threads_ = std::make_unique<CompletionThreads>(std::move(queues));
  if (!a->server_ || a->grpc_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", o.listen, " (address in use or not local?)"));
  }
  for (grpc::ServerCompletionQueue* q : a->threads_->queues()) {
    a->service_->Arm(q, a->threads_->live());
    for (const std::shared_ptr<AsyncGrpcService>& extra : a->extra_services_) {
      if (extra) extra->Arm(q, a->threads_->live());
    }
  }
  a->threads_->Start();

  a->collectable_ =
      std::make_shared<AggregatorCollectable>(core, a->stats_.get(), a->journal_.get(), o.version);
  if (!o.http_listen.empty()) {
    HttpServerOptions ho;
    ho.web_config_file = o.web_config_file;
    ho.log = o.log;
    absl::StatusOr<std::unique_ptr<HttpServer>> http = HttpServer::Start(o.http_listen, ho);
    if (!http.ok()) return http.status();
    a->http_ = std::move(*http);
    a->http_port_ = a->http_->port();
    Aggregator* self = a.get();
    a->http_->Handle("/metrics", [self](const HttpRequest&) {
      HttpResponse r;
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = self->MetricsText();
      return r;
    });
    a->http_->Handle("/healthz", [](const HttpRequest&) {
      HttpResponse r;
      r.body = "ok\n";
      return r;
    });
    a->http_->Handle("/readyz", [self](const HttpRequest&) {
      HttpResponse r;
      const std::string why = self->NotReadyReason();
      r.status = why.empty() ? 200 : 503;
      r.body = why.empty() ? "ok\n" : absl::StrCat(why, "\n");
      return r;
    });
    // The JSON API serves what the Query API protects: in plaintext, only to loopback peers.
    auto api = [server = a->http_.get(), allow = o.tls.allow_insecure](
                   const std::string& path, HttpServer::Handler h) {
      server->Handle(path, [allow, h = std::move(h)](const HttpRequest& req) {
        if (!PlaintextApiAllowed(req, allow)) return PlaintextApiRefusal(req);
        return h(req);
      });
    };
    api("/api/v1/nodes", [core](const HttpRequest&) {
      HttpResponse r;
      r.content_type = "application/json";
      r.body = NodesJson(core->Nodes());
      return r;
    });
    auto node_param = [](const HttpRequest& req, HttpResponse* r) -> std::string {
      auto it = req.query.find("node");
      if (it == req.query.end() || it->second.empty()) {
        r->status = 400;
        r->body = "{\"error\":\"give ?node=NAME\"}\n";
        return "";
      }
      return it->second;
    };
    api("/api/v1/series", [core, node_param](const HttpRequest& req) {
      HttpResponse r;
      r.content_type = "application/json";
      const std::string node = node_param(req, &r);
      if (node.empty()) return r;
      absl::StatusOr<std::vector<analysis::SeriesView>> series = core->Series(node);
      if (!series.ok()) {
        r.status = 404;
        r.body = "{\"error\":\"unknown node\"}\n";
        return r;
      }
      r.body = SeriesJson(node, *series);
      return r;
    });
    api("/api/v1/collectives", [core, node_param](const HttpRequest& req) {
      HttpResponse r;
      r.content_type = "application/json";
      const std::string node = node_param(req, &r);
      if (!node.empty()) r.body = CollectivesJson(node, core->RecentCollectives(node));
      return r;
    });
    api("/api/v1/link_events", [core, node_param](const HttpRequest& req) {
      HttpResponse r;
      r.content_type = "application/json";
      const std::string node = node_param(req, &r);
      if (!node.empty()) r.body = LinkEventsJson(node, core->RecentLinkEvents(node));
      return r;
    });
    for (const auto& [path, handler] : o.http_handlers) {
      if (path.rfind("/api/", 0) == 0) {
        api(path, handler);
      } else {
        a->http_->Handle(path, handler);
      }
    }
    if (!a->http_->tls() && !IsLoopbackAddress(o.http_listen) && o.log) {
      o.log(absl::StrCat("warning: HTTP on ", o.http_listen,
                         " is plaintext without authentication (/metrics is open; /api/v1 answers "
                         "only loopback peers", o.tls.allow_insecure ? ", and any peer under --allow-insecure" : "",
                         "): give --web.config.file (docs/http-security.md)"));
    }
  }

  a->serving_ = true;
  a->housekeeping_ = std::thread([p = a.get()] { p->Housekeeping(); });
  return a;
}

void Aggregator::Housekeeping() {
  // On the monotonic clock: a step back of the wall clock must not hold housekeeping (staleness,
  // Hello expiry, the watchdog heartbeat) for the step's length.
  while (!WaitForNotificationSteady(stop_, options_.housekeeping_interval)) {
    service_->ExpireHellos(options_.steady_now());
    for (const StaleChange& n : core_->StaleChanges()) {
      if (n.stale) {
        Log(absl::StrCat("node ", n.node, " is stale: nothing since ",
                         absl::FormatTime(n.last_seen, absl::UTCTimeZone())));
      } else {
        Log(absl::StrCat("node ", n.node, " reports again"));
      }
    }
    if (options_.heartbeat) options_.heartbeat();
  }
}

void Aggregator::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  serving_ = false;
  for (const std::function<void()>& hook : options_.on_shutdown) {
    if (hook) hook();
  }
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (housekeeping_.joinable()) housekeeping_.join();
  if (service_) service_->Shutdown();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }
  if (threads_ && !threads_->Stop()) {
    Log("gRPC server: calls still open 10 s after the server stopped (a bug); stopping anyway");
  }
  if (journal_) journal_->Close();
  http_.reset();
}

std::vector<prometheus::MetricFamily> Aggregator::CollectMetrics() const {
  std::vector<prometheus::MetricFamily> families =
      collectable_ ? collectable_->Collect() : std::vector<prometheus::MetricFamily>{};
  for (const std::shared_ptr<prometheus::Collectable>& c : options_.collectables) {
    if (c == nullptr) continue;
    std::vector<prometheus::MetricFamily> more = c->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  return families;
}

std::string Aggregator::NotReadyReason() const {
  if (!serving_) return "not serving: the gRPC server is stopped";
  if (!options_.state_dir.empty()) {
    if (journal_ == nullptr) return "journal not open";
    const JournalStats j = journal_->stats();
    if (!j.healthy) {
      return absl::StrCat("journal cannot be written (payloads are not acknowledged): ",
                          j.last_error.empty() ? "unknown error" : j.last_error);
    }
  }
  return "";
}

std::string Aggregator::MetricsText() const {
  return prometheus::TextSerializer().Serialize(CollectMetrics());
}

}  // namespace ringside::daemon
