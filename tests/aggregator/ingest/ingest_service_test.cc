// The aggregator in-process on 127.0.0.1:0, driven by raw ringside.v1 streams: the handshake and
// version refusals, dedup and acks, undefined ids, limits, journal replay after a restart, a full
// disk, staleness on an injected clock, and rates computed across a gap.
#include "daemon/aggregator/ingest/ingest_service.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "daemon/aggregator/aggregator.h"
#include "daemon/common/protocol.h"
#include "daemon/common/series_set_digest.h"
#include "tests/aggregator/ingest/ingest_test_util.h"
#include "tests/testing/process.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

using ringside::testing::CollectivesMsg;
using ringside::testing::CounterDef;
using ringside::testing::DefsMsg;
using ringside::testing::FakeClock;
using ringside::testing::FaultJournalFileSystem;
using ringside::testing::HelloMsg;
using ringside::testing::LinkEventsMsg;
using ringside::testing::RawAgent;
using ringside::testing::SamplesMsg;
using ringside::testing::TempDir;

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kT0 = 1'700'000'000 * kSecond;

class IngestServiceTest : public ::testing::Test {
 protected:
  AggregatorOptions Options() {
    AggregatorOptions o;
    o.listen = "127.0.0.1:0";
    o.http_listen = "";
    o.log = [this](const std::string& m) {
      absl::MutexLock l(&log_mu_);
      log_.push_back(m);
    };
    o.journal.retry_interval = absl::Milliseconds(20);
    o.housekeeping_interval = absl::Milliseconds(20);
    return o;
  }
  void Start(AggregatorOptions o) {
    auto a = Aggregator::Start(std::move(o));
    ASSERT_TRUE(a.ok()) << a.status();
    agg_ = std::move(*a);
  }
  int port() const { return agg_->grpc_port(); }
  // Hello and wait for the HelloAck; returns its acked_seq.
  uint64_t Hello(RawAgent& agent, const std::string& node, uint64_t epoch,
                 uint64_t resend_from = 0) {
    EXPECT_TRUE(agent.Send(HelloMsg(node, epoch, resend_from)));
    auto m = agent.Read();
    EXPECT_TRUE(m.has_value() && m->has_hello_ack());
    return m.has_value() ? m->hello_ack().acked_seq() : ~0ull;
  }
  uint64_t Counter(const std::atomic<uint64_t>& c) const { return c.load(); }
  template <typename Enum>
  uint64_t Counter(const CounterArray<Enum>& a, Enum e) const {
    return a[static_cast<size_t>(e)].load();
  }
  // Polls `pred` for up to 10 s.
  template <typename Pred>
  bool Eventually(Pred pred) {
    for (int i = 0; i < 1000; ++i) {
      if (pred()) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return pred();
  }
  const analysis::SeriesView* FindSeries(const std::vector<analysis::SeriesView>& views,
                                         uint32_t id) {
    for (const auto& v : views) {
      if (v.def.id == id) return &v;
    }
    return nullptr;
  }

  // Declared before agg_, so they outlive it (the aggregator logs while it shuts down).
  TempDir dir_;
  FaultJournalFileSystem fs_;
  absl::Mutex log_mu_;
  std::vector<std::string> log_;
  std::unique_ptr<Aggregator> agg_;
};

TEST_F(IngestServiceTest, HelloIsAnsweredWithHelloAck) {
  Start(Options());
  RawAgent agent(port());
  ASSERT_TRUE(agent.Send(HelloMsg("gpu-1", 77)));
  auto m = agent.Read();
  ASSERT_TRUE(m.has_value());
  ASSERT_TRUE(m->has_hello_ack());
  EXPECT_EQ(m->hello_ack().protocol_version(), kProtocolVersion);
  EXPECT_EQ(m->hello_ack().acked_seq(), 0u);
  EXPECT_EQ(m->hello_ack().aggregator_version(), "dev");
  std::optional<NodeStatus> node = agg_->core().Node("gpu-1");
  ASSERT_TRUE(node.has_value());
  EXPECT_TRUE(node->session_active);
  EXPECT_EQ(node->current_epoch, 77u);
  EXPECT_TRUE(agent.Finish().ok());
}

TEST_F(IngestServiceTest, FirstMessageMustBeHello) {
  Start(Options());
  RawAgent agent(port());
  ASSERT_TRUE(agent.Send(SamplesMsg(1, kT0, {{1, 5}})));
  grpc::Status s = agent.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "must be a Hello")) << s.error_message();
  EXPECT_EQ(Counter(agg_->stats().refusals, RefusalReason::kNoHello), 1u);
}

TEST_F(IngestServiceTest, AgentTooOldIsRefusedNamingBothRanges) {
  AggregatorOptions o = Options();
  o.min_protocol_version = 2;
  o.max_protocol_version = 3;
  Start(o);
  RawAgent agent(port());
  ASSERT_TRUE(agent.Send(HelloMsg("old", 1, 0, /*version=*/1, /*min=*/1)));
  grpc::Status s = agent.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "versions 1..1")) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "aggregator 2..3")) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "upgrade the agent")) << s.error_message();
  EXPECT_EQ(Counter(agg_->stats().refusals, RefusalReason::kVersion), 1u);
  EXPECT_FALSE(agg_->core().Node("old").has_value());
}

TEST_F(IngestServiceTest, AgentTooNewIsRefusedNamingBothRanges) {
  Start(Options());  // speaks 1..1
  RawAgent agent(port());
  ASSERT_TRUE(agent.Send(HelloMsg("new", 1, 0, /*version=*/5, /*min=*/4)));
  grpc::Status s = agent.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "versions 4..5")) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "aggregator 1..1")) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "upgrade the aggregator"));
}

TEST_F(IngestServiceTest, OverlappingRangesSettleOnTheHighestCommonVersion) {
  AggregatorOptions o = Options();
  o.min_protocol_version = 1;
  o.max_protocol_version = 3;
  Start(o);
  RawAgent agent(port());
  ASSERT_TRUE(agent.Send(HelloMsg("n", 1, 0, /*version=*/2, /*min=*/1)));
  auto m = agent.Read();
  ASSERT_TRUE(m.has_value() && m->has_hello_ack());
  EXPECT_EQ(m->hello_ack().protocol_version(), 2u);
}

