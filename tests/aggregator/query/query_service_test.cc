// The Query API (ringside.v1.Query) and GET /api/v1/incidents on an in-process aggregator with its
// analysis host, driven by a raw agent: a flapping InfiniBand port (link_down, then
// link_flapping), a second port going down and up, and a collective job with one late rank
// (straggler). Every RPC is checked through a real gRPC client, as is the mTLS requirement.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "analysis/sqlite_incident_store.h"
#include "daemon/aggregator/aggregator.h"
#include "daemon/aggregator/analysis_host.h"
#include "daemon/aggregator/query/query_api.h"
#include "daemon/aggregator/query/query_convert.h"
#include "daemon/common/tls.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/create_channel.h"
#include "ringside/v1/query.grpc.pb.h"
#include "tests/aggregator/ingest/ingest_test_util.h"
#include "tests/testing/certs.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

constexpr uint32_t kPort0State = 1, kPort1State = 2;

v1::SeriesDef StateDef(uint32_t id, const std::string& device) {
  v1::SeriesDef d;
  d.set_id(id);
  d.set_source("infiniband_port");
  d.set_device(device);
  d.set_port("1");
  d.set_counter("state");
  d.set_priority(-1);
  d.set_kind(v1::SERIES_KIND_STATE);
  d.set_width(64);
  d.set_unit("state");
  return d;
}

std::unique_ptr<v1::Query::Stub> QueryStub(int port) {
  return v1::Query::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
}

void Deadline(grpc::ClientContext& ctx, absl::Duration d = absl::Seconds(10)) {
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + d));
}

class QueryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }

  void Start(QueryServiceOptions qo, bool prefill_store = false, bool with_http = false) {
    const std::string state = dir_.path() + "/state";
    if (prefill_store) {
      // A pause storm from before this run: only the store has it.
      auto store = analysis::SqliteIncidentStore::Open(state);
      ASSERT_TRUE(store.ok()) << store.status();
      analysis::Incident old;
      old.id = 1;
      old.kind = analysis::IncidentKind::kPauseStorm;
      old.severity = analysis::Severity::kCritical;
      old.key = "pause_storm/node-9";
      old.entity = {{"node", "node-9"}, {"device", "mlx5_2"}, {"port", "1"}};
      old.opened = absl::FromUnixSeconds(1'600'000'000);
      old.updated = old.opened + absl::Minutes(3);
      old.resolved = old.updated;
      old.summary = "an old storm";
      old.revision = 2;
      ASSERT_TRUE((*store)->Put(old).ok());
    }
    AnalysisHostOptions ao;
    ao.state_dir = state;
    ao.flush_interval = absl::Milliseconds(20);
    ao.log = [](const std::string&) {};
    auto host = AnalysisHost::Start(ao);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = std::move(*host);
    AggregatorOptions o;
    o.listen = "127.0.0.1:0";
    o.http_listen = with_http ? "127.0.0.1:0" : "";  // civetweb takes ~2 s to stop
    o.observer = host_.get();
    o.log = [](const std::string&) {};
    o.version = "9.9-test";
    api_ = InstallQueryApi(o, host_.get(), qo);
    auto agg = Aggregator::Start(o);
    ASSERT_TRUE(agg.ok()) << agg.status();
    agg_ = std::move(*agg);
    ASSERT_NE(api_->service(), nullptr);
    stub_ = QueryStub(agg_->grpc_port());
    agent_ = std::make_unique<testing::RawAgent>(agg_->grpc_port(), absl::Seconds(60));
    ASSERT_TRUE(agent_->Send(testing::HelloMsg("node-1", 7)));
    ASSERT_TRUE(agent_->Send(
        testing::DefsMsg({StateDef(kPort0State, "mlx5_0"), StateDef(kPort1State, "mlx5_1")})));
  }

  void TearDown() override {
    agent_.reset();
    if (agg_) agg_->Shutdown();
  }

  // One sample of both ports' states (4 ACTIVE, 1 DOWN) at second `i`, processed.
  void Sample(int i, int port0, int port1) {
    const uint64_t seq = ++seq_;
    ASSERT_TRUE(agent_->Send(testing::SamplesMsg(seq, absl::ToUnixNanos(t0_ + absl::Seconds(i)),
                                                 {{kPort0State, static_cast<uint64_t>(port0)},
                                                  {kPort1State, static_cast<uint64_t>(port1)}})));
    ASSERT_TRUE(agent_->WaitAck(seq));
  }

  // 4 ranks all-reduce; rank 2 (on node-2) computes 30 ms longer every iteration.
  void Collectives(int iterations) {
    int64_t now = absl::ToUnixNanos(t0_);
    for (int i = 0; i < iterations; ++i) {
      v1::AgentMessage m;
      const uint64_t seq = ++seq_;
      m.set_seq(seq);
      const int64_t done = now + 135'000'000;
      for (int r = 0; r < 4; ++r) {
        v1::CollectiveRecord* c = m.mutable_collectives()->add_records();
        c->set_job_id("train");
        c->set_comm_id(77);
        c->set_comm_name("dp");
        c->set_rank(r);
        c->set_nranks(4);
        c->set_global_rank(r);
        c->set_function("AllReduce");
        c->set_seq(coll_seq_);
        c->set_bytes(1 << 26);
        c->set_kernel_start_unix_nanos(now + 100'000'000 + (r == 2 ? 30'000'000 : 0));
        c->set_kernel_stop_unix_nanos(done);
        c->set_host(r < 2 ? "node-1" : "node-2");
        c->set_pid(100 + r);
      }
      ++coll_seq_;
      now = done;
      ASSERT_TRUE(agent_->Send(m));
      ASSERT_TRUE(agent_->WaitAck(seq));
    }
  }

  // Polls ListIncidents until `pred` holds for its answer (bounded).
  template <typename Pred>
  v1::ListIncidentsResponse WaitList(const v1::ListIncidentsRequest& req, Pred pred) {
    v1::ListIncidentsResponse resp;
    const absl::Time end = absl::Now() + absl::Seconds(15);
    while (absl::Now() < end) {
      grpc::ClientContext ctx;
      Deadline(ctx);
      resp.Clear();
      grpc::Status s = stub_->ListIncidents(&ctx, req, &resp);
      if (s.ok() && pred(resp)) return resp;
      absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << "condition not met; last answer: " << resp.DebugString();
    return resp;
  }

  static int Count(const v1::ListIncidentsResponse& r, const std::string& kind, bool open) {
    int n = 0;
    for (const v1::Incident& i : r.incidents()) n += i.kind() == kind && i.open() == open;
    return n;
  }

  // Port 0 flaps twice (link_down opened and resolved, then link_flapping open); port 1 stays up;
  // `train` has a straggler.
  void Scenario() {
    for (int i = 0; i < 3; ++i) Sample(i, 4, 4);
    Sample(3, 1, 4);
    Sample(4, 4, 4);
    Sample(5, 1, 4);
    Sample(6, 4, 4);
    Collectives(25);
    v1::ListIncidentsRequest all;
    WaitList(all, [](const v1::ListIncidentsResponse& r) {
      return Count(r, "link_flapping", true) == 1 && Count(r, "straggler", true) == 1 &&
             Count(r, "link_down", false) == 2;
    });
  }

  testing::TempDir dir_;
  std::unique_ptr<AnalysisHost> host_;
  std::shared_ptr<QueryApi> api_;
  std::unique_ptr<Aggregator> agg_;
  std::unique_ptr<v1::Query::Stub> stub_;
  std::unique_ptr<testing::RawAgent> agent_;
  absl::Time t0_ = absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()) - 60);
  uint64_t seq_ = 0;
  uint64_t coll_seq_ = 0;
};

