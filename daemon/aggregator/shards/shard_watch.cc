#include "daemon/aggregator/shards/shard_watch.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/aggregator/metrics/aggregator_metrics.h"
#include "daemon/aggregator/metrics/catalog_families.h"
#include "daemon/aggregator/query/query_convert.h"
#include "daemon/common/steady_time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"
#include "ringside/v1/query.grpc.pb.h"

namespace ringside::daemon {
namespace {

class ShardWatchMetrics final : public prometheus::Collectable {
 public:
  explicit ShardWatchMetrics(std::function<std::vector<ShardWatch::ShardState>()> states)
      : states_(std::move(states)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    CatalogFamilies out(AggregatorMetricCatalog());
    for (const ShardWatch::ShardState& s : states_()) {
      out.Add("ringside_aggregator_shard_watch_up", {{"shard", s.shard}}, s.connected ? 1 : 0);
      out.Add("ringside_aggregator_shard_watch_snapshots_total", {{"shard", s.shard}},
              static_cast<double>(s.connects));
      out.Add("ringside_aggregator_shard_watch_changes_total", {{"shard", s.shard}},
              static_cast<double>(s.changes));
      out.Add("ringside_aggregator_shard_watch_failures_total", {{"shard", s.shard}},
              static_cast<double>(s.failures));
    }
    return out.Take();
  }