TEST_F(IngestServiceTest, MalformedNodeNameIsRefused) {
  Start(Options());
  RawAgent agent(port());
  ASSERT_TRUE(agent.Send(HelloMsg("bad node\n", 1)));
  EXPECT_EQ(agent.AwaitEnd().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  RawAgent empty(port());
  ASSERT_TRUE(empty.Send(HelloMsg("", 1)));
  EXPECT_EQ(empty.AwaitEnd().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(IngestServiceTest, AcksTheHighestSeqAndDropsResentDuplicates) {
  Start(Options());
  {
    RawAgent agent(port());
    EXPECT_EQ(Hello(agent, "gpu-1", 5), 0u);
    ASSERT_TRUE(agent.Send(DefsMsg({CounterDef(1, "port_xmit_data", 64)})));
    ASSERT_TRUE(agent.Send(SamplesMsg(1, kT0, {{1, 100}})));
    ASSERT_TRUE(agent.Send(SamplesMsg(2, kT0 + kSecond, {{1, 300}})));
    ASSERT_TRUE(agent.Send(CollectivesMsg(3, 1, 4)));
    ASSERT_TRUE(agent.Send(LinkEventsMsg(4, 2)));
    ASSERT_TRUE(agent.WaitAck(4));
    EXPECT_EQ(agent.last_ack(), 4u);
    EXPECT_TRUE(agent.Finish().ok());
  }
  // The agent reconnects and resends 2..4 (it did not see the acks), then continues with 5.
  RawAgent agent(port());
  EXPECT_EQ(Hello(agent, "gpu-1", 5), 4u);
  ASSERT_TRUE(agent.Send(DefsMsg({CounterDef(1, "port_xmit_data", 64)})));
  ASSERT_TRUE(agent.Send(SamplesMsg(2, kT0 + kSecond, {{1, 300}})));
  ASSERT_TRUE(agent.Send(CollectivesMsg(3, 1, 4)));
  ASSERT_TRUE(agent.Send(LinkEventsMsg(4, 2)));
  ASSERT_TRUE(agent.Send(CollectivesMsg(5, 5, 1)));
  ASSERT_TRUE(agent.WaitAck(5));
  const IngestStats& st = agg_->stats();
  EXPECT_EQ(Counter(st.duplicates), 3u);
  EXPECT_EQ(Counter(st.collective_records), 5u);
  EXPECT_EQ(Counter(st.link_events), 2u);
  std::vector<ReceivedCollective> window = agg_->core().RecentCollectives("gpu-1");
  ASSERT_EQ(window.size(), 5u);
  for (size_t i = 0; i < window.size(); ++i) EXPECT_EQ(window[i].record.seq(), i + 1);
  EXPECT_EQ(agg_->core().RecentLinkEvents("gpu-1").size(), 2u);
  // The series saw 100 then 300: one step of 200 in 1 s.
  auto series = agg_->core().Series("gpu-1");
  ASSERT_TRUE(series.ok());
  const analysis::SeriesView* v = FindSeries(*series, 1);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->state.total, 200u);
  EXPECT_FLOAT_EQ(v->state.LatestRate(), 200.0f);
}

TEST_F(IngestServiceTest, GapsClosedByResendFromSeqAndBySkippedSeqs) {
  Start(Options());
  RawAgent agent(port());
  // The agent dropped 1..9 from its buffer while disconnected: it holds 10 onward.
  EXPECT_EQ(Hello(agent, "n", 3, /*resend_from=*/10), 9u);
  ASSERT_TRUE(agent.Send(CollectivesMsg(10, 1, 1)));
  // 11 was dropped after it was assigned: the agent goes on with 12.
  ASSERT_TRUE(agent.Send(CollectivesMsg(12, 2, 1)));
  ASSERT_TRUE(agent.WaitAck(12));
  EXPECT_EQ(Counter(agg_->stats().gap_messages), 10u);
  // Empty bodies (tombstones of messages dropped after sending) advance the watermark.
  v1::AgentMessage tombstone;
  tombstone.set_seq(13);
  tombstone.mutable_samples();
  ASSERT_TRUE(agent.Send(tombstone));
  ASSERT_TRUE(agent.WaitAck(13));
}

TEST_F(IngestServiceTest, UndefinedIdsAreCountedAndSkippedNotFatal) {
  Start(Options());
  RawAgent agent(port());
  Hello(agent, "n", 1);
  ASSERT_TRUE(agent.Send(DefsMsg({CounterDef(1, "a", 32)})));
  ASSERT_TRUE(agent.Send(SamplesMsg(1, kT0, {{1, 10}, {99, 5}, {100, 6}})));
  ASSERT_TRUE(agent.Send(SamplesMsg(2, kT0 + kSecond, {{1, 20}})));
  ASSERT_TRUE(agent.WaitAck(2));
  EXPECT_EQ(Counter(agg_->stats().samples_rejected, SampleRejection::kUndefinedId), 2u);
  EXPECT_EQ(Counter(agg_->stats().samples), 2u);
  absl::MutexLock l(&log_mu_);
  bool logged = false;
  for (const std::string& line : log_) logged |= absl::StrContains(line, "undefined series ids");
  EXPECT_TRUE(logged);
}

TEST_F(IngestServiceTest, MismatchedIdsAndValuesIsInvalidArgument) {
  Start(Options());
  RawAgent agent(port());
  Hello(agent, "n", 1);
  v1::AgentMessage m = SamplesMsg(1, kT0, {{1, 10}});
  m.mutable_samples()->add_ids(2);
  ASSERT_TRUE(agent.Send(m));
  grpc::Status s = agent.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "2 ids but 1 values")) << s.error_message();
}

TEST_F(IngestServiceTest, MaxSeriesPerNodeRefusesTheFloodAndSparesOthers) {
  AggregatorOptions o = Options();
  o.limits.max_series_per_node = 3;
  Start(o);
  RawAgent good(port());
  Hello(good, "good", 1);
  ASSERT_TRUE(good.Send(DefsMsg({CounterDef(1, "a", 32)})));
  ASSERT_TRUE(good.Send(SamplesMsg(1, kT0, {{1, 1}})));
  ASSERT_TRUE(good.WaitAck(1));

  RawAgent flood(port());
  Hello(flood, "flood", 1);
  std::vector<v1::SeriesDef> defs;
  for (uint32_t id = 1; id <= 50; ++id)
    defs.push_back(CounterDef(id, "c" + std::to_string(id), 32));
  ASSERT_TRUE(flood.Send(DefsMsg(defs)));
  grpc::Status s = flood.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "--max-series-per-node")) << s.error_message();
  EXPECT_EQ(Counter(agg_->stats().limit_rejections, LimitReason::kMaxSeriesPerNode), 1u);
  EXPECT_EQ(agg_->core().Node("flood")->series, 3u);

  ASSERT_TRUE(good.Send(SamplesMsg(2, kT0 + kSecond, {{1, 2}})));
  ASSERT_TRUE(good.WaitAck(2));
}

TEST_F(IngestServiceTest, MaxDefsPerMessage) {
  AggregatorOptions o = Options();
  o.limits.max_defs_per_message = 2;
  Start(o);
  RawAgent agent(port());
  Hello(agent, "n", 1);
  ASSERT_TRUE(agent.Send(
      DefsMsg({CounterDef(1, "a", 32), CounterDef(2, "b", 32), CounterDef(3, "c", 32)})));
  grpc::Status s = agent.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "--max-defs-per-message"));
  EXPECT_EQ(agg_->core().Node("n")->series, 0u);
}

TEST_F(IngestServiceTest, MaxNodesRefusesNewNodesOnly) {
  AggregatorOptions o = Options();
  o.limits.max_nodes = 2;
  Start(o);
  RawAgent a(port()), b(port()), c(port());
  Hello(a, "a", 1);
  Hello(b, "b", 1);
  ASSERT_TRUE(c.Send(HelloMsg("c", 1)));
  grpc::Status s = c.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "--max-nodes")) << s.error_message();
  EXPECT_EQ(Counter(agg_->stats().limit_rejections, LimitReason::kMaxNodes), 1u);
  ASSERT_TRUE(a.Send(CollectivesMsg(1, 1, 1)));
  ASSERT_TRUE(a.WaitAck(1));
  // A known node may reconnect.
  EXPECT_TRUE(a.Finish().ok());
  RawAgent again(port());
  EXPECT_EQ(Hello(again, "a", 1), 1u);
}

TEST_F(IngestServiceTest, OversizedMessageIsRefusedAndOthersKeepStreaming) {
  AggregatorOptions o = Options();
  o.limits.max_message_bytes = 64 << 10;
  Start(o);
  RawAgent good(port());
  Hello(good, "good", 1);
  RawAgent big(port());
  Hello(big, "big", 1);
  ASSERT_TRUE(big.Send(CollectivesMsg(1, 1, 100, "h", 1000)));  // ~100 KB
  grpc::Status s = big.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_EQ(Counter(agg_->stats().collective_records), 0u);
  ASSERT_TRUE(good.Send(CollectivesMsg(1, 1, 3)));
  ASSERT_TRUE(good.WaitAck(1));
  EXPECT_EQ(Counter(agg_->stats().collective_records), 3u);
}