TEST_F(QueryServiceTest, ListIncidentsFilters) {
  Scenario();
  const auto list = [&](v1::ListIncidentsRequest req, grpc::Status* status = nullptr) {
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::ListIncidentsResponse resp;
    grpc::Status s = stub_->ListIncidents(&ctx, req, &resp);
    if (status != nullptr) *status = s;
    EXPECT_TRUE(status != nullptr || s.ok()) << s.error_message();
    return resp;
  };
  v1::ListIncidentsRequest req;
  v1::ListIncidentsResponse all = list(req);
  ASSERT_EQ(all.incidents_size(), 4);
  for (int i = 1; i < all.incidents_size(); ++i) {  // newest first
    EXPECT_GT(all.incidents(i - 1).id(), all.incidents(i).id());
  }

  req.set_open_only(true);
  v1::ListIncidentsResponse open = list(req);
  ASSERT_EQ(open.incidents_size(), 2);
  for (const v1::Incident& i : open.incidents()) {
    EXPECT_TRUE(i.open());
    EXPECT_EQ(i.resolved_unix_nanos(), 0);
  }

  req = {};
  req.set_kind("link_down");
  v1::ListIncidentsResponse downs = list(req);
  ASSERT_EQ(downs.incidents_size(), 2);
  for (const v1::Incident& i : downs.incidents()) {
    EXPECT_EQ(i.kind(), "link_down");
    EXPECT_FALSE(i.open());
    EXPECT_GT(i.resolved_unix_nanos(), 0);
    EXPECT_EQ(i.entity().at("device"), "mlx5_0");
    EXPECT_EQ(i.severity(), "critical");
  }

  req = {};
  req.set_kind("no_such_kind");
  grpc::Status bad;
  list(req, &bad);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("link_flapping"), std::string::npos) << bad.error_message();

  req = {};
  req.set_node("node-1");
  v1::ListIncidentsResponse node1 = list(req);
  EXPECT_EQ(node1.incidents_size(), 3);  // the links; the straggler is on node-2
  for (const v1::Incident& i : node1.incidents()) EXPECT_NE(i.kind(), "straggler");

  // The straggler names the job; the flapping port runs ranks 0 and 1 of it (its blast radius).
  req = {};
  req.set_job("train");
  v1::ListIncidentsResponse train = list(req);
  ASSERT_EQ(train.incidents_size(), 2);
  for (const v1::Incident& i : train.incidents()) {
    if (i.kind() == "straggler") {
      EXPECT_EQ(i.entity().at("rank"), "2");
      EXPECT_EQ(i.entity().at("node"), "node-2");
    } else {
      EXPECT_EQ(i.kind(), "link_flapping");
      ASSERT_EQ(i.affected_size(), 1);
      EXPECT_EQ(i.affected(0).job(), "train");
    }
  }
  req.set_kind("straggler");
  EXPECT_EQ(list(req).incidents_size(), 1);

  req = {};
  req.set_limit(1);
  v1::ListIncidentsResponse one = list(req);
  ASSERT_EQ(one.incidents_size(), 1);
  EXPECT_EQ(one.incidents(0).id(), all.incidents(0).id());

  req = {};
  req.set_since_unix_nanos(absl::ToUnixNanos(absl::Now() + absl::Hours(1)));
  EXPECT_EQ(list(req).incidents_size(), 0);
}

TEST_F(QueryServiceTest, GetIncidentAndNotFound) {
  Scenario();
  v1::ListIncidentsRequest req;
  req.set_kind("link_flapping");
  v1::ListIncidentsResponse flapping =
      WaitList(req, [](const v1::ListIncidentsResponse& r) { return r.incidents_size() == 1; });
  ASSERT_EQ(flapping.incidents_size(), 1);
  const uint64_t id = flapping.incidents(0).id();
  {
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::GetIncidentRequest g;
    g.set_id(id);
    v1::Incident inc;
    ASSERT_TRUE(stub_->GetIncident(&ctx, g, &inc).ok());
    EXPECT_EQ(inc.id(), id);
    EXPECT_EQ(inc.kind(), "link_flapping");
    EXPECT_TRUE(inc.open());
    EXPECT_EQ(inc.entity().at("node"), "node-1");
    EXPECT_EQ(inc.entity().at("device"), "mlx5_0");
    EXPECT_EQ(inc.evidence().at("cycles_in_window"), 2);
    EXPECT_FALSE(inc.summary().empty());
    // The conversion back gives the same incident.
    absl::StatusOr<analysis::Incident> back = FromProto(inc);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(ToProto(*back), inc));
  }
  {
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::GetIncidentRequest g;
    g.set_id(987654);
    v1::Incident inc;
    grpc::Status s = stub_->GetIncident(&ctx, g, &inc);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  }
}

