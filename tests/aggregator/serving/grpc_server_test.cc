// The aggregator's gRPC server on its completion-queue threads (daemon/aggregator/serving/): many
// streams and Query calls at once on one and on several threads, streams that end by closing and
// by cancelling told apart, and a shutdown with calls in every state that leaves none open.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/aggregator/aggregator.h"
#include "daemon/aggregator/query/query_api.h"
#include "grpcpp/create_channel.h"
#include "ringside/v1/query.grpc.pb.h"
#include "tests/aggregator/ingest/ingest_test_util.h"

namespace ringside::daemon {
namespace {

using ringside::testing::CounterDef;
using ringside::testing::DefsMsg;
using ringside::testing::HelloMsg;
using ringside::testing::RawAgent;
using ringside::testing::SamplesMsg;

constexpr int64_t kT0 = int64_t{1'700'000'000} * 1'000'000'000;

class GrpcServerTest : public ::testing::Test {
 protected:
  void Start(int threads) {
    AggregatorOptions o;
    o.listen = "127.0.0.1:0";
    o.http_listen = "";
    o.grpc_threads = threads;
    o.housekeeping_interval = absl::Milliseconds(20);
    o.log = [this](const std::string& m) {
      absl::MutexLock l(&log_mu_);
      log_.push_back(m);
    };
    api_ = InstallQueryApi(o, nullptr, {});
    auto a = Aggregator::Start(std::move(o));
    ASSERT_TRUE(a.ok()) << a.status();
    agg_ = std::move(*a);
  }
  std::unique_ptr<v1::Query::Stub> QueryStub() {
    return v1::Query::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", agg_->grpc_port()),
                                                  grpc::InsecureChannelCredentials()));
  }
  // Shuts the aggregator down and says whether it had to give up on open calls.
  bool ShutdownLeftCallsOpen() {
    agg_->Shutdown();
    absl::MutexLock l(&log_mu_);
    for (const std::string& line : log_) {
      if (absl::StrContains(line, "calls still open")) return true;
    }
    return false;
  }
  template <typename Pred>
  bool Eventually(Pred pred) {
    for (int i = 0; i < 1000; ++i) {
      if (pred()) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return pred();
  }
  uint64_t Ends(EndReason r) const { return agg_->stats().ends[static_cast<size_t>(r)].load(); }

  absl::Mutex log_mu_;
  std::vector<std::string> log_;
  std::shared_ptr<QueryApi> api_;
  std::unique_ptr<Aggregator> agg_;
};

// 16 agents stream 20 batches each while another thread reads the status 30 times: every batch
// is acked, every read answered, on one thread and on three.
void StreamsAndQueries(GrpcServerTest* t, int port, std::unique_ptr<v1::Query::Stub> stub) {
  constexpr int kAgents = 16, kBatches = 20;
  std::atomic<int> acked{0};
  std::vector<std::thread> agents;
  for (int a = 0; a < kAgents; ++a) {
    agents.emplace_back([&, a] {
      RawAgent agent(port);
      if (!agent.Send(HelloMsg(absl::StrCat("node-", a), 1)) || !agent.Read()) return;
      std::vector<v1::SeriesDef> defs;
      for (uint32_t id = 1; id <= 50; ++id)
        defs.push_back(CounterDef(id, absl::StrCat("c", id), 64));
      if (!agent.Send(DefsMsg(defs))) return;
      for (uint64_t seq = 1; seq <= kBatches; ++seq) {
        std::vector<std::pair<uint32_t, uint64_t>> values;
        for (uint32_t id = 1; id <= 50; ++id) values.emplace_back(id, seq * id);
        if (!agent.Send(SamplesMsg(seq, kT0 + static_cast<int64_t>(seq) * 1'000'000'000, values))) {
          return;
        }
      }
      if (agent.WaitAck(kBatches)) acked.fetch_add(1);
      (void)agent.Finish();
    });
  }
  int answered = 0;
  for (int i = 0; i < 30; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::ClusterStatus status;
    if (stub->GetStatus(&ctx, v1::GetStatusRequest(), &status).ok()) ++answered;
  }
  for (std::thread& th : agents) th.join();
  EXPECT_EQ(acked.load(), kAgents);
  EXPECT_EQ(answered, 30);
}

TEST_F(GrpcServerTest, OneThreadServesManyStreamsAndQueriesAtOnce) {
  Start(1);
  StreamsAndQueries(this, agg_->grpc_port(), QueryStub());
  EXPECT_EQ(agg_->core().Nodes().size(), 16u);
  EXPECT_FALSE(ShutdownLeftCallsOpen());
}

TEST_F(GrpcServerTest, SeveralThreadsServeManyStreamsAndQueriesAtOnce) {
  Start(3);
  StreamsAndQueries(this, agg_->grpc_port(), QueryStub());
  EXPECT_EQ(agg_->core().Nodes().size(), 16u);
  EXPECT_FALSE(ShutdownLeftCallsOpen());
}

TEST_F(GrpcServerTest, AStreamClosedAndAStreamCancelledAreCountedApart) {
  Start(1);
  RawAgent closing(agg_->grpc_port());
  ASSERT_TRUE(closing.Send(HelloMsg("closes", 1)));
  ASSERT_TRUE(closing.Read().has_value());
  EXPECT_TRUE(closing.Finish().ok());
  EXPECT_TRUE(Eventually([&] { return Ends(EndReason::kClientClosed) == 1; }));

  RawAgent cancelling(agg_->grpc_port());
  ASSERT_TRUE(cancelling.Send(HelloMsg("cancels", 1)));
  ASSERT_TRUE(cancelling.Read().has_value());
  cancelling.context().TryCancel();
  EXPECT_TRUE(Eventually([&] { return Ends(EndReason::kCancelled) == 1; }));
  EXPECT_EQ(Ends(EndReason::kClientClosed), 1u);
  EXPECT_FALSE(ShutdownLeftCallsOpen());
}

// Streams with no Hello, with a Hello, in the middle of their definitions and half-closed, and a
// watch: the shutdown ends them all and no call object outlives the server.
TEST_F(GrpcServerTest, ShutdownWithCallsInEveryStateLeavesNoneOpen) {
  Start(2);
  const int port = agg_->grpc_port();
  RawAgent silent(port);
  RawAgent hello(port);
  ASSERT_TRUE(hello.Send(HelloMsg("hello", 1)));
  ASSERT_TRUE(hello.Read().has_value());
  RawAgent admitting(port);
  ASSERT_TRUE(admitting.Send(HelloMsg("admitting", 1)));
  ASSERT_TRUE(admitting.Read().has_value());
  std::vector<v1::SeriesDef> defs;
  for (uint32_t id = 1; id <= 5000; ++id) defs.push_back(CounterDef(id, absl::StrCat("c", id), 64));
  ASSERT_TRUE(admitting.Send(DefsMsg(defs)));
  RawAgent half(port);
  ASSERT_TRUE(half.Send(HelloMsg("half", 1)));
  ASSERT_TRUE(half.Read().has_value());

  std::unique_ptr<v1::Query::Stub> stub = QueryStub();
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  std::unique_ptr<grpc::ClientReader<v1::IncidentChange>> watch =
      stub->WatchIncidents(&watch_ctx, v1::WatchIncidentsRequest());
  EXPECT_TRUE(Eventually([&] { return api_->service()->watch_hub().watchers() == 1; }));

  EXPECT_FALSE(ShutdownLeftCallsOpen());
  EXPECT_EQ(hello.AwaitEnd().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(silent.AwaitEnd().error_code(), grpc::StatusCode::OK);
  EXPECT_NE(admitting.AwaitEnd().error_code(), grpc::StatusCode::OK);
  v1::IncidentChange change;
  while (watch->Read(&change)) {
  }
  EXPECT_TRUE(watch->Finish().ok());  // the watch is ended with OK at shutdown
}

}  // namespace
}  // namespace ringside::daemon