TEST_F(IngestServiceTest, GarbageBytesEndTheStreamAndOthersKeepStreaming) {
  Start(Options());
  RawAgent good(port());
  Hello(good, "good", 1);
  // Bytes that are no AgentMessage: a truncated length-delimited field.
  grpc::Status s =
      testing::SendRawFrames(port(), {std::string("\x52\xff\xff\xff\x0f garbage", 14)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "does not parse")) << s.error_message();
  // A valid Hello followed by garbage.
  std::string hello;
  ASSERT_TRUE(HelloMsg("hostile", 1).SerializeToString(&hello));
  s = testing::SendRawFrames(port(), {hello, std::string("\xff\xff\xff", 3)});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "message 2 ")) << s.error_message();
  EXPECT_EQ(Counter(agg_->stats().unparsable), 2u);
  ASSERT_TRUE(good.Send(CollectivesMsg(1, 1, 2)));
  ASSERT_TRUE(good.WaitAck(1));
  EXPECT_EQ(Counter(agg_->stats().collective_records), 2u);
}

TEST_F(IngestServiceTest, NewerSessionOfTheSameNodeReplacesTheOlder) {
  Start(Options());
  RawAgent older(port());
  Hello(older, "n", 1);
  RawAgent newer(port());
  Hello(newer, "n", 1);
  grpc::Status s = older.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "replaced by a newer session"));
  ASSERT_TRUE(newer.Send(CollectivesMsg(1, 1, 1)));
  ASSERT_TRUE(newer.WaitAck(1));
  EXPECT_TRUE(Eventually([&] { return Counter(agg_->stats().ends, EndReason::kReplaced) == 1; }));
}

TEST_F(IngestServiceTest, StreamWithoutHelloTimesOut) {
  AggregatorOptions o = Options();
  o.hello_timeout = absl::Milliseconds(200);
  Start(o);
  RawAgent agent(port());
  grpc::Status s = agent.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "no Hello")) << s.error_message();
}

TEST_F(IngestServiceTest, NodeBecomesStaleOnTheInjectedClock) {
  auto clock = std::make_shared<FakeClock>();
  AggregatorOptions o = Options();
  o.now = [clock] { return clock->Now(); };
  o.steady_now = [clock] { return clock->Now(); };
  o.stale_after = absl::Seconds(30);
  Start(o);
  RawAgent agent(port());
  Hello(agent, "n", 1);
  std::optional<NodeStatus> n = agg_->core().Node("n");
  ASSERT_TRUE(n.has_value());
  EXPECT_FALSE(n->stale);
  EXPECT_EQ(n->last_seen, clock->Now());
  clock->Advance(absl::Seconds(29));
  EXPECT_FALSE(agg_->core().Node("n")->stale);
  clock->Advance(absl::Seconds(2));
  EXPECT_TRUE(agg_->core().Node("n")->stale);
  testing::PromText prom = testing::ParsePromText(agg_->MetricsText());
  auto stale = prom.Find("ringside_aggregator_node_stale", {{"node", "n"}});
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale[0].value, 1);
  auto seen = prom.Find("ringside_aggregator_node_last_seen_timestamp_seconds", {{"node", "n"}});
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_DOUBLE_EQ(seen[0].value, 1'800'000'000.0);
  EXPECT_EQ(prom.Find("ringside_aggregator_nodes_stale")[0].value, 1);
  auto logged = [&](absl::string_view what) {
    absl::MutexLock l(&log_mu_);
    int n = 0;
    for (const std::string& line : log_) n += absl::StrContains(line, what) ? 1 : 0;
    return n;
  };
  EXPECT_TRUE(Eventually([&] { return logged("node n is stale") > 0; }));
  // A message makes it fresh again, and housekeeping says so.
  ASSERT_TRUE(agent.Send(CollectivesMsg(1, 1, 1)));
  ASSERT_TRUE(agent.WaitAck(1));
  EXPECT_FALSE(agg_->core().Node("n")->stale);
  EXPECT_TRUE(Eventually([&] { return logged("node n reports again") > 0; }));
  // Each change is logged once, however many housekeeping ticks see it.
  absl::SleepFor(absl::Milliseconds(100));  // five ticks
  EXPECT_EQ(logged("node n is stale"), 1);
  EXPECT_EQ(logged("node n reports again"), 1);
}