TEST_F(QueryServiceTest, ListLinksMarksTheFlappingPort) {
  Scenario();
  const auto links = [&](v1::ListLinksRequest req) {
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::ListLinksResponse resp;
    EXPECT_TRUE(stub_->ListLinks(&ctx, req, &resp).ok());
    return resp;
  };
  v1::ListLinksResponse all = links({});
  ASSERT_EQ(all.links_size(), 2);
  const v1::LinkStatus& p0 = all.links(0);  // sorted: mlx5_0 first
  EXPECT_EQ(p0.node(), "node-1");
  EXPECT_EQ(p0.source(), "infiniband");
  EXPECT_EQ(p0.device(), "mlx5_0");
  EXPECT_EQ(p0.port(), "1");
  EXPECT_EQ(p0.state(), "up");
  EXPECT_EQ(p0.flaps_in_window(), 2u);
  EXPECT_EQ(p0.last_change_unix_nanos(), absl::ToUnixNanos(t0_ + absl::Seconds(6)));
  EXPECT_EQ(p0.last_seen_unix_nanos(), absl::ToUnixNanos(t0_ + absl::Seconds(6)));
  ASSERT_EQ(p0.open_incident_kinds_size(), 1);
  EXPECT_EQ(p0.open_incident_kinds(0), "link_flapping");
  EXPECT_EQ(p0.open_incident_ids_size(), 1);
  EXPECT_FALSE(p0.healthy());
  const v1::LinkStatus& p1 = all.links(1);
  EXPECT_EQ(p1.device(), "mlx5_1");
  EXPECT_TRUE(p1.healthy());
  EXPECT_EQ(p1.flaps_in_window(), 0u);

  v1::ListLinksRequest req;
  req.set_unhealthy_only(true);
  v1::ListLinksResponse unhealthy = links(req);
  ASSERT_EQ(unhealthy.links_size(), 1);
  EXPECT_EQ(unhealthy.links(0).device(), "mlx5_0");
  req = {};
  req.set_flapping_only(true);
  ASSERT_EQ(links(req).links_size(), 1);
  req = {};
  req.set_node("node-7");
  EXPECT_EQ(links(req).links_size(), 0);
}

// --unhealthy leaves out, before copying them, the links of nodes that are all up with no open
// incident; it still lists a link that is down and one with an open incident.
TEST_F(QueryServiceTest, ListLinksUnhealthyOnlyAcrossNodes) {
  Scenario();  // node-1: mlx5_0 flapping (an open incident), mlx5_1 up
  testing::RawAgent node2(agg_->grpc_port(), absl::Seconds(60));
  ASSERT_TRUE(node2.Send(testing::HelloMsg("node-2", 8)));
  ASSERT_TRUE(node2.Send(
      testing::DefsMsg({StateDef(kPort0State, "mlx5_0"), StateDef(kPort1State, "mlx5_1")})));
  auto send = [&](uint64_t seq, int i, uint64_t port0, uint64_t port1) {
    ASSERT_TRUE(node2.Send(testing::SamplesMsg(seq, absl::ToUnixNanos(t0_ + absl::Seconds(i)),
                                               {{kPort0State, port0}, {kPort1State, port1}})));
    ASSERT_TRUE(node2.WaitAck(seq));
  };
  const auto links = [&](bool unhealthy_only) {
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::ListLinksRequest req;
    req.set_unhealthy_only(unhealthy_only);
    v1::ListLinksResponse resp;
    EXPECT_TRUE(stub_->ListLinks(&ctx, req, &resp).ok());
    return resp;
  };
  send(1, 0, 4, 4);  // node-2: both up
  ASSERT_EQ(links(false).links_size(), 4);
  v1::ListLinksResponse bad = links(true);
  ASSERT_EQ(bad.links_size(), 1) << bad.DebugString();
  EXPECT_EQ(bad.links(0).node(), "node-1");
  EXPECT_EQ(bad.links(0).device(), "mlx5_0");

  send(2, 1, 1, 4);  // node-2's mlx5_0 goes down
  bad = links(true);
  ASSERT_EQ(bad.links_size(), 2) << bad.DebugString();
  EXPECT_EQ(bad.links(1).node(), "node-2");
  EXPECT_EQ(bad.links(1).device(), "mlx5_0");
  EXPECT_EQ(bad.links(1).state(), "down");
  EXPECT_FALSE(bad.links(1).healthy());
  EXPECT_EQ(links(false).links_size(), 4);
}

