// ShardWatch against a fake peer shard: a replica that accepts every WatchIncidents stream and
// ends it at once must be retried with backoff, not in a tight loop; a replica that keeps the
// stream open is watched and its changes applied.
#include "daemon/aggregator/shards/shard_watch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "ringside/v1/query.grpc.pb.h"
#include "tests/testing/eventually.h"

namespace ringside::daemon {
namespace {

// A peer's Query API: snapshots are empty; each stream ends at once, or sends one change and
// stays open until cancelled.
class FakePeer final : public v1::Query::Service {
 public:
  explicit FakePeer(bool drop_streams) : drop_(drop_streams) {}
  grpc::Status ListIncidents(grpc::ServerContext*, const v1::ListIncidentsRequest*,
                             v1::ListIncidentsResponse*) override {
    ++lists;
    return grpc::Status::OK;
  }
  grpc::Status WatchIncidents(grpc::ServerContext* ctx, const v1::WatchIncidentsRequest*,
                              grpc::ServerWriter<v1::IncidentChange>* writer) override {
    ++watches;
    if (drop_) return grpc::Status::OK;
    v1::IncidentChange change;
    v1::Incident* inc = change.mutable_incident();
    inc->set_id(7);
    (*inc->mutable_entity())["node"] = "gpu-07";
    inc->set_kind("pause_storm");
    inc->set_severity("critical");
    inc->set_open(true);
    inc->set_opened_unix_nanos(absl::ToUnixNanos(absl::Now()));
    writer->Write(change);
    while (!ctx->IsCancelled()) absl::SleepFor(absl::Milliseconds(20));
    return grpc::Status::CANCELLED;
  }
  std::atomic<int> lists{0};
  std::atomic<int> watches{0};

 private:
  const bool drop_;
};

struct Peer {
  explicit Peer(bool drop) : service(drop) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&service);
    server = b.BuildAndStart();
  }
  ~Peer() { server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1))); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
  FakePeer service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

TEST(ShardWatchTest, AReplicaThatDropsEveryStreamIsRetriedWithBackoffNotInALoop) {
  Peer peer(/*drop=*/true);
  ASSERT_NE(peer.server, nullptr);
  ShardWatchOptions o;
  o.shards = {analysis::Shard{"shard-1", {peer.address()}}};
  o.backoff_initial = absl::Milliseconds(100);
  o.backoff_max = absl::Seconds(1);
  std::atomic<int> replaced{0};
  ShardWatchSink sink;
  sink.replace = [&](const std::string&, const std::vector<analysis::Incident>&) { ++replaced; };
  {
    std::unique_ptr<ShardWatch> w = ShardWatch::Start(o, sink);
    absl::SleepFor(absl::Seconds(3));
  }
  // Backoff 0.1, 0.2, 0.4, 0.8, 1, 1 s (± 20 %): about 6 attempts in 3 s. Without backoff after a
  // stream that ended at once, each round is two local RPCs: hundreds in 3 s.
  EXPECT_GE(peer.service.watches.load(), 2);
  EXPECT_LE(peer.service.watches.load(), 12) << "reconnects in a tight loop";
  EXPECT_EQ(replaced.load(), peer.service.watches.load()) << "each attempt still takes a snapshot";
}

TEST(ShardWatchTest, AStreamThatStaysOpenIsWatchedAndItsChangesApplied) {
  Peer peer(/*drop=*/false);
  ASSERT_NE(peer.server, nullptr);
  ShardWatchOptions o;
  o.shards = {analysis::Shard{"shard-1", {peer.address()}}};
  std::atomic<int> applied{0};
  std::string key;
  absl::Mutex mu;
  ShardWatchSink sink;
  sink.replace = [](const std::string&, const std::vector<analysis::Incident>&) {};
  sink.apply = [&](const std::string& shard, const analysis::Incident& inc) {
    absl::MutexLock lock(&mu);
    key = absl::StrCat(shard, "/", analysis::IncidentKindName(inc.kind), "/", inc.entity.at("node"));
    ++applied;
  };
  std::unique_ptr<ShardWatch> w = ShardWatch::Start(o, sink);
  ASSERT_TRUE(testing::Eventually([&] { return applied.load() == 1; }));
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(key, "shard-1/pause_storm/gpu-07");
  }
  ASSERT_TRUE(testing::Eventually([&] {
    std::vector<ShardWatch::ShardState> st = w->states();
    return st.size() == 1 && st[0].connected && st[0].connects == 1;
  }));
  EXPECT_EQ(peer.service.watches.load(), 1);
  w.reset();  // cancels the open stream and joins
}

}  // namespace
}  // namespace ringside::daemon