// A SampleBatch in the canonical encoding is decoded in place (sample_batch_view.h); any other
// encoding is parsed by protobuf. Both must take it in alike: same states, same counts.
TEST_F(IngestServiceTest, SampleBatchesInPlaceAndParsedAreTakenAlike) {
  Start(Options());
  const v1::AgentMessage defs = DefsMsg({CounterDef(1, "port_xmit_data", 64),
                                         CounterDef(2, "symbol_error", 16),
                                         CounterDef(3, "link_downed", 8)});
  auto frames = [&](const std::string& node, bool canonical) {
    std::vector<std::string> out = {HelloMsg(node, 1).SerializeAsString(),
                                    defs.SerializeAsString()};
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      const v1::AgentMessage m = SamplesMsg(
          seq, kT0 + static_cast<int64_t>(seq) * 1'000'000'000,
          {{1, 1'000'000'000'000 * seq}, {2, seq == 3 ? 4 : 65'525 + 5 * seq}, {3, 250 + seq}, {99, 1}});
      std::string bytes = m.SerializeAsString();
      if (!canonical) {
        // An unknown field inside the batch: valid, kept by protobuf, declined by the reader.
        const std::string batch = m.samples().SerializeAsString() + std::string("\x48\x01", 2);
        bytes = std::string("\x08", 1) + static_cast<char>(seq) + "\x62" +
                static_cast<char>(batch.size()) + batch;
        v1::AgentMessage check;
        EXPECT_TRUE(check.ParseFromString(bytes));
      }
      out.push_back(bytes);
    }
    return out;
  };
  testing::SendRawFrames(port(), frames("wire", true), absl::Seconds(1));
  testing::SendRawFrames(port(), frames("parsed", false), absl::Seconds(1));
  absl::StatusOr<std::vector<analysis::SeriesView>> a = agg_->core().Series("wire");
  absl::StatusOr<std::vector<analysis::SeriesView>> b = agg_->core().Series("parsed");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 3u);
  ASSERT_EQ(b->size(), 3u);
  for (size_t i = 0; i < a->size(); ++i) {
    const analysis::SeriesState& x = (*a)[i].state;
    const analysis::SeriesState& y = (*b)[i].state;
    EXPECT_EQ(x.last_raw, y.last_raw) << i;
    EXPECT_EQ(x.last_time_ns, y.last_time_ns) << i;
    EXPECT_EQ(x.total, y.total) << i;
    EXPECT_EQ(x.last_step, y.last_step) << i;
    EXPECT_EQ(x.steps, y.steps) << i;
  }
  EXPECT_EQ((*a)[0].state.last_raw, 3'000'000'000'000u);
  EXPECT_EQ((*a)[1].state.last_step, analysis::StepKind::kWrap);  // 65,535 then 4 on 16 bits
  // Three batches of four samples each per node, the undefined id 99 refused in each.
  EXPECT_EQ(Counter(agg_->stats().samples), 2u * 3 * 3);
  EXPECT_EQ(Counter(agg_->stats().samples_rejected, SampleRejection::kUndefinedId), 2u * 3);
  EXPECT_EQ(Counter(agg_->stats().messages, MessageType::kSamples), 2u * 3);
}

// Definitions by reference (docs/agent-upload.md): the first node sends its set with its digest, the
// aggregator checks and keeps it; a later node whose Hello names it gets defs_known and sends no
// definition, and its samples are taken in as if it had. A set whose digest does not match is
// not kept, and a set sent in another encoding (protobuf's path) is kept alike.
TEST_F(IngestServiceTest, DefinitionsByReference) {
  Start(Options());
  const std::vector<v1::SeriesDef> set = {CounterDef(1, "port_xmit_data", 64),
                                          CounterDef(2, "symbol_error", 16),
                                          CounterDef(3, "link_downed", 8)};
  auto digest_of = [](const std::vector<v1::SeriesDef>& defs) {
    SeriesSetDigest d;
    for (const v1::SeriesDef& def : defs) d.Add(def);
    return d.Finish();
  };
  const std::string digest = digest_of(set);
  auto hello = [&](RawAgent& agent, const std::string& node, const std::string& d) {
    v1::AgentMessage h = HelloMsg(node, 1);
    h.mutable_hello()->set_defs_digest(d);
    EXPECT_TRUE(agent.Send(h));
    std::optional<v1::AggregatorMessage> m = agent.Read();
    EXPECT_TRUE(m.has_value() && m->has_hello_ack());
    return m.has_value() && m->hello_ack().defs_known();
  };
  auto batch = [](uint64_t seq) {
    return SamplesMsg(seq, kT0 + static_cast<int64_t>(seq) * 1'000'000'000,
                      {{1, 1000 * seq}, {2, 7 * seq}, {3, seq}});
  };

  // The first node: not known; it sends the set, saying it is complete.
  RawAgent first(port());
  EXPECT_FALSE(hello(first, "first", digest));
  v1::AgentMessage defs = DefsMsg(set);
  defs.mutable_series_defs()->set_complete_digest(digest);
  ASSERT_TRUE(first.Send(defs));
  ASSERT_TRUE(first.Send(batch(1)));
  ASSERT_TRUE(first.WaitAck(1));
  EXPECT_EQ(Counter(agg_->stats().definition_sets_learned), 1u);
  EXPECT_EQ(agg_->stats().definition_sets.load(), 1);

  // The second: known, no definitions sent; its series are the first's.
  RawAgent second(port());
  EXPECT_TRUE(hello(second, "second", digest));
  ASSERT_TRUE(second.Send(batch(1)));
  ASSERT_TRUE(second.Send(batch(2)));
  ASSERT_TRUE(second.WaitAck(2));
  EXPECT_EQ(Counter(agg_->stats().defs_by_reference), 1u);
  absl::StatusOr<std::vector<analysis::SeriesView>> a = agg_->core().Series("first");
  absl::StatusOr<std::vector<analysis::SeriesView>> b = agg_->core().Series("second");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(b->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*b)[i].def.id, (*a)[i].def.id);
    EXPECT_EQ((*b)[i].def.counter, (*a)[i].def.counter);
    EXPECT_EQ((*b)[i].def.width, (*a)[i].def.width);
  }
  EXPECT_EQ((*b)[0].state.last_raw, 2000u);
  EXPECT_EQ((*b)[1].state.total, 7u);  // 7 -> 14 on the second's series
  EXPECT_EQ(Counter(agg_->stats().samples_rejected, SampleRejection::kUndefinedId), 0u);

  // A digest that does not name what was sent: not kept, and a Hello naming it is not known.
  const std::vector<v1::SeriesDef> other = {CounterDef(1, "port_rcv_data", 64)};
  const std::string wrong = digest_of({CounterDef(1, "port_rcv_errors", 64)});
  RawAgent liar(port());
  EXPECT_FALSE(hello(liar, "liar", wrong));
  v1::AgentMessage lie = DefsMsg(other);
  lie.mutable_series_defs()->set_complete_digest(wrong);
  ASSERT_TRUE(liar.Send(lie));
  ASSERT_TRUE(liar.Send(SamplesMsg(1, kT0, {{1, 5}})));
  ASSERT_TRUE(liar.WaitAck(1));
  EXPECT_EQ(Counter(agg_->stats().definition_sets_refused), 1u);
  RawAgent fooled(port());
  EXPECT_FALSE(hello(fooled, "fooled", wrong));

  // The other set with its true digest, in an encoding the in-place reader declines (an unknown
  // field): protobuf's path keeps it too.
  RawAgent odd(port());
  EXPECT_FALSE(hello(odd, "odd", digest_of(other)));
  v1::AgentMessage odd_defs = DefsMsg(other);
  odd_defs.mutable_series_defs()->set_complete_digest(digest_of(other));
  odd_defs.mutable_series_defs()->GetReflection()->MutableUnknownFields(
      odd_defs.mutable_series_defs())->AddVarint(15, 1);
  ASSERT_TRUE(odd.Send(odd_defs));
  ASSERT_TRUE(odd.Send(SamplesMsg(1, kT0, {{1, 5}})));
  ASSERT_TRUE(odd.WaitAck(1));
  EXPECT_EQ(Counter(agg_->stats().definition_sets_learned), 2u);
  RawAgent last(port());
  EXPECT_TRUE(hello(last, "last", digest_of(other)));
  EXPECT_EQ(Counter(agg_->stats().defs_by_reference), 2u);
  for (RawAgent* agent : {&first, &second, &liar, &fooled, &odd, &last}) {
    EXPECT_TRUE(agent->Finish().ok());
  }
}

// Hello expiry visits only the streams still opening: one that said Hello outlives the timeout,
// one that said nothing beside it is ended.
TEST_F(IngestServiceTest, HelloTimeoutSparesStreamsThatSaidHello) {
  AggregatorOptions o = Options();
  o.hello_timeout = absl::Milliseconds(200);
  Start(o);
  RawAgent talker(port());
  Hello(talker, "n", 1);
  RawAgent silent(port());
  grpc::Status s = silent.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(talker.Send(CollectivesMsg(1, 1, 1)));
  EXPECT_TRUE(talker.WaitAck(1));
  EXPECT_EQ(agg_->service().open_sessions(), 1u);
}

// Staleness is an interval: a step of the wall clock (NTP) neither marks a node stale (forward)
// nor keeps a silent one fresh (back); last_seen stays wall-clock.
TEST_F(IngestServiceTest, StalenessIgnoresWallClockSteps) {
  auto wall = std::make_shared<FakeClock>();
  auto steady = std::make_shared<FakeClock>();
  AggregatorOptions o = Options();
  o.now = [wall] { return wall->Now(); };
  o.steady_now = [steady] { return steady->Now(); };
  o.stale_after = absl::Seconds(30);
  Start(o);
  RawAgent agent(port());
  Hello(agent, "n", 1);
  const absl::Time hello_at = wall->Now();
  wall->Advance(absl::Minutes(7));  // a step forward
  steady->Advance(absl::Seconds(1));
  EXPECT_FALSE(agg_->core().Node("n")->stale);
  EXPECT_EQ(agg_->core().Totals().stale_nodes, 0u);
  EXPECT_EQ(agg_->core().Node("n")->last_seen, hello_at);
  wall->Advance(absl::Minutes(-17));  // a step back, 10 minutes behind the Hello
  steady->Advance(absl::Seconds(30));
  EXPECT_TRUE(agg_->core().Node("n")->stale);
  EXPECT_EQ(agg_->core().Totals().stale_nodes, 1u);
  ASSERT_TRUE(agent.Send(CollectivesMsg(1, 1, 1)));
  ASSERT_TRUE(agent.WaitAck(1));
  EXPECT_FALSE(agg_->core().Node("n")->stale);
  EXPECT_EQ(agg_->core().Node("n")->last_seen, wall->Now());
}