TEST_F(QueryServiceTest, GetNode) {
  Scenario();
  {
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::GetNodeRequest req;
    req.set_node("node-1");
    v1::NodeStatus n;
    grpc::Status s = stub_->GetNode(&ctx, req, &n);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(n.node(), "node-1");
    EXPECT_FALSE(n.stale());
    EXPECT_GT(n.last_seen_unix_nanos(), 0);
    EXPECT_EQ(n.agent_version(), "test");
    EXPECT_EQ(n.series(), 2u);
    ASSERT_EQ(n.rates_size(), 2);
    for (const v1::SeriesRate& r : n.rates()) {
      EXPECT_EQ(r.source(), "infiniband_port");
      EXPECT_EQ(r.counter(), "state");
      EXPECT_FALSE(r.is_counter());
      EXPECT_EQ(r.value(), 4);  // ACTIVE
    }
    ASSERT_EQ(n.open_incidents_size(), 1);
    EXPECT_EQ(n.open_incidents(0).kind(), "link_flapping");
    EXPECT_EQ(n.links_size(), 2);
  }
  {
    grpc::ClientContext ctx;
    Deadline(ctx);
    v1::GetNodeRequest req;
    req.set_node("never-heard-of");
    v1::NodeStatus n;
    EXPECT_EQ(stub_->GetNode(&ctx, req, &n).error_code(), grpc::StatusCode::NOT_FOUND);
  }
}