 private:
  std::function<std::vector<ShardWatch::ShardState>()> states_;
};

int Millis(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

}  // namespace

ShardWatch::ShardWatch(ShardWatchOptions options, ShardWatchSink sink)
    : options_(std::move(options)), sink_(std::move(sink)), shared_(std::make_shared<Shared>()) {}

std::unique_ptr<ShardWatch> ShardWatch::Start(ShardWatchOptions options, ShardWatchSink sink) {
  std::unique_ptr<ShardWatch> w(new ShardWatch(std::move(options), std::move(sink)));
  {
    absl::MutexLock lock(&w->shared_->mu);
    for (const analysis::Shard& s : w->options_.shards) {
      ShardState st;
      st.shard = s.name;
      st.replica = s.replicas.empty() ? "" : s.replicas[0];
      w->shared_->states.push_back(st);
      w->shared_->live.push_back(nullptr);
    }
  }
  std::weak_ptr<Shared> weak = w->shared_;
  w->metrics_ = std::make_shared<ShardWatchMetrics>([weak] {
    std::vector<ShardState> out;
    if (std::shared_ptr<Shared> s = weak.lock()) {
      absl::MutexLock lock(&s->mu);
      out = s->states;
    }
    return out;
  });
  for (size_t i = 0; i < w->options_.shards.size(); ++i) {
    if (w->options_.shards[i].replicas.empty()) continue;
    ShardWatch* raw = w.get();
    w->threads_.emplace_back([raw, i] { raw->Run(i); });
  }
  return w;
}

ShardWatch::~ShardWatch() {
  stop_.Notify();
  {
    absl::MutexLock lock(&shared_->mu);
    for (grpc::ClientContext* c : shared_->live) {
      if (c != nullptr) c->TryCancel();
    }
  }
  for (std::thread& t : threads_) t.join();
}

std::vector<ShardWatch::ShardState> ShardWatch::states() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->states;
}

void ShardWatch::Run(size_t i) {
  const analysis::Shard& shard = options_.shards[i];
  std::mt19937_64 rng(std::random_device{}());
  size_t next = 0;  // the replica to try first
  absl::Duration backoff = options_.backoff_initial;
  while (!stop_.HasBeenNotified()) {
    bool worked = false;
    for (size_t k = 0; k < shard.replicas.size() && !stop_.HasBeenNotified(); ++k) {
      const size_t r = (next + k) % shard.replicas.size();
      const absl::Time began = absl::Now();
      if (WatchOnce(i, shard.replicas[r])) {
        // It worked until the stream ended: try the other replica first next time (this one
        // was probably killed or restarted). A stream that ended at once counts as a failure.
        worked = absl::Now() - began >= options_.healthy_stream;
        next = (r + 1) % shard.replicas.size();
        break;
      }
    }
    if (worked) {
      backoff = options_.backoff_initial;
      continue;
    }
    std::uniform_real_distribution<double> jitter(0.8, 1.2);
    WaitForNotificationSteady(stop_, backoff * jitter(rng));
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
}

bool ShardWatch::WatchOnce(size_t i, const std::string& replica) {
  const std::string& name = options_.shards[i].name;
  auto log = [&](const std::string& m) {
    if (options_.log) options_.log(absl::StrCat("shard watch ", name, " (", replica, "): ", m));
  };
  auto fail = [&] {
    absl::MutexLock lock(&shared_->mu);
    ++shared_->states[i].failures;
    shared_->states[i].connected = false;
  };
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      MakeChannelCredentials(options_.tls, replica);
  if (!creds.ok()) {
    log(creds.status().ToString());
    fail();
    return false;
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Millis(options_.keepalive));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, Millis(options_.keepalive));
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // the stream may be idle for hours
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetMaxReceiveMessageSize(64 << 20);
  auto stub = v1::Query::NewStub(grpc::CreateCustomChannel(replica, *creds, args));

  // The stream first, then the snapshot: a change made between the two is in the stream, and
  // applying an older copy after a newer one is refused by revision (RemoteIncidents::Apply).
  grpc::ClientContext watch_ctx;
  {
    absl::MutexLock lock(&shared_->mu);
    if (stop_.HasBeenNotified()) return false;
    shared_->live[i] = &watch_ctx;
  }
  auto unregister = [&] {
    absl::MutexLock lock(&shared_->mu);
    shared_->live[i] = nullptr;
  };
  v1::WatchIncidentsRequest wreq;
  std::unique_ptr<grpc::ClientReader<v1::IncidentChange>> reader =
      stub->WatchIncidents(&watch_ctx, wreq);

  grpc::ClientContext list_ctx;
  list_ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::ListIncidentsRequest lreq;
  lreq.set_since_unix_nanos(absl::ToUnixNanos(absl::Now() - options_.recent));
  lreq.set_limit(10000);
  v1::ListIncidentsResponse lresp;
  grpc::Status ls = stub->ListIncidents(&list_ctx, lreq, &lresp);
  if (!ls.ok()) {
    watch_ctx.TryCancel();
    reader->Finish();
    unregister();
    log(absl::StrCat("not reachable: ", ls.error_message()));
    fail();
    return false;
  }
  std::vector<analysis::Incident> snapshot;
  for (const v1::Incident& p : lresp.incidents()) {
    absl::StatusOr<analysis::Incident> inc = FromProto(p);
    if (inc.ok()) snapshot.push_back(*std::move(inc));
  }
  // Open incidents older than `recent` are not in a `since` listing: ask for them too.
  grpc::ClientContext open_ctx;
  open_ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::ListIncidentsRequest oreq;
  oreq.set_open_only(true);
  oreq.set_limit(10000);
  v1::ListIncidentsResponse oresp;
  if (grpc::Status os = stub->ListIncidents(&open_ctx, oreq, &oresp); os.ok()) {
    for (const v1::Incident& p : oresp.incidents()) {
      absl::StatusOr<analysis::Incident> inc = FromProto(p);
      if (inc.ok()) snapshot.push_back(*std::move(inc));
    }
  }
  if (sink_.replace) sink_.replace(name, snapshot);
  {
    absl::MutexLock lock(&shared_->mu);
    ShardState& st = shared_->states[i];
    st.replica = replica;
    st.connected = true;
    ++st.connects;
  }
  log(absl::StrCat("watching (", snapshot.size(), " incidents in the snapshot)"));
  v1::IncidentChange change;
  uint64_t applied = 0;
  while (reader->Read(&change)) {
    absl::StatusOr<analysis::Incident> inc = FromProto(change.incident());
    if (!inc.ok()) continue;
    if (sink_.apply) sink_.apply(name, *inc);
    ++applied;
    absl::MutexLock lock(&shared_->mu);
    ++shared_->states[i].changes;
  }
  grpc::Status fs = reader->Finish();
  unregister();
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->states[i].connected = false;
    if (!stop_.HasBeenNotified()) ++shared_->states[i].failures;
  }
  if (!stop_.HasBeenNotified()) {
    log(absl::StrCat("stream ended after ", applied, " changes (",
                     fs.ok() ? std::string("closed") : fs.error_message(), "); reconnecting"));
  }
  return true;
}

}  // namespace ringside::daemon