// With shards, a node sends its counters to its own shard and a job's collective records to the
// job's: there its Hello offers only collectives, and its silence between jobs is not staleness.
TEST_F(IngestServiceTest, ACollectivesOnlyNodeIsNeverStale) {
  auto clock = std::make_shared<FakeClock>();
  AggregatorOptions o = Options();
  o.now = [clock] { return clock->Now(); };
  o.steady_now = [clock] { return clock->Now(); };
  o.stale_after = absl::Seconds(30);
  Start(o);
  RawAgent agent(port());
  v1::AgentMessage hello = HelloMsg("elsewhere", 1);
  hello.mutable_hello()->add_capabilities("collectives");
  ASSERT_TRUE(agent.Send(hello));
  ASSERT_TRUE(agent.Read().has_value());
  ASSERT_TRUE(agent.Send(CollectivesMsg(1, 1, 1)));
  ASSERT_TRUE(agent.WaitAck(1));
  clock->Advance(absl::Minutes(10));
  std::optional<NodeStatus> n = agg_->core().Node("elsewhere");
  ASSERT_TRUE(n.has_value());
  EXPECT_TRUE(n->collectives_only);
  EXPECT_FALSE(n->stale);
  EXPECT_EQ(agg_->core().Totals().stale_nodes, 0u);
  // An agent that offers samples (every agent before shards, and the node's own shard) is judged.
  RawAgent counters(port());
  v1::AgentMessage full = HelloMsg("here", 1);
  for (const char* c : {"samples", "collectives", "link_events"}) full.mutable_hello()->add_capabilities(c);
  ASSERT_TRUE(counters.Send(full));
  ASSERT_TRUE(counters.Read().has_value());
  clock->Advance(absl::Minutes(1));
  EXPECT_FALSE(agg_->core().Node("here")->collectives_only);
  EXPECT_TRUE(agg_->core().Node("here")->stale);
  EXPECT_EQ(agg_->core().Totals().stale_nodes, 1u);
}

// Issue #25: a replica started without --peers warns, once, when an agent says it streams to
// several replicas of the shard (restarted with an empty state dir, it would page again).
TEST_F(IngestServiceTest, AReplicaWithoutPeersWarnsWhenAgentsStreamToSeveralReplicas) {
  auto warnings = [this] {
    absl::MutexLock l(&log_mu_);
    int n = 0;
    for (const std::string& m : log_) n += absl::StrContains(m, "without --peers") ? 1 : 0;
    return n;
  };
  auto hello = [](const std::string& node, const char* replicas) {
    v1::AgentMessage m = HelloMsg(node, 1);
    for (const char* c : {"samples", "collectives", "link_events"}) {
      m.mutable_hello()->add_capabilities(c);
    }
    if (replicas != nullptr) m.mutable_hello()->add_capabilities(replicas);
    return m;
  };
  AggregatorOptions o = Options();
  o.warn_replicas_without_peers = true;  // main.cc: no --peers
  Start(o);
  RawAgent lone(port());  // streams to this aggregator only
  ASSERT_TRUE(lone.Send(hello("lone", nullptr)));
  ASSERT_TRUE(lone.Read().has_value());
  EXPECT_EQ(warnings(), 0);
  RawAgent a(port()), b(port());
  ASSERT_TRUE(a.Send(hello("node-1", "replicas=2")));
  ASSERT_TRUE(a.Read().has_value());
  ASSERT_TRUE(b.Send(hello("node-2", "replicas=2")));
  ASSERT_TRUE(b.Read().has_value());
  EXPECT_EQ(warnings(), 1);
  {
    absl::MutexLock l(&log_mu_);
    bool named = false;
    for (const std::string& m : log_) {
      named = named || (absl::StrContains(m, "node-1 streams its counters to 2 aggregators") &&
                        absl::StrContains(m, "--peers="));
    }
    EXPECT_TRUE(named);
  }
}

// With --peers, nothing to say.
TEST_F(IngestServiceTest, AReplicaWithPeersDoesNotWarn) {
  Start(Options());
  RawAgent a(port());
  v1::AgentMessage m = HelloMsg("node-1", 1);
  m.mutable_hello()->add_capabilities("samples");
  m.mutable_hello()->add_capabilities("replicas=2");
  ASSERT_TRUE(a.Send(m));
  ASSERT_TRUE(a.Read().has_value());
  absl::MutexLock l(&log_mu_);
  for (const std::string& line : log_) EXPECT_FALSE(absl::StrContains(line, "--peers")) << line;
}

TEST_F(IngestServiceTest, RatesAcrossAGapEqualTheCounterDifference) {
  Start(Options());
  RawAgent agent(port());
  Hello(agent, "n", 1);
  ASSERT_TRUE(agent.Send(DefsMsg({CounterDef(1, "wrapping16", 16), CounterDef(2, "reloaded", 32),
                                  CounterDef(3, "symbol_error", 16, /*saturates=*/true)})));
  // A 16-bit counter advancing 12000/s that wraps once; batches 4..8 never arrive (the agent
  // dropped them), so the last step spans 3 s (within one wrap, as the width requires).
  uint64_t real = 50000;
  ASSERT_TRUE(agent.Send(SamplesMsg(1, kT0, {{1, real % 65536}, {2, 1'200'000}, {3, 65000}})));
  real += 12000;
  ASSERT_TRUE(agent.Send(SamplesMsg(2, kT0 + kSecond, {{1, real % 65536}, {2, 17}, {3, 65535}})));
  real += 12000;
  ASSERT_TRUE(agent.Send(SamplesMsg(3, kT0 + 2 * kSecond, {{1, real % 65536}, {2, 40}})));
  real += 39000;
  ASSERT_TRUE(agent.Send(SamplesMsg(9, kT0 + 5 * kSecond, {{1, real % 65536}, {2, 100}})));
  ASSERT_TRUE(agent.WaitAck(9));
  auto series = agg_->core().Series("n");
  ASSERT_TRUE(series.ok());
  const analysis::SeriesView* w = FindSeries(*series, 1);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->state.total, real - 50000);  // 12000 + 12000 (a wrap) + 39000
  // The window keeps rates as bfloat16 (analysis/bfloat16.h): 13000 is stored as 12992.
  EXPECT_NEAR(w->state.LatestRate(), 13000.0f, 13000.0f / 256);
  const analysis::SeriesView* r = FindSeries(*series, 2);
  EXPECT_EQ(r->state.last_step, analysis::StepKind::kNormal);
  EXPECT_EQ(r->state.total, 17u + 23u + 60u);  // the reset counts from zero
  const analysis::SeriesView* sat = FindSeries(*series, 3);
  EXPECT_EQ(sat->state.last_step, analysis::StepKind::kSaturated);
  EXPECT_EQ(Counter(agg_->stats().steps[static_cast<size_t>(analysis::StepKind::kReset)]), 1u);
  EXPECT_EQ(Counter(agg_->stats().steps[static_cast<size_t>(analysis::StepKind::kWrap)]), 1u);
  EXPECT_EQ(Counter(agg_->stats().gap_messages), 5u);
}