TEST_F(QueryServiceTest, TopStragglersFlagsTheLateRank) {
  Scenario();
  v1::ListIncidentsRequest lr;
  lr.set_kind("straggler");
  v1::ListIncidentsResponse s =
      WaitList(lr, [](const v1::ListIncidentsResponse& r) { return r.incidents_size() == 1; });
  ASSERT_EQ(s.incidents_size(), 1);
  grpc::ClientContext ctx;
  Deadline(ctx);
  v1::TopStragglersRequest req;
  req.set_job("train");
  req.set_limit(2);
  v1::TopStragglersResponse resp;
  ASSERT_TRUE(stub_->TopStragglers(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.ranks_size(), 2);
  const v1::RankScore& top = resp.ranks(0);
  EXPECT_EQ(top.job(), "train");
  EXPECT_EQ(top.rank(), 2);
  EXPECT_EQ(top.node(), "node-2");
  EXPECT_EQ(top.comm(), "dp");
  EXPECT_DOUBLE_EQ(top.score(), 1.0);
  EXPECT_EQ(top.instances(), 20u);  // the detector's window
  EXPECT_NEAR(top.margin(), 30.0 / 35.0, 1e-6);
  EXPECT_TRUE(top.flagged());
  EXPECT_EQ(top.incident_id(), s.incidents(0).id());
  EXPECT_EQ(resp.ranks(1).score(), 0.0);
  EXPECT_FALSE(resp.ranks(1).flagged());

  grpc::ClientContext ctx2;
  Deadline(ctx2);
  req.set_job("other-job");
  resp.Clear();
  ASSERT_TRUE(stub_->TopStragglers(&ctx2, req, &resp).ok());
  EXPECT_EQ(resp.ranks_size(), 0);

  // A window in seconds was never implemented: refused, not silently ignored.
  grpc::ClientContext ctx3;
  Deadline(ctx3);
  req.set_window_seconds(300);
  grpc::Status refused = stub_->TopStragglers(&ctx3, req, &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.error_message().find("detector's window"), std::string::npos);
}

TEST_F(QueryServiceTest, GetStatus) {
  Scenario();
  grpc::ClientContext ctx;
  Deadline(ctx);
  v1::ClusterStatus st;
  ASSERT_TRUE(stub_->GetStatus(&ctx, {}, &st).ok());
  EXPECT_EQ(st.nodes(), 1u);
  EXPECT_EQ(st.stale_nodes(), 0u);
  EXPECT_EQ(st.links(), 2u);
  EXPECT_EQ(st.unhealthy_links(), 1u);
  EXPECT_EQ(st.open_incidents_by_kind().at("link_flapping"), 1u);
  EXPECT_EQ(st.open_incidents_by_kind().at("straggler"), 1u);
  EXPECT_EQ(st.open_incidents_by_kind().count("link_down"), 0u);
  ASSERT_EQ(st.open_incidents_size(), 2);
  EXPECT_EQ(st.open_incidents(0).severity(), "critical");  // most severe first
  ASSERT_EQ(st.jobs_size(), 1);
  EXPECT_EQ(st.jobs(0), "train");
  EXPECT_EQ(st.aggregator_version(), "9.9-test");
  EXPECT_NEAR(static_cast<double>(st.now_unix_nanos()), absl::ToUnixNanos(absl::Now()), 60e9);

  // Port 1 goes down: both links are unhealthy now, one by its incident, one by its state — the
  // count (taken without copying the links) agrees with ListLinks link by link.
  Sample(7, 4, 1);
  WaitList({}, [](const v1::ListIncidentsResponse& r) { return Count(r, "link_down", true) == 1; });
  grpc::ClientContext ctx2;
  Deadline(ctx2);
  st.Clear();
  ASSERT_TRUE(stub_->GetStatus(&ctx2, {}, &st).ok());
  EXPECT_EQ(st.links(), 2u);
  EXPECT_EQ(st.unhealthy_links(), 2u);
  grpc::ClientContext ctx3;
  Deadline(ctx3);
  v1::ListLinksResponse links;
  ASSERT_TRUE(stub_->ListLinks(&ctx3, {}, &links).ok());
  ASSERT_EQ(links.links_size(), 2);
  EXPECT_FALSE(links.links(0).healthy());
  EXPECT_FALSE(links.links(1).healthy());
}

TEST_F(QueryServiceTest, WatchSendsTheSnapshotThenLiveChanges) {
  Scenario();
  grpc::ClientContext ctx;
  Deadline(ctx, absl::Seconds(30));
  v1::WatchIncidentsRequest req;
  req.set_node("node-1");
  auto stream = stub_->WatchIncidents(&ctx, req);
  v1::IncidentChange c;
  ASSERT_TRUE(stream->Read(&c));
  EXPECT_TRUE(c.initial());
  EXPECT_EQ(c.type(), v1::IncidentChange::OPENED);
  EXPECT_EQ(c.incident().kind(), "link_flapping");  // the straggler is on node-2: filtered out

  Sample(7, 4, 1);  // port 1 goes down
  // (Updates of the flapping incident may come first: the correlator refreshes its blast radius.)
  while (stream->Read(&c) && c.type() == v1::IncidentChange::UPDATED &&
         c.incident().kind() == "link_flapping") {
    EXPECT_FALSE(c.initial());
  }
  EXPECT_FALSE(c.initial());
  EXPECT_EQ(c.type(), v1::IncidentChange::OPENED);
  EXPECT_EQ(c.incident().kind(), "link_down");
  EXPECT_EQ(c.incident().entity().at("device"), "mlx5_1");
  const uint64_t id = c.incident().id();
  Sample(8, 4, 4);  // and up again
  // Updates may come between (the correlator adds the blast radius), then the resolution.
  while (stream->Read(&c) && c.type() == v1::IncidentChange::UPDATED) {
    EXPECT_FALSE(c.initial());
    EXPECT_TRUE(c.incident().id() == id || c.incident().kind() == "link_flapping");
  }
  EXPECT_EQ(c.type(), v1::IncidentChange::RESOLVED);
  EXPECT_EQ(c.incident().id(), id);
  EXPECT_FALSE(c.incident().open());
  ctx.TryCancel();
  while (stream->Read(&c)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(QueryServiceTest, WatchRejectsAnUnknownKind) {
  grpc::ClientContext ctx;
  Deadline(ctx);
  v1::WatchIncidentsRequest req;
  req.set_kind("meteor_strike");
  auto stream = stub_->WatchIncidents(&ctx, req);
  v1::IncidentChange c;
  EXPECT_FALSE(stream->Read(&c));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(QueryServiceTest, WatchEndsCleanlyOnShutdown) {
  grpc::ClientContext ctx;
  Deadline(ctx, absl::Seconds(30));
  auto stream = stub_->WatchIncidents(&ctx, {});
  Sample(0, 4, 4);
  Sample(1, 1, 4);  // something to read: the watch is established
  v1::IncidentChange c;
  ASSERT_TRUE(stream->Read(&c));
  EXPECT_EQ(c.incident().kind(), "link_down");
  agent_.reset();
  const absl::Time start = absl::Now();
  agg_->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));  // not the server's 2 s grace deadline
  while (stream->Read(&c)) {
  }
  EXPECT_TRUE(stream->Finish().ok());
}

// A watcher that does not read: its queue fills and it is cut off with RESOURCE_EXHAUSTED, while
// the publisher (the analysis host's flush thread) never waits for it.
TEST(QueryServiceSlowWatcherTest, SlowWatcherIsCutOff) {
  testing::TempDir dir;
  AnalysisHostOptions ao;
  ao.log = [](const std::string&) {};
  auto host = AnalysisHost::Start(ao);
  ASSERT_TRUE(host.ok()) << host.status();
  AggregatorOptions o;
  o.listen = "127.0.0.1:0";
  o.http_listen = "";
  o.log = [](const std::string&) {};
  QueryServiceOptions qo;
  qo.watch.queue_limit = 16;
  std::shared_ptr<QueryApi> api = InstallQueryApi(o, host->get(), qo);
  auto agg = Aggregator::Start(o);
  ASSERT_TRUE(agg.ok()) << agg.status();
  auto stub = QueryStub((*agg)->grpc_port());
  grpc::ClientContext ctx;
  Deadline(ctx, absl::Seconds(30));
  auto stream = stub->WatchIncidents(&ctx, {});
  // Wait until the watch is registered.
  for (int i = 0; i < 500 && api->service()->watch_hub().watchers() == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(api->service()->watch_hub().watchers(), 1u);
  // 2000 changes of 10 kB: far more than HTTP/2 flow control lets through to a client that does
  // not read, so the writes stall and the queue overflows.
  std::vector<analysis::IncidentChange> changes;
  for (uint64_t i = 1; i <= 2000; ++i) {
    analysis::Incident inc;
    inc.id = i;
    inc.kind = analysis::IncidentKind::kLinkDown;
    inc.entity = {{"node", "n"}, {"device", "mlx5_0"}, {"port", "1"}};
    inc.summary = std::string(10000, 'x');
    inc.revision = 1;
    changes.push_back({analysis::IncidentChangeType::kOpened, std::move(inc)});
  }
  const absl::Time start = absl::Now();
  api->service()->watch_hub().Publish(changes);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(api->service()->watch_hub().cut_off(), 1u);
  const std::string metrics = (*agg)->MetricsText();
  EXPECT_NE(metrics.find("ringside_aggregator_query_watchers_cut_off_total 1"), std::string::npos)
      << metrics;
  v1::IncidentChange c;
  int read = 0;
  while (stream->Read(&c)) ++read;
  grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_LT(read, 2000);
  (*agg)->Shutdown();
}

class QueryServiceHttpTest : public QueryServiceTest {
 protected:
  void SetUp() override { Start({}, /*prefill_store=*/false, /*with_http=*/true); }
};

TEST_F(QueryServiceHttpTest, IncidentsEndpoint) {
  Scenario();
  int status = 0;
  std::string body = testing::HttpGet(agg_->http_port(), "/api/v1/incidents?open=1", &status);
  EXPECT_EQ(status, 200);
  ASSERT_FALSE(body.empty());
  EXPECT_EQ(body[0], '[');
  size_t n = 0;
  for (size_t p = 0; (p = body.find("{\"id\":", p)) != std::string::npos; ++p) ++n;
  EXPECT_EQ(n, 2u) << body;
  EXPECT_NE(body.find("\"kind\":\"link_flapping\""), std::string::npos) << body;
  EXPECT_NE(body.find("\"kind\":\"straggler\""), std::string::npos) << body;

  body = testing::HttpGet(agg_->http_port(), "/api/v1/incidents?kind=link_down&limit=1", &status);
  EXPECT_EQ(status, 200);
  EXPECT_NE(body.find("\"kind\":\"link_down\""), std::string::npos) << body;
  EXPECT_EQ(body.find("\"kind\":\"link_down\"", body.find("link_down") + 1), std::string::npos);

  body = testing::HttpGet(agg_->http_port(), "/api/v1/incidents?job=train&node=node-2", &status);
  EXPECT_EQ(status, 200);
  EXPECT_NE(body.find("\"kind\":\"straggler\""), std::string::npos) << body;

  const int64_t future = absl::ToUnixSeconds(absl::Now()) + 3600;
  body = testing::HttpGet(agg_->http_port(), absl::StrCat("/api/v1/incidents?since=", future),
                          &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body, "[]\n");

  body = testing::HttpGet(agg_->http_port(), "/api/v1/incidents?kind=nope", &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(body.find("unknown incident kind"), std::string::npos) << body;
  testing::HttpGet(agg_->http_port(), "/api/v1/incidents?since=yesterday", &status);
  EXPECT_EQ(status, 400);
  testing::HttpGet(agg_->http_port(), "/api/v1/incidents?limit=-3", &status);
  EXPECT_EQ(status, 400);
}

// History that only the incident store has (from before this run) is listed and found by id.
class QueryServiceHistoryTest : public QueryServiceTest {
 protected:
  void SetUp() override { Start({}, /*prefill_store=*/true); }
};

TEST_F(QueryServiceHistoryTest, StoredIncidentsAreListedAndFound) {
  v1::ListIncidentsRequest req;
  req.set_kind("pause_storm");
  grpc::ClientContext ctx;
  Deadline(ctx);
  v1::ListIncidentsResponse resp;
  ASSERT_TRUE(stub_->ListIncidents(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.incidents_size(), 1);
  EXPECT_EQ(resp.incidents(0).id(), 1u);
  EXPECT_EQ(resp.incidents(0).summary(), "an old storm");
  EXPECT_FALSE(resp.incidents(0).open());
  EXPECT_EQ(resp.incidents(0).resolved_unix_nanos(),
            absl::ToUnixNanos(absl::FromUnixSeconds(1'600'000'000) + absl::Minutes(3)));

  req.set_node("node-9");
  grpc::ClientContext ctx2;
  Deadline(ctx2);
  resp.Clear();
  ASSERT_TRUE(stub_->ListIncidents(&ctx2, req, &resp).ok());
  EXPECT_EQ(resp.incidents_size(), 1);
  req.set_open_only(true);
  grpc::ClientContext ctx3;
  Deadline(ctx3);
  resp.Clear();
  ASSERT_TRUE(stub_->ListIncidents(&ctx3, req, &resp).ok());
  EXPECT_EQ(resp.incidents_size(), 0);

  grpc::ClientContext ctx4;
  Deadline(ctx4);
  v1::GetIncidentRequest g;
  g.set_id(1);
  v1::Incident inc;
  ASSERT_TRUE(stub_->GetIncident(&ctx4, g, &inc).ok());
  EXPECT_EQ(inc.kind(), "pause_storm");
  EXPECT_EQ(inc.entity().at("node"), "node-9");

  // New incidents continue after the stored ids.
  Sample(0, 4, 4);
  Sample(1, 1, 4);
  v1::ListIncidentsRequest downs;
  downs.set_kind("link_down");
  v1::ListIncidentsResponse d =
      WaitList(downs, [](const v1::ListIncidentsResponse& r) { return r.incidents_size() == 1; });
  ASSERT_EQ(d.incidents_size(), 1);
  EXPECT_GT(d.incidents(0).id(), 1u);
}

// The Query API is served with the ingest port's TLS: a client needs a certificate from the
// fleet's CA, as an agent does.
TEST(QueryServiceMtlsTest, QueryNeedsAClientCertificate) {
  testing::TempDir dir;
  auto pki = testing::TestPki::Create(dir.path(), "fleet");
  ASSERT_TRUE(pki.ok()) << pki.status();
  auto rogue = testing::TestPki::Create(dir.path(), "rogue");
  ASSERT_TRUE(rogue.ok()) << rogue.status();
  auto server = pki->IssueServer("aggregator");
  ASSERT_TRUE(server.ok()) << server.status();
  AggregatorOptions o;
  o.listen = "127.0.0.1:0";
  o.http_listen = "";
  o.tls = TlsOptions{server->cert, server->key, pki->ca_cert()};
  o.log = [](const std::string&) {};
  InstallQueryApi(o, nullptr);
  auto agg = Aggregator::Start(o);
  ASSERT_TRUE(agg.ok()) << agg.status();
  const std::string target = absl::StrCat("127.0.0.1:", (*agg)->grpc_port());
  const auto status_as = [&](const testing::CertPaths* cert) {
    TlsOptions tls;
    tls.ca_file = pki->ca_cert();
    if (cert != nullptr) {
      tls.cert_file = cert->cert;
      tls.key_file = cert->key;
    }
    auto creds = MakeChannelCredentials(tls, target);
    EXPECT_TRUE(creds.ok()) << creds.status();
    auto stub = v1::Query::NewStub(grpc::CreateChannel(target, *creds));
    grpc::ClientContext ctx;
    Deadline(ctx, absl::Seconds(5));
    v1::ClusterStatus st;
    return stub->GetStatus(&ctx, {}, &st);
  };
  auto cli = pki->IssueClient("oncall");
  ASSERT_TRUE(cli.ok()) << cli.status();
  grpc::Status ok = status_as(&*cli);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_FALSE(status_as(nullptr).ok());
  auto other = rogue->IssueClient("oncall");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(status_as(&*other).ok());
  (*agg)->Shutdown();
}

}  // namespace
}  // namespace ringside::daemon