TEST_F(IngestServiceTest, JournalReplayAfterRestartKeepsEveryPayloadOnce) {
  AggregatorOptions o = Options();
  o.state_dir = dir_.path() + "/state";
  Start(o);
  {
    RawAgent agent(port());
    Hello(agent, "gpu-1", 42);
    for (uint64_t seq = 1; seq <= 4; ++seq) {
      ASSERT_TRUE(agent.Send(CollectivesMsg(seq, seq * 10, 2)));
    }
    ASSERT_TRUE(agent.Send(LinkEventsMsg(5, 3)));
    ASSERT_TRUE(agent.Send(SamplesMsg(6, kT0, {})));
    ASSERT_TRUE(agent.WaitAck(6));
  }
  agg_->Shutdown();
  agg_.reset();

  Start(o);  // a new aggregator on the same state dir
  EXPECT_EQ(agg_->core().RecentCollectives("gpu-1").size(), 8u);  // windows rebuilt
  RawAgent agent(port());
  // The clean shutdown's checkpoint restores the exact watermark, samples included.
  EXPECT_EQ(Hello(agent, "gpu-1", 42), 6u);
  // The agent resends from 3 (it missed the acks) and goes on.
  for (uint64_t seq = 3; seq <= 4; ++seq) ASSERT_TRUE(agent.Send(CollectivesMsg(seq, seq * 10, 2)));
  ASSERT_TRUE(agent.Send(LinkEventsMsg(5, 3)));
  ASSERT_TRUE(agent.Send(SamplesMsg(6, kT0, {})));
  ASSERT_TRUE(agent.Send(CollectivesMsg(7, 70, 2)));
  ASSERT_TRUE(agent.WaitAck(7));
  EXPECT_EQ(Counter(agg_->stats().duplicates), 4u);
  agg_->Shutdown();

  std::multiset<uint64_t> coll_seqs;
  size_t link_events = 0;
  ASSERT_TRUE(ReadJournal(o.state_dir + "/journal", nullptr, [&](const JournalEntry& e) {
                for (const auto& r : e.message.collectives().records()) coll_seqs.insert(r.seq());
                link_events += e.message.link_events().events_size();
              }).ok());
  EXPECT_EQ(coll_seqs, (std::multiset<uint64_t>{10, 11, 20, 21, 30, 31, 40, 41, 70, 71}));
  EXPECT_EQ(link_events, 3u);
}

TEST_F(IngestServiceTest, CrashRestoresWatermarksFromDurablePayloads) {
  AggregatorOptions o = Options();
  o.state_dir = dir_.path() + "/state";
  Start(o);
  RawAgent agent(port());
  Hello(agent, "n", 9);
  ASSERT_TRUE(agent.Send(CollectivesMsg(1, 1, 1)));
  ASSERT_TRUE(agent.Send(CollectivesMsg(2, 2, 1)));
  ASSERT_TRUE(agent.WaitAck(2));
  // What a kill -9 right now leaves: the files as they are (acked means fsynced), no final
  // checkpoint. Copy them while the aggregator still runs.
  const std::string crashed = dir_.path() + "/crashed";
  std::filesystem::create_directories(crashed + "/journal");
  for (const auto& f : std::filesystem::directory_iterator(o.state_dir + "/journal")) {
    if (f.path().filename() != "LOCK") {
      std::filesystem::copy_file(f.path(), crashed + "/journal/" + f.path().filename().string());
    }
  }
  agg_.reset();
  o.state_dir = crashed;
  Start(o);
  RawAgent again(port());
  EXPECT_EQ(Hello(again, "n", 9), 2u);
  ASSERT_TRUE(again.Send(CollectivesMsg(2, 2, 1)));  // resent: a duplicate
  ASSERT_TRUE(again.Send(CollectivesMsg(3, 3, 1)));
  ASSERT_TRUE(again.WaitAck(3));
  agg_->Shutdown();
  std::vector<uint64_t> seqs;
  ASSERT_TRUE(ReadJournal(crashed + "/journal", nullptr, [&](const JournalEntry& e) {
                seqs.push_back(e.seq);
              }).ok());
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 3}));
}

TEST_F(IngestServiceTest, FullDiskStopsAcksUntilTheJournalWritesAgain) {
  FaultJournalFileSystem& fs = fs_;
  AggregatorOptions o = Options();
  o.state_dir = dir_.path() + "/state";
  o.journal.fs = &fs;
  Start(o);
  RawAgent agent(port());
  Hello(agent, "n", 1);
  ASSERT_TRUE(agent.Send(CollectivesMsg(1, 1, 1)));
  ASSERT_TRUE(agent.WaitAck(1));
  fs.FailWrites(absl::ResourceExhaustedError("write: No space left on device"));
  ASSERT_TRUE(agent.Send(CollectivesMsg(2, 2, 1)));
  ASSERT_TRUE(agent.Send(SamplesMsg(3, kT0, {})));
  ASSERT_TRUE(Eventually([&] { return fs.failed_writes() >= 2; }));
  // Nothing past 1 is acknowledged while the payload at 2 is not durable.
  EXPECT_EQ(agg_->core().Node("n")->epochs[0].acked_seq, 1u);
  EXPECT_EQ(agg_->core().Node("n")->epochs[0].received_seq, 3u);
  testing::PromText prom = testing::ParsePromText(agg_->MetricsText());
  EXPECT_EQ(prom.Find("ringside_aggregator_journal_healthy")[0].value, 0);
  EXPECT_GE(prom.Find("ringside_aggregator_journal_write_errors_total")[0].value, 1);
  fs.Heal();
  ASSERT_TRUE(agent.WaitAck(3));
  EXPECT_EQ(agent.last_ack(), 3u);
  agg_->Shutdown();
  std::vector<uint64_t> seqs;
  ASSERT_TRUE(ReadJournal(o.state_dir + "/journal", nullptr, [&](const JournalEntry& e) {
                seqs.push_back(e.seq);
              }).ok());
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2}));
}

TEST_F(IngestServiceTest, JournalBacklogFullRefusesPayloadsWithUnavailable) {
  FaultJournalFileSystem& fs = fs_;
  AggregatorOptions o = Options();
  o.state_dir = dir_.path() + "/state";
  o.journal.fs = &fs;
  o.journal.max_pending_bytes = 2048;
  Start(o);
  fs.FailWrites(absl::ResourceExhaustedError("No space left on device"));
  RawAgent agent(port());
  Hello(agent, "n", 1);
  for (uint64_t seq = 1; seq <= 20; ++seq) {
    if (!agent.Send(CollectivesMsg(seq, seq, 1, "h", 500))) break;
  }
  grpc::Status s = agent.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "journal backlog full")) << s.error_message();
  EXPECT_EQ(agent.last_ack(), 0u);
  EXPECT_EQ(Counter(agg_->stats().limit_rejections, LimitReason::kJournalBacklog), 1u);
  // After the disk recovers the agent reconnects and resends: all arrive, once.
  fs.Heal();
  RawAgent again(port());
  const uint64_t from = Hello(again, "n", 1);
  EXPECT_LE(from, 3u);  // what was queued before the refusal (durable now or soon)
  for (uint64_t seq = from + 1; seq <= 20; ++seq) {  // one at a time: the backlog is tiny
    ASSERT_TRUE(again.Send(CollectivesMsg(seq, seq, 1, "h", 500)));
    ASSERT_TRUE(again.WaitAck(seq)) << "seq " << seq << ", acked " << again.last_ack();
  }
  agg_->Shutdown();
  std::vector<uint64_t> seqs;
  ASSERT_TRUE(ReadJournal(o.state_dir + "/journal", nullptr, [&](const JournalEntry& e) {
                seqs.push_back(e.seq);
              }).ok());
  ASSERT_EQ(seqs.size(), 20u);
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i + 1);
}

TEST_F(IngestServiceTest, HttpServesHealthMetricsAndSeriesJson) {
  AggregatorOptions o = Options();
  o.http_listen = "127.0.0.1:0";
  Start(o);
  ASSERT_GT(agg_->http_port(), 0);
  RawAgent agent(port());
  Hello(agent, "gpu-7", 1);
  ASSERT_TRUE(agent.Send(DefsMsg({CounterDef(1, "port_rcv_data", 32)})));
  ASSERT_TRUE(agent.Send(SamplesMsg(1, kT0, {{1, 4294967000u}})));
  ASSERT_TRUE(agent.Send(SamplesMsg(2, kT0 + 2 * kSecond, {{1, 704}})));
  ASSERT_TRUE(agent.WaitAck(2));
  int status = 0;
  EXPECT_EQ(testing::HttpGet(agg_->http_port(), "/healthz", &status), "ok\n");
  EXPECT_EQ(status, 200);
  std::string series = testing::HttpGet(agg_->http_port(), "/api/v1/series?node=gpu-7", &status);
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(absl::StrContains(series, "\"counter\":\"port_rcv_data\"")) << series;
  EXPECT_TRUE(absl::StrContains(series, "\"last_raw\":704")) << series;
  EXPECT_TRUE(absl::StrContains(series, "\"last_step\":\"wrap\"")) << series;
  EXPECT_TRUE(absl::StrContains(series, "\"total\":1000")) << series;
  EXPECT_TRUE(absl::StrContains(series, "\"first_raw\":4294967000")) << series;
  EXPECT_TRUE(absl::StrContains(series, "\"rates\":[500]")) << series;
  testing::HttpGet(agg_->http_port(), "/api/v1/series?node=nope", &status);
  EXPECT_EQ(status, 404);
  std::string nodes = testing::HttpGet(agg_->http_port(), "/api/v1/nodes", &status);
  EXPECT_TRUE(absl::StrContains(nodes, "\"acked_seq\":2")) << nodes;
  testing::PromText prom =
      testing::ParsePromText(testing::HttpGet(agg_->http_port(), "/metrics", &status));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(prom.Find("ringside_aggregator_samples_received_total")[0].value, 2);
  EXPECT_EQ(prom.Find("ringside_aggregator_node_series", {{"node", "gpu-7"}})[0].value, 1);
  EXPECT_EQ(prom.Find("ringside_aggregator_sessions_active")[0].value, 1);
}

// Records what the analysis host would see.
class RecordingObserver final : public IngestObserver {
 public:
  struct Sample {
    std::string node, counter;
    analysis::StepKind kind;
    uint64_t delta;
    int64_t interval_ns;
  };
  void OnSamples(absl::string_view node,
                 absl::Span<const analysis::ObservedSample> samples) override {
    absl::MutexLock l(&mu);
    for (const auto& s : samples) {
      this->samples.push_back(Sample{std::string(node), std::string(s.counter), s.step.kind,
                                     s.step.delta, s.time_ns - s.prev_time_ns});
    }
  }
  void OnCollectives(absl::string_view node, uint64_t, uint64_t, absl::Time,
                     const v1::CollectiveBatch& batch) override {
    absl::MutexLock l(&mu);
    collectives += batch.records_size();
  }
  void OnLinkEvents(absl::string_view node, uint64_t, uint64_t, absl::Time,
                    const v1::LinkEvents& events) override {
    absl::MutexLock l(&mu);
    link_events += events.events_size();
  }
  void OnInfo(absl::string_view node, const v1::SeriesDefs& defs) override {
    absl::MutexLock l(&mu);
    for (const v1::InfoRecord& r : defs.info()) {
      info.push_back(absl::StrCat(
          node, " ", r.source(), "/", r.device(),
          " rdma_device=", r.labels().count("rdma_device") ? r.labels().at("rdma_device") : "-"));
    }
    ++info_sets;
  }
  absl::Mutex mu;
  std::vector<Sample> samples;
  int collectives = 0;
  int link_events = 0;
  int info_sets = 0;
  std::vector<std::string> info;
};

TEST_F(IngestServiceTest, ObserverSeesEachAcceptedSampleAndPayloadOnce) {
  RecordingObserver observer;
  AggregatorOptions o = Options();
  o.observer = &observer;
  Start(o);
  RawAgent agent(port());
  Hello(agent, "n", 1);
  ASSERT_TRUE(agent.Send(DefsMsg({CounterDef(1, "link_downed", 8)})));
  ASSERT_TRUE(agent.Send(SamplesMsg(1, kT0, {{1, 250}, {7, 1}})));
  ASSERT_TRUE(agent.Send(SamplesMsg(2, kT0 + 2 * kSecond, {{1, 4}})));
  ASSERT_TRUE(agent.Send(CollectivesMsg(3, 1, 5)));
  ASSERT_TRUE(agent.Send(LinkEventsMsg(4, 2)));
  ASSERT_TRUE(agent.Send(CollectivesMsg(3, 1, 5)));  // a duplicate: not seen again
  ASSERT_TRUE(agent.WaitAck(4));
  agg_->Shutdown();
  absl::MutexLock l(&observer.mu);
  ASSERT_EQ(observer.samples.size(), 2u);  // the undefined id 7 is left out
  EXPECT_EQ(observer.samples[0].kind, analysis::StepKind::kBaseline);
  EXPECT_EQ(observer.samples[1].node, "n");
  EXPECT_EQ(observer.samples[1].counter, "link_downed");
  EXPECT_EQ(observer.samples[1].kind, analysis::StepKind::kWrap);
  EXPECT_EQ(observer.samples[1].delta, 10u);
  EXPECT_EQ(observer.samples[1].interval_ns, 2 * kSecond);
  EXPECT_EQ(observer.collectives, 5);
  EXPECT_EQ(observer.link_events, 2);
}

// An agent that reconnects (the same epoch) sends its definitions again: every series keeps its
// state, nothing is counted as defined again, and the next samples continue the rates.
TEST_F(IngestServiceTest, ReconnectWithIdenticalDefinitionsKeepsEverySeriesState) {
  Start(Options());
  std::vector<v1::SeriesDef> defs;
  for (uint32_t id = 0; id < 200; ++id) defs.push_back(CounterDef(id, absl::StrCat("c", id), 32));
  auto values = [](uint64_t base) {
    std::vector<std::pair<uint32_t, uint64_t>> v;
    for (uint32_t id = 0; id < 200; ++id) v.emplace_back(id, base + id);
    return v;
  };
  {
    RawAgent agent(port());
    Hello(agent, "n", 1);
    ASSERT_TRUE(agent.Send(DefsMsg(defs)));
    ASSERT_TRUE(agent.Send(SamplesMsg(1, kT0, values(1000))));
    ASSERT_TRUE(agent.Send(SamplesMsg(2, kT0 + kSecond, values(1100))));
    ASSERT_TRUE(agent.WaitAck(2));
  }
  EXPECT_EQ(Counter(agg_->stats().series_defined), 200u);
  RawAgent again(port());
  EXPECT_EQ(Hello(again, "n", 1), 2u);
  ASSERT_TRUE(again.Send(DefsMsg(defs)));
  ASSERT_TRUE(again.Send(SamplesMsg(3, kT0 + 3 * kSecond, values(1300))));
  ASSERT_TRUE(again.WaitAck(3));
  EXPECT_EQ(Counter(agg_->stats().series_defined), 200u);
  EXPECT_EQ(Counter(agg_->stats().series_redefined), 0u);
  auto series = agg_->core().Series("n");
  ASSERT_TRUE(series.ok());
  ASSERT_EQ(series->size(), 200u);
  for (uint32_t id : {0u, 77u, 199u}) {
    const analysis::SeriesView* v = FindSeries(*series, id);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->state.total, 300u) << id;  // 1000 + id .. 1300 + id, across the reconnect
    EXPECT_EQ(v->first_raw, 1000u + id);
    EXPECT_EQ(v->state.steps, 2) << id;
    EXPECT_NEAR(v->state.LatestRate(), 100.0f, 1.0f);  // 200 over the 2 s since the last sample
  }
}

// Definitions come off the wire without the protobuf message; what is refused stays refused, with
// the definitions before it taken in, as before.
TEST_F(IngestServiceTest, DefinitionsWithLongNamesOrUnknownKindsAreRefusedAsBefore) {
  Start(Options());
  RawAgent agent(port());
  Hello(agent, "n", 1);
  ASSERT_TRUE(agent.Send(DefsMsg({CounterDef(1, "ok", 32), CounterDef(2, std::string(300, 'x'), 32),
                                  CounterDef(3, "after", 32)})));
  grpc::Status s = agent.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "series 2: a name of 300 bytes exceeds 256");
  EXPECT_EQ(agg_->core().Node("n")->series, 1u);

  RawAgent kind(port());
  Hello(kind, "k", 1);
  v1::SeriesDef odd = CounterDef(2, "odd", 32);
  odd.set_kind(static_cast<v1::SeriesKind>(9));
  ASSERT_TRUE(kind.Send(DefsMsg({CounterDef(1, "ok", 32), odd})));
  s = kind.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "series 2: unknown kind 9");
  EXPECT_EQ(agg_->core().Node("k")->series, 1u);

  RawAgent sequenced(port());
  Hello(sequenced, "q", 1);
  v1::AgentMessage m = DefsMsg({CounterDef(1, "ok", 32)});
  m.set_seq(4);
  ASSERT_TRUE(sequenced.Send(m));
  s = sequenced.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "Hello and SeriesDefs carry seq 0"))
      << s.error_message();
}

TEST_F(IngestServiceTest, ObserverGetsTheInfoRecordsOnlyWhenTheyAreTheCompleteSet) {
  RecordingObserver observer;
  AggregatorOptions o = Options();
  o.observer = &observer;
  Start(o);
  RawAgent agent(port());
  Hello(agent, "n", 1);
  v1::AgentMessage m = DefsMsg({CounterDef(1, "link_downed", 8)});
  v1::InfoRecord* r = m.mutable_series_defs()->add_info();
  r->set_source("netdev");
  r->set_device("eth0");
  (*r->mutable_labels())["rdma_device"] = "mlx5_0";
  ASSERT_TRUE(agent.Send(m));  // no has_info: not the complete set
  m.mutable_series_defs()->set_has_info(true);
  ASSERT_TRUE(agent.Send(m));
  ASSERT_TRUE(agent.Send(SamplesMsg(1, kT0, {{1, 1}})));
  ASSERT_TRUE(agent.WaitAck(1));
  agg_->Shutdown();
  absl::MutexLock l(&observer.mu);
  EXPECT_EQ(observer.info_sets, 1);
  EXPECT_EQ(observer.info, std::vector<std::string>{"n netdev/eth0 rdma_device=mlx5_0"});
  EXPECT_EQ(observer.samples.size(), 1u);
}

// Holds every OnInfo until released: a stand-in for admissions slower than the machine can keep
// up with (a cluster reconnecting).
class BlockingInfoObserver final : public IngestObserver {
 public:
  void OnInfo(absl::string_view, const v1::SeriesDefs&) override {
    absl::MutexLock l(&mu);
    ++entered;
    mu.Await(absl::Condition(&released));
  }
  absl::Mutex mu;
  int entered ABSL_GUARDED_BY(mu) = 0;
  bool released ABSL_GUARDED_BY(mu) = false;
};

// Definitions are admitted off gRPC's callback threads, which read every socket: admissions held
// up hold neither other streams' batches and acks nor new streams' Hellos (nor, in production, the
// agents' keepalive pings: issue #26's 2,717 streams ended by "keepalive watchdog timeout").
TEST_F(IngestServiceTest, SlowAdmissionsHoldNoOtherStream) {
  BlockingInfoObserver observer;
  AggregatorOptions o = Options();
  o.observer = &observer;
  o.admission_threads = 1;  // --admission-threads: the one thread is held, the rest queue
  Start(o);
  RawAgent b(port(), absl::Seconds(15));
  Hello(b, "b", 1);
  ASSERT_TRUE(b.Send(DefsMsg({CounterDef(1, "c", 32)})));  // no info records: not held
  ASSERT_TRUE(b.Send(SamplesMsg(1, kT0, {{1, 1}})));
  ASSERT_TRUE(b.WaitAck(1));
  // More admissions held than gRPC has callback threads on a small machine.
  std::vector<std::unique_ptr<RawAgent>> slow;
  for (int i = 0; i < 4; ++i) {
    slow.push_back(std::make_unique<RawAgent>(port()));
    Hello(*slow.back(), absl::StrCat("slow", i), 1);
    v1::AgentMessage m = DefsMsg({CounterDef(1, "c", 32)});
    m.mutable_series_defs()->set_has_info(true);
    ASSERT_TRUE(slow.back()->Send(m));
  }
  ASSERT_TRUE(Eventually([&] {
    absl::MutexLock l(&observer.mu);
    return observer.entered >= 1;
  }));
  for (uint64_t seq = 2; seq <= 5; ++seq) {
    ASSERT_TRUE(b.Send(SamplesMsg(seq, kT0 + static_cast<int64_t>(seq) * kSecond, {{1, seq}})));
    ASSERT_TRUE(b.WaitAck(seq));
  }
  RawAgent c(port(), absl::Seconds(10));
  EXPECT_EQ(Hello(c, "c", 1), 0u);
  // One admission held on the one thread, three waiting for it. (Not read from /metrics here:
  // the held admission holds its node's lock, which a render takes too.)
  auto queued = [&] { return agg_->stats().admissions_queued.load(); };
  EXPECT_TRUE(Eventually([&] { return queued() == 3; })) << queued();
  {
    absl::MutexLock l(&observer.mu);
    EXPECT_EQ(observer.entered, 1);
    observer.released = true;
  }
  ASSERT_TRUE(Eventually([&] {
    absl::MutexLock l(&observer.mu);
    return observer.entered == 4;
  }));
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(
        Eventually([&] { return agg_->core().Node(absl::StrCat("slow", i))->series == 1; }));
  }
  EXPECT_EQ(agg_->core().Series("b")->front().state.total, 4u);
  EXPECT_EQ(queued(), 0);
  EXPECT_TRUE(absl::StrContains(agg_->MetricsText(), "\nringside_aggregator_admissions_queued 0\n"));
}

TEST_F(IngestServiceTest, MemoryOnlyModeSaysSo) {
  Start(Options());
  EXPECT_EQ(agg_->journal(), nullptr);
  absl::MutexLock l(&log_mu_);
  bool said = false;
  for (const std::string& line : log_) said |= absl::StrContains(line, "memory only");
  EXPECT_TRUE(said);
}

TEST_F(IngestServiceTest, ShutdownEndsSessionsWithUnavailable) {
  Start(Options());
  RawAgent agent(port());
  Hello(agent, "n", 1);
  agg_->Shutdown();
  grpc::Status s = agent.AwaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace ringside::daemon
