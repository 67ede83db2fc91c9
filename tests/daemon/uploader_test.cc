// The uploader against an in-process fake aggregator on 127.0.0.1: delivery and acks, series
// definitions, resend after reconnects without gaps or duplicates, the drop policy, backoff, the
// watchdogs, refusals and shutdown. Every wait is bounded.
#include "daemon/agent/uploader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "daemon/agent/exposition.h"
#include "daemon/agent/upload_fanout.h"
#include "daemon/common/protocol.h"
#include "grpcpp/security/credentials.h"
#include "prometheus/text_serializer.h"
#include "tests/daemon/fake_aggregator.h"
#include "tests/testing/prom_text.h"

namespace ringside::daemon {
namespace {

using testing::FakeAggregator;
using testing::FakeAggregatorBehavior;

constexpr absl::Duration kWait = absl::Seconds(10);

collectors::SeriesDef Counter(const std::string& device, const std::string& counter,
                              int8_t priority = -1) {
  collectors::SeriesDef d;
  d.source = "infiniband";
  d.device = device;
  d.port = "1";
  d.counter = counter;
  d.kind = collectors::SeriesKind::kCounter;
  d.width = 32;
  d.unit = collectors::Unit::kFourByteWords;
  d.saturates = true;
  d.priority = priority;
  return d;
}

using Table = std::shared_ptr<const collectors::SeriesTable>;

Table MakeTable(std::vector<collectors::SeriesDef> defs) {
  auto t = std::make_shared<collectors::SeriesTable>();
  t->defs = std::move(defs);
  return t;
}

AgentSnapshot Snap(const Table& table, uint64_t base, int64_t second) {
  AgentSnapshot s;
  s.node = "node-1";
  s.timestamp = absl::FromUnixSeconds(second);
  collectors::CollectorSnapshot cs;
  cs.collector = "infiniband";
  cs.table = table;
  for (size_t i = 0; i < table->defs.size(); ++i) {
    cs.values.push_back(collectors::Value{base + i, collectors::ValueStatus::kOk});
  }
  s.collectors.push_back(std::move(cs));
  return s;
}

v1::CollectiveBatch Collectives(const std::string& job, int first, int n) {
  v1::CollectiveBatch b;
  for (int i = first; i < first + n; ++i) {
    v1::CollectiveRecord* r = b.add_records();
    r->set_job_id(job);
    r->set_function("AllReduce");
    r->set_seq(i);
    r->set_rank(3);
    r->set_nranks(8);
  }
  return b;
}

// Log lines, captured.
class Logs {
 public:
  void Add(const std::string& line) {
    absl::MutexLock l(&mu_);
    lines_.push_back(line);
  }
  int Count(const std::string& needle) const {
    absl::MutexLock l(&mu_);
    return static_cast<int>(std::count_if(lines_.begin(), lines_.end(), [&](const std::string& s) {
      return absl::StrContains(s, needle);
    }));
  }
  std::string All() const {
    absl::MutexLock l(&mu_);
    std::string out;
    for (const std::string& s : lines_) absl::StrAppend(&out, s, "\n");
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> lines_;
};

class UploaderTest : public ::testing::Test {
 protected:
  UploaderOptions Options() {
    UploaderOptions o;
    o.target = fake_.address();
    o.node = "node-1";
    o.agent_version = "test";
    o.credentials = grpc::InsecureChannelCredentials();
    o.backoff.initial = absl::Milliseconds(10);
    o.backoff.max = absl::Milliseconds(100);
    o.backoff.multiplier = 2;
    o.backoff.jitter = 0.2;
    o.backoff_reset_after = absl::Milliseconds(200);
    o.hello_timeout = absl::Seconds(3);
    o.write_timeout = absl::Seconds(3);
    o.ack_timeout = absl::Seconds(10);
    o.link_poll_interval = absl::Milliseconds(10);
    o.log = [this](const std::string& line) { logs_.Add(line); };
    return o;
  }

  std::unique_ptr<Uploader> Make(UploaderOptions o, const LinkEventLog* links = nullptr) {
    absl::StatusOr<std::unique_ptr<Uploader>> up = Uploader::Create(std::move(o), links);
    EXPECT_TRUE(up.ok()) << up.status();
    return up.ok() ? std::move(*up) : nullptr;
  }

  // Waits until the aggregator holds everything the uploader sent and the buffer is empty.
  bool WaitAllAcked(Uploader& up, uint64_t seqs) {
    return FakeAggregator::WaitFor(
        [&] {
          UploaderStats s = up.Stats();
          return fake_.contiguous() >= seqs && s.acked_seq >= seqs && s.buffer_messages == 0;
        },
        kWait);
  }

  // The messages of one session, in order.
  std::vector<v1::AgentMessage> SessionMessages(int session) {
    std::vector<v1::AgentMessage> out;
    for (const FakeAggregator::Received& r : fake_.received()) {
      if (r.session == session) out.push_back(r.msg);
    }
    return out;
  }

  FakeAggregator fake_;
  Logs logs_;
};

TEST_F(UploaderTest, DeliversSampleBatchesInOrderAndReleasesThemOnAck) {
  auto up = Make(Options());
  ASSERT_NE(up, nullptr);
  Table t = MakeTable({Counter("mlx5_0", "port_rcv_data"), Counter("mlx5_0", "symbol_error"),
                       Counter("mlx5_1", "port_rcv_data", 3)});
  for (int i = 0; i < 5; ++i) {
    AgentSnapshot s = Snap(t, 1000 * (i + 1), 100 + i);
    s.collectors[0].values[1].status = collectors::ValueStatus::kUnavailable;  // left out
    up->OnSnapshot(s);
  }
  ASSERT_TRUE(WaitAllAcked(*up, 5)) << logs_.All();

  std::vector<v1::Hello> hellos = fake_.hellos();
  ASSERT_EQ(hellos.size(), 1u);
  EXPECT_EQ(hellos[0].node(), "node-1");
  EXPECT_EQ(hellos[0].agent_epoch(), up->agent_epoch());
  EXPECT_NE(hellos[0].agent_epoch(), 0u);
  EXPECT_EQ(hellos[0].protocol_version(), kProtocolVersion);
  EXPECT_EQ(hellos[0].min_protocol_version(), kMinProtocolVersion);
  EXPECT_EQ(hellos[0].agent_version(), "test");
  EXPECT_EQ(hellos[0].resend_from_seq(), 1u);
  EXPECT_GE(hellos[0].capabilities_size(), 1);

  std::map<uint32_t, v1::SeriesDef> defs;
  for (const v1::AgentMessage& m : SessionMessages(1)) {
    for (const v1::SeriesDef& d : m.series_defs().defs()) defs[d.id()] = d;
  }
  std::map<uint64_t, v1::AgentMessage> got = fake_.accepted();
  ASSERT_EQ(got.size(), 5u);
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    const v1::SampleBatch& b = got[seq].samples();
    EXPECT_EQ(b.timestamp_unix_nanos(), (99 + static_cast<int64_t>(seq)) * 1000000000);
    ASSERT_EQ(b.ids_size(), 2);  // the unavailable one is absent
    ASSERT_EQ(b.values_size(), 2);
    for (int i = 0; i < 2; ++i) {
      const v1::SeriesDef& d = defs[b.ids(i)];
      if (d.device() == "mlx5_0") {
        EXPECT_EQ(d.counter(), "port_rcv_data");
        EXPECT_EQ(b.values(i), 1000 * seq);
      } else {
        EXPECT_EQ(d.device(), "mlx5_1");
        EXPECT_EQ(d.priority(), 3);
        EXPECT_EQ(b.values(i), 1000 * seq + 2);
      }
      EXPECT_EQ(d.source(), "infiniband");
      EXPECT_EQ(d.port(), "1");
      EXPECT_EQ(d.kind(), v1::SERIES_KIND_COUNTER);
      EXPECT_EQ(d.width(), 32u);
      EXPECT_EQ(d.unit(), "4-byte-words");
      EXPECT_TRUE(d.saturates());
    }
  }
  UploaderStats st = up->Stats();
  EXPECT_EQ(st.sessions, 1u);
  EXPECT_TRUE(st.connected);
  EXPECT_EQ(st.sent[static_cast<size_t>(UploadType::kSamples)], 5u);
  EXPECT_EQ(st.acked_seq, 5u);
  EXPECT_EQ(st.last_seq, 5u);
  EXPECT_EQ(st.buffer_bytes, 0u);
  EXPECT_EQ(st.series, 3u);
  EXPECT_EQ(fake_.duplicates(), 0u);
  EXPECT_TRUE(fake_.violations().empty()) << fake_.violations().front();
}

TEST_F(UploaderTest, DefinesNewSeriesBeforeFirstUseAndAllAgainInEachSession) {
  auto up = Make(Options());
  ASSERT_NE(up, nullptr);
  Table a = MakeTable({Counter("mlx5_0", "port_rcv_data"), Counter("mlx5_0", "port_xmit_data")});
  up->OnSnapshot(Snap(a, 10, 1));
  ASSERT_TRUE(WaitAllAcked(*up, 1));
  // Rediscovery: a new table with one more series; the known ones keep their ids.
  Table b = MakeTable({Counter("mlx5_0", "port_xmit_data"), Counter("mlx5_0", "port_rcv_data"),
                       Counter("mlx5_2", "port_rcv_data")});
  up->OnSnapshot(Snap(b, 20, 2));
  ASSERT_TRUE(WaitAllAcked(*up, 2));

  std::vector<v1::AgentMessage> s1 = SessionMessages(1);
  std::map<std::string, uint32_t> id_of;
  for (const v1::AgentMessage& m : s1) {
    for (const v1::SeriesDef& d : m.series_defs().defs()) {
      EXPECT_FALSE(id_of.count(d.device() + "/" + d.counter())) << "defined twice in a session";
      id_of[d.device() + "/" + d.counter()] = d.id();
    }
  }
  ASSERT_EQ(id_of.size(), 3u);
  std::map<uint64_t, v1::AgentMessage> got = fake_.accepted();
  const v1::SampleBatch& second = got[2].samples();
  ASSERT_EQ(second.ids_size(), 3);
  EXPECT_EQ(second.ids(0), id_of["mlx5_0/port_xmit_data"]);
  EXPECT_EQ(second.values(0), 20u);
  EXPECT_EQ(second.ids(1), id_of["mlx5_0/port_rcv_data"]);
  EXPECT_EQ(second.values(1), 21u);
  EXPECT_EQ(second.ids(2), id_of["mlx5_2/port_rcv_data"]);
  EXPECT_EQ(got[1].samples().ids(0), id_of["mlx5_0/port_rcv_data"]);

  // A new session (the aggregator restarts): every id in use is defined first, before any batch.
  fake_.Stop();
  fake_.Start();
  AgentSnapshot third = Snap(b, 30, 3);
  third.collectors[0].values[2].status = collectors::ValueStatus::kError;  // in use, no value
  up->OnSnapshot(third);
  ASSERT_TRUE(WaitAllAcked(*up, 3)) << logs_.All();
  std::vector<v1::AgentMessage> s2 = SessionMessages(2);
  ASSERT_GE(s2.size(), 3u);
  EXPECT_TRUE(s2[0].has_hello());
  EXPECT_EQ(s2[0].hello().resend_from_seq(), 3u);  // 1 and 2 were acked
  ASSERT_TRUE(s2[1].has_series_defs());
  std::set<uint32_t> redefined;
  for (const v1::SeriesDef& d : s2[1].series_defs().defs()) redefined.insert(d.id());
  EXPECT_EQ(redefined,
            (std::set<uint32_t>{id_of["mlx5_0/port_rcv_data"], id_of["mlx5_0/port_xmit_data"],
                                id_of["mlx5_2/port_rcv_data"]}));
  EXPECT_TRUE(fake_.violations().empty()) << fake_.violations().front();
}

// Definitions by reference (docs/agent-upload.md): the Hello names the set of ids in use by its
// digest. An aggregator that does not hold it gets the set in one SeriesDefs that says so
// (complete_digest); one that holds it answers defs_known, and no definition of the set is sent.
TEST_F(UploaderTest, DefinitionsTheAggregatorHoldsAreNamedNotSent) {
  FakeAggregatorBehavior by_reference;
  by_reference.definition_sets = true;
  fake_.SetBehavior(by_reference);
  auto up = Make(Options());
  ASSERT_NE(up, nullptr);
  Table a = MakeTable({Counter("mlx5_0", "port_rcv_data"), Counter("mlx5_0", "port_xmit_data")});
  up->OnSnapshot(Snap(a, 10, 1));
  ASSERT_TRUE(WaitAllAcked(*up, 1));
  // Session 1 may or may not name the set (its Hello may precede the first cycle). Session 2,
  // to an aggregator that lost its state, names it; the aggregator does not hold it, so it
  // comes whole, with its digest.
  fake_.Stop();
  fake_.ForgetState();
  fake_.Start();
  up->OnSnapshot(Snap(a, 20, 2));
  ASSERT_TRUE(WaitAllAcked(*up, 2)) << logs_.All();
  std::vector<v1::AgentMessage> s2 = SessionMessages(2);
  ASSERT_GE(s2.size(), 3u);
  const std::string digest = s2[0].hello().defs_digest();
  EXPECT_EQ(digest.size(), 32u);
  ASSERT_TRUE(s2[1].has_series_defs());
  EXPECT_EQ(s2[1].series_defs().defs_size(), 2);
  EXPECT_EQ(s2[1].series_defs().complete_digest(), digest);
  EXPECT_EQ(fake_.definition_sets_held(), 1u);
  EXPECT_EQ(fake_.defs_known_sent(), 0);
  EXPECT_EQ(up->Stats().defs_by_reference, 0u);

  // Session 3: the aggregator holds it: no SeriesDef of the set is sent, the batch follows the
  // Hello, and a series that appears later is defined on its own.
  fake_.Stop();
  fake_.Start();
  up->OnSnapshot(Snap(a, 30, 3));
  ASSERT_TRUE(WaitAllAcked(*up, 3)) << logs_.All();
  Table b = MakeTable({Counter("mlx5_0", "port_rcv_data"), Counter("mlx5_0", "port_xmit_data"),
                       Counter("mlx5_2", "port_rcv_data")});
  up->OnSnapshot(Snap(b, 40, 4));
  ASSERT_TRUE(WaitAllAcked(*up, 4)) << logs_.All();
  std::vector<v1::AgentMessage> s3 = SessionMessages(3);
  EXPECT_EQ(s3[0].hello().defs_digest(), digest);
  EXPECT_EQ(fake_.defs_known_sent(), 1);
  EXPECT_EQ(up->Stats().defs_by_reference, 1u);
  int defined = 0;
  for (const v1::AgentMessage& m : s3) {
    if (!m.has_series_defs()) continue;
    for (const v1::SeriesDef& d : m.series_defs().defs()) {
      EXPECT_EQ(d.device(), "mlx5_2") << "a definition of the held set was sent";
      ++defined;
    }
    EXPECT_TRUE(m.series_defs().complete_digest().empty());
  }
  EXPECT_EQ(defined, 1);

  // Session 4, to an aggregator that lost its state: the new set (three series) comes whole.
  fake_.Stop();
  fake_.ForgetState();
  fake_.Start();
  up->OnSnapshot(Snap(b, 50, 5));
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return SessionMessages(4).size() >= 3; }, kWait));
  std::vector<v1::AgentMessage> s4 = SessionMessages(4);
  EXPECT_NE(s4[0].hello().defs_digest(), digest);
  ASSERT_TRUE(s4[1].has_series_defs());
  EXPECT_EQ(s4[1].series_defs().defs_size(), 3);
  EXPECT_EQ(s4[1].series_defs().complete_digest(), s4[0].hello().defs_digest());
  EXPECT_TRUE(fake_.violations().empty()) << fake_.violations().front();
}

// The aggregator never acks, is killed, and comes back without memory: everything is resent
// with its original seq, what was enqueued meanwhile follows with the next seqs, and every
// collective record and link event arrives exactly once.
TEST_F(UploaderTest, ResendsUnackedMessagesAfterReconnectWithoutGapsOrDuplicates) {
  FakeAggregatorBehavior no_ack;
  no_ack.ack = false;
  fake_.SetBehavior(no_ack);
  LinkEventLog links;
  auto up = Make(Options(), &links);
  ASSERT_NE(up, nullptr);
  for (int i = 0; i < 6; ++i) up->EnqueueCollectives(Collectives("job-a", i * 10, 10));
  collectors::LinkEvent down;
  down.time = absl::FromUnixSeconds(50);
  down.source = "netlink";
  down.device = "eth3";
  down.from = collectors::LinkState::kUp;
  down.to = collectors::LinkState::kDown;
  links.Append({down});
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return fake_.accepted().size() == 7; }, kWait));
  EXPECT_EQ(up->Stats().buffer_messages, 7u);
  EXPECT_EQ(up->Stats().acked_seq, 0u);

  fake_.Stop();
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return !up->Stats().connected; }, kWait));
  // While it is down: more records and events.
  for (int i = 6; i < 9; ++i) up->EnqueueCollectives(Collectives("job-a", i * 10, 10));
  collectors::LinkEvent upev = down;
  upev.time = absl::FromUnixSeconds(51);
  upev.from = collectors::LinkState::kDown;
  upev.to = collectors::LinkState::kUp;
  links.Append({upev});
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return up->Stats().buffer_messages == 11; }, kWait));
  fake_.ForgetState();
  fake_.SetBehavior(FakeAggregatorBehavior{});
  fake_.Start();
  ASSERT_TRUE(WaitAllAcked(*up, 11)) << logs_.All();

  std::vector<v1::Hello> hellos = fake_.hellos();
  ASSERT_GE(hellos.size(), 2u);
  EXPECT_EQ(hellos.back().resend_from_seq(), 1u);  // nothing was acked or dropped
  std::map<uint64_t, v1::AgentMessage> got = fake_.accepted();
  ASSERT_EQ(got.size(), 11u);
  EXPECT_EQ(got.begin()->first, 1u);
  EXPECT_EQ(got.rbegin()->first, 11u);  // contiguous: no gap
  std::map<uint64_t, int> records;
  std::vector<v1::LinkState> transitions;
  for (const auto& [seq, m] : got) {
    for (const v1::CollectiveRecord& r : m.collectives().records()) ++records[r.seq()];
    for (const v1::LinkEvent& e : m.link_events().events()) {
      EXPECT_EQ(e.device(), "eth3");
      EXPECT_EQ(e.source(), "netlink");
      transitions.push_back(e.to());
    }
  }
  ASSERT_EQ(records.size(), 90u);
  for (const auto& [seq, n] : records) EXPECT_EQ(n, 1) << "record " << seq;
  EXPECT_EQ(transitions, (std::vector<v1::LinkState>{v1::LINK_STATE_DOWN, v1::LINK_STATE_UP}));
  UploaderStats st = up->Stats();
  EXPECT_EQ(st.resent[static_cast<size_t>(UploadType::kCollectives)], 6u);
  EXPECT_EQ(st.resent[static_cast<size_t>(UploadType::kLinkEvents)], 1u);
  EXPECT_GE(st.reconnects, 1u);
  EXPECT_EQ(st.dropped[static_cast<size_t>(UploadType::kCollectives)].messages, 0u);
  EXPECT_TRUE(fake_.violations().empty()) << fake_.violations().front();
}

// A link event goes out as soon as it is logged (issue #15: netlink events page within ~100 ms),
// not at the uploader's next poll of the log: with the poll an hour away, it still arrives.
TEST_F(UploaderTest, ALinkEventIsSentWhenLoggedNotAtTheNextPoll) {
  LinkEventLog links;
  UploaderOptions o = Options();
  o.link_poll_interval = absl::Hours(1);
  auto up = Make(o, &links);
  ASSERT_NE(up, nullptr);
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return up->Stats().connected; }, kWait));
  absl::SleepFor(absl::Milliseconds(200));  // the control loop is waiting now
  for (int i = 0; i < 3; ++i) {
    collectors::LinkEvent e;
    e.time = absl::FromUnixSeconds(60 + i);
    e.source = "netlink";
    e.device = absl::StrCat("eth", i);
    e.from = collectors::LinkState::kUp;
    e.to = collectors::LinkState::kDown;
    links.Append({e});
    ASSERT_TRUE(FakeAggregator::WaitFor(
        [&] {
          for (const auto& [seq, m] : fake_.accepted()) {
            for (const v1::LinkEvent& got : m.link_events().events()) {
              if (got.device() == e.device) return true;
            }
          }
          return false;
        },
        absl::Seconds(5)))
        << "event " << i << " not forwarded before the next poll";
  }
}

// A brief outage of an aggregator that kept its state: its HelloAck says what it has, and the
// agent resends nothing of that.
TEST_F(UploaderTest, ResendsNothingTheAggregatorAlreadyAcknowledgedInItsHelloAck) {
  auto up = Make(Options());
  ASSERT_NE(up, nullptr);
  for (int i = 0; i < 4; ++i) up->EnqueueCollectives(Collectives("job-b", i, 1));
  ASSERT_TRUE(WaitAllAcked(*up, 4));
  fake_.Stop();
  // Enqueued once the agent knows the session is gone, so it is first sent in the next one.
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return !up->Stats().connected; }, kWait));
  up->EnqueueCollectives(Collectives("job-b", 4, 1));
  fake_.Start();
  ASSERT_TRUE(WaitAllAcked(*up, 5)) << logs_.All();
  std::vector<v1::Hello> hellos = fake_.hellos();
  ASSERT_EQ(hellos.size(), 2u);
  EXPECT_EQ(hellos[1].resend_from_seq(), 5u);
  // The log tells the whole story: up, down, up again (a change of state is never rate-limited).
  EXPECT_EQ(logs_.Count("connected to"), 2) << logs_.All();
  EXPECT_GE(logs_.Count("session 1 ended"), 1) << logs_.All();
  EXPECT_EQ(fake_.duplicates(), 0u);
  EXPECT_EQ(up->Stats().resent[static_cast<size_t>(UploadType::kCollectives)], 0u);
  EXPECT_EQ(fake_.accepted().size(), 5u);
}

// With no aggregator, the buffer fills: sample batches go first, collective records stay, and
// both are counted and exported.
TEST_F(UploaderTest, FullBufferDropsSampleBatchesFirstAndExportsTheCounts) {
  fake_.Stop();
  UploaderOptions o = Options();
  o.buffer_bytes = 256 << 10;
  auto up = Make(o);
  ASSERT_NE(up, nullptr);
  for (int i = 0; i < 5; ++i) up->EnqueueCollectives(Collectives("job-c", i * 10, 10));
  std::vector<collectors::SeriesDef> defs;
  for (int i = 0; i < 2000; ++i) defs.push_back(Counter("mlx5_0", absl::StrCat("c", i)));
  Table t = MakeTable(defs);
  for (int i = 0; i < 40; ++i) up->OnSnapshot(Snap(t, 1000000 * i, i));
  ASSERT_TRUE(
      FakeAggregator::WaitFor([&] { return up->Stats().errors["unavailable"].count >= 1; }, kWait));
  UploaderStats st = up->Stats();
  EXPECT_GT(st.dropped[static_cast<size_t>(UploadType::kSamples)].messages, 0u);
  EXPECT_EQ(st.dropped[static_cast<size_t>(UploadType::kSamples)].records,
            2000 * st.dropped[static_cast<size_t>(UploadType::kSamples)].messages);
  EXPECT_EQ(st.dropped[static_cast<size_t>(UploadType::kCollectives)].messages, 0u);
  EXPECT_LE(st.buffer_bytes, st.buffer_capacity);
  EXPECT_EQ(st.buffer_capacity, size_t{256} << 10);

  // /metrics shows the drops, by type.
  ExpositionOptions eo;
  eo.version = "test";
  eo.extra_families = [&] { return up->MetricFamilies(); };
  AgentSnapshot snap = Snap(t, 0, 0);
  testing::PromText text =
      testing::ParsePromText(prometheus::TextSerializer().Serialize(SnapshotToFamilies(snap, eo)));
  auto dropped = text.Find("ringside_agent_upload_dropped_total", {{"type", "samples"}});
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].labels["node"], "node-1");
  EXPECT_DOUBLE_EQ(
      dropped[0].value,
      static_cast<double>(st.dropped[static_cast<size_t>(UploadType::kSamples)].messages));
  EXPECT_EQ(text.types["ringside_agent_upload_dropped_total"], "counter");
  auto kept = text.Find("ringside_agent_upload_dropped_total", {{"type", "collectives"}});
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].value, 0);
  auto connected = text.Find("ringside_agent_upload_connected");
  ASSERT_EQ(connected.size(), 1u);
  EXPECT_EQ(connected[0].value, 0);
  EXPECT_FALSE(
      text.Find("ringside_agent_upload_session_ends_total", {{"reason", "unavailable"}}).empty());

  // The aggregator comes up: all collective records arrive, and the samples that were kept.
  fake_.Start();
  const uint64_t expected = 5 + 40 - st.dropped[static_cast<size_t>(UploadType::kSamples)].messages;
  ASSERT_TRUE(WaitAllAcked(*up, expected)) << logs_.All();
  int records = 0;
  for (const auto& [seq, m] : fake_.accepted()) records += m.collectives().records_size();
  EXPECT_EQ(records, 50);
  EXPECT_TRUE(fake_.violations().empty()) << fake_.violations().front();
}

TEST_F(UploaderTest, ReconnectBackoffGrowsAndStaysBounded) {
  FakeAggregatorBehavior refuse;
  refuse.refuse_code = grpc::StatusCode::UNAVAILABLE;
  refuse.refuse_message = "overloaded";
  fake_.SetBehavior(refuse);
  UploaderOptions o = Options();
  o.backoff.initial = absl::Milliseconds(20);
  o.backoff.max = absl::Milliseconds(80);
  o.backoff.jitter = 0.25;
  auto up = Make(o);
  ASSERT_NE(up, nullptr);
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return fake_.hello_times().size() >= 12; }, kWait));
  std::vector<absl::Time> t = fake_.hello_times();
  for (size_t i = 1; i < t.size(); ++i) {
    const absl::Duration gap = t[i] - t[i - 1];
    EXPECT_GE(gap, absl::Milliseconds(15)) << i;        // at least initial x (1 - jitter)
    EXPECT_LE(gap, absl::Milliseconds(80 + 150)) << i;  // at most max, plus scheduling slack
  }
  // Once grown, every gap is near the max, never below max x (1 - jitter).
  for (size_t i = t.size() - 4; i < t.size(); ++i) {
    EXPECT_GE(t[i] - t[i - 1], absl::Milliseconds(60)) << i;
  }
  EXPECT_GE(up->Stats().errors["unavailable"].count, 11u);
  EXPECT_EQ(up->Stats().sessions, 0u);
}

// The aggregator takes the Hello, then stops reading: the write watchdog cancels the session,
// the stream is reopened, and nothing buffered is lost.
TEST_F(UploaderTest, WriteWatchdogCancelsAStuckSessionAndKeepsTheBuffer) {
  FakeAggregatorBehavior stuck;
  stuck.stop_reading_after_hello = true;
  fake_.SetBehavior(stuck);
  UploaderOptions o = Options();
  o.write_timeout = absl::Milliseconds(300);
  o.ack_timeout = absl::Seconds(30);
  auto up = Make(o);
  ASSERT_NE(up, nullptr);
  std::vector<collectors::SeriesDef> defs;
  for (int i = 0; i < 50000; ++i) defs.push_back(Counter("mlx5_0", absl::StrCat("counter_", i)));
  Table t = MakeTable(defs);
  for (int i = 0; i < 4; ++i) up->OnSnapshot(Snap(t, uint64_t{1} << 40, i));
  ASSERT_TRUE(FakeAggregator::WaitFor(
      [&] { return up->Stats().errors["write_timeout"].count >= 1; }, kWait))
      << logs_.All();
  EXPECT_GE(logs_.Count("write_timeout"), 1);
  fake_.SetBehavior(FakeAggregatorBehavior{});
  ASSERT_TRUE(WaitAllAcked(*up, 4)) << logs_.All();
  EXPECT_EQ(fake_.accepted().size(), 4u);
  EXPECT_EQ(up->Stats().dropped[static_cast<size_t>(UploadType::kSamples)].messages, 0u);
  EXPECT_TRUE(fake_.violations().empty()) << fake_.violations().front();
}

TEST_F(UploaderTest, HelloWithoutAnswerTimesOutAndRetries) {
  FakeAggregatorBehavior silent;
  silent.send_hello_ack = false;
  fake_.SetBehavior(silent);
  UploaderOptions o = Options();
  o.hello_timeout = absl::Milliseconds(200);
  auto up = Make(o);
  ASSERT_NE(up, nullptr);
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return fake_.hellos().size() >= 2; }, kWait));
  EXPECT_GE(up->Stats().errors["hello_timeout"].count, 1u);
  fake_.SetBehavior(FakeAggregatorBehavior{});
  up->EnqueueCollectives(Collectives("job-d", 0, 1));
  ASSERT_TRUE(WaitAllAcked(*up, 1)) << logs_.All();
}

// An aggregator that speaks another protocol version: said clearly, once, and retried until an
// operator fixes it.
TEST_F(UploaderTest, ProtocolVersionRefusalIsLoggedOnceAndRetried) {
  FakeAggregatorBehavior future;
  future.protocol_version = 99;
  fake_.SetBehavior(future);
  auto up = Make(Options());
  ASSERT_NE(up, nullptr);
  up->EnqueueCollectives(Collectives("job-e", 0, 3));
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return fake_.hellos().size() >= 5; }, kWait));
  EXPECT_GE(up->Stats().errors["version_mismatch"].count, 4u);
  EXPECT_EQ(logs_.Count("protocol version 99"), 1) << logs_.All();
  EXPECT_EQ(logs_.Count(absl::StrCat(kMinProtocolVersion, "..", kProtocolVersion)), 1);
  EXPECT_TRUE(fake_.accepted().empty());  // nothing sequenced before an accepted HelloAck
  EXPECT_FALSE(up->Stats().connected);

  fake_.SetBehavior(FakeAggregatorBehavior{});
  ASSERT_TRUE(WaitAllAcked(*up, 1)) << logs_.All();
  EXPECT_EQ(fake_.accepted().begin()->second.collectives().records_size(), 3);
}

TEST_F(UploaderTest, RefusalStatusesAreLoggedOnceEachAndRetried) {
  FakeAggregatorBehavior refuse;
  refuse.refuse_code = grpc::StatusCode::FAILED_PRECONDITION;
  refuse.refuse_message = "node limit reached (4096 nodes)";
  fake_.SetBehavior(refuse);
  auto up = Make(Options());
  ASSERT_NE(up, nullptr);
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return fake_.hellos().size() >= 4; }, kWait));
  refuse.refuse_code = grpc::StatusCode::PERMISSION_DENIED;
  refuse.refuse_message = "certificate is not for node node-1";
  fake_.SetBehavior(refuse);
  const size_t seen = fake_.hellos().size();
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return fake_.hellos().size() >= seen + 4; }, kWait));
  EXPECT_EQ(logs_.Count("FAILED_PRECONDITION: node limit reached (4096 nodes)"), 1) << logs_.All();
  EXPECT_EQ(logs_.Count("PERMISSION_DENIED: certificate is not for node node-1"), 1) << logs_.All();
  EXPECT_EQ(logs_.Count("--node-name"), 1);
  UploaderStats st = up->Stats();
  EXPECT_GE(st.errors["failed_precondition"].count, 3u);
  EXPECT_GE(st.errors["permission_denied"].count, 3u);
  EXPECT_EQ(st.sessions, 0u);
}

TEST_F(UploaderTest, ShutdownFlushesWhatIsBuffered) {
  LinkEventLog links;
  auto up = Make(Options(), &links);
  ASSERT_NE(up, nullptr);
  for (int i = 0; i < 20; ++i) up->EnqueueCollectives(Collectives("job-f", i * 5, 5));
  collectors::LinkEvent e;
  e.source = "verbs";
  e.device = "mlx5_0";
  e.port = "1";
  e.to = collectors::LinkState::kDown;
  links.Append({e});
  EXPECT_TRUE(up->Shutdown(absl::Seconds(5))) << logs_.All();
  EXPECT_EQ(fake_.contiguous(), 21u);
  EXPECT_EQ(up->Stats().buffer_messages, 0u);
  up->EnqueueCollectives(Collectives("job-f", 100, 1));  // ignored after shutdown
  EXPECT_EQ(up->Stats().buffer_messages, 0u);
}

TEST_F(UploaderTest, ShutdownWithoutAggregatorIsBounded) {
  fake_.Stop();
  auto up = Make(Options());
  ASSERT_NE(up, nullptr);
  up->EnqueueCollectives(Collectives("job-g", 0, 2));
  const absl::Time start = absl::Now();
  EXPECT_FALSE(up->Shutdown(absl::Milliseconds(200)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(logs_.Count("stopped with 1 unacknowledged messages"), 1) << logs_.All();
}

TEST_F(UploaderTest, PlaintextToARemoteAggregatorIsRefusedWithoutAllowInsecure) {
  UploaderOptions o = Options();
  o.credentials = nullptr;
  o.target = "10.1.2.3:9472";
  absl::StatusOr<std::unique_ptr<Uploader>> up = Uploader::Create(o);
  ASSERT_FALSE(up.ok());
  EXPECT_EQ(up.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(up.status().message(), "--allow-insecure"));
}

// --- every replica of a shard (UploadFanout) -------------------------------------------------------

TEST(AggregatorListTest, Parses) {
  absl::StatusOr<std::vector<std::string>> l = ParseAggregatorList("a:9472, b:9472");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(*l, (std::vector<std::string>{"a:9472", "b:9472"}));
  EXPECT_EQ(*ParseAggregatorList("a:1"), std::vector<std::string>{"a:1"});
  EXPECT_FALSE(ParseAggregatorList("a:1,,b:1").ok());
  EXPECT_FALSE(ParseAggregatorList("a:1,a:1").ok());
  EXPECT_FALSE(ParseAggregatorList("").ok());
}

class UploadFanoutTest : public UploaderTest {
 protected:
  std::unique_ptr<UploadFanout> MakeFanout(const LinkEventLog* links) {
    absl::StatusOr<std::unique_ptr<UploadFanout>> f =
        UploadFanout::Create(Options(), {fake_.address(), second_.address()}, links);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? std::move(*f) : nullptr;
  }
  // The node's shard is fake_; the records of job "far" go to second_ (another shard), any other
  // job's to fake_.
  std::unique_ptr<UploadFanout> MakeShardedFanout() {
    absl::StatusOr<std::unique_ptr<UploadFanout>> f = UploadFanout::Create(
        Options(), {fake_.address()}, nullptr, [&](absl::string_view job) {
          return std::vector<std::string>{job == "far" ? second_.address() : fake_.address()};
        });
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? std::move(*f) : nullptr;
  }
  // Collective record seqs, sample batch timestamps and link transitions an aggregator accepted;
  // false if anything came twice or out of a contiguous run of seqs.
  struct Got {
    std::map<uint64_t, int> records;
    std::set<int64_t> batches;
    int link_events = 0;
  };
  static Got Contents(const FakeAggregator& agg) {
    Got g;
    for (const auto& [seq, m] : agg.accepted()) {
      for (const v1::CollectiveRecord& r : m.collectives().records()) ++g.records[r.seq()];
      if (m.has_samples()) g.batches.insert(m.samples().timestamp_unix_nanos());
      g.link_events += m.link_events().events_size();
    }
    return g;
  }
  FakeAggregator second_;
};

// One replica is down from the start: the other gets everything at once, nothing waits for the
// dead one; when it comes back it gets everything it missed from its own buffer, once.
TEST_F(UploadFanoutTest, AReplicaDownNeitherBlocksNorStarvesTheOther) {
  second_.Stop();
  LinkEventLog links;
  auto fan = MakeFanout(&links);
  ASSERT_NE(fan, nullptr);
  ASSERT_EQ(fan->size(), 2u);
  EXPECT_NE(fan->replica(0)->agent_epoch(), fan->replica(1)->agent_epoch());
  Table t = MakeTable({Counter("mlx5_0", "port_rcv_data"), Counter("mlx5_0", "symbol_error")});
  for (int i = 0; i < 5; ++i) fan->OnSnapshot(Snap(t, 1000 * i, 100 + i));
  for (int i = 0; i < 3; ++i) fan->EnqueueCollectives(Collectives("job-a", i * 10, 10));
  collectors::LinkEvent down;
  down.time = absl::FromUnixSeconds(103);
  down.source = "netlink";
  down.device = "eth3";
  down.from = collectors::LinkState::kUp;
  down.to = collectors::LinkState::kDown;
  links.Append({down});

  // The live replica holds all 9 messages (5 batches, 3 collective batches, 1 link event batch).
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return fake_.contiguous() >= 9; }, kWait))
      << logs_.All();
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return fan->replica(0)->Stats().buffer_messages == 0; },
                                      kWait));
  EXPECT_TRUE(fan->AnyConnected());
  EXPECT_FALSE(fan->replica(1)->Stats().connected);
  // Kept for the dead replica (its control thread forwards the link event on its own beat).
  EXPECT_TRUE(FakeAggregator::WaitFor(
      [&] { return fan->replica(1)->Stats().buffer_messages == 9; }, kWait))
      << fan->replica(1)->Stats().buffer_messages;

  second_.Start();
  ASSERT_TRUE(FakeAggregator::WaitFor(
      [&] { return second_.contiguous() >= 9 && fan->replica(1)->Stats().buffer_messages == 0; },
      kWait))
      << logs_.All();
  for (const FakeAggregator* agg : {&fake_, &second_}) {
    Got g = Contents(*agg);
    EXPECT_EQ(g.batches.size(), 5u);
    ASSERT_EQ(g.records.size(), 30u);
    for (const auto& [seq, n] : g.records) EXPECT_EQ(n, 1) << "record " << seq;
    EXPECT_EQ(g.link_events, 1);
    EXPECT_EQ(agg->duplicates(), 0u);
    EXPECT_TRUE(agg->violations().empty()) << agg->violations().front();
    // Each replica is told there are two (a replica without --peers warns: issue #25).
    const std::vector<v1::Hello> hellos = agg->hellos();  // a copy
    ASSERT_FALSE(hellos.empty());
    const auto& caps = hellos.front().capabilities();
    EXPECT_NE(std::find(caps.begin(), caps.end(), "replicas=2"), caps.end());
  }

  // /metrics: each replica's families, told apart by the aggregator label.
  prometheus::TextSerializer ser;
  testing::PromText text = testing::ParsePromText(ser.Serialize(fan->MetricFamilies()));
  for (const std::string& target : {fake_.address(), second_.address()}) {
    auto c = text.Find("ringside_agent_upload_connected", {{"aggregator", target}});
    ASSERT_EQ(c.size(), 1u) << target;
    EXPECT_EQ(c[0].value, 1);
    EXPECT_EQ(c[0].labels["node"], "node-1");
  }
  EXPECT_EQ(text.types["ringside_agent_upload_connected"], "gauge");

  // Stopping flushes both at once.
  EXPECT_TRUE(fan->Shutdown(absl::Seconds(5)));
}

// Shards: counters stay with the node's shard; each job's records go to its own shard, through a
// collectives-only session there (its Hello offers only collectives), and nowhere else.
TEST_F(UploadFanoutTest, CollectiveRecordsGoToTheShardOfTheirJob) {
  std::unique_ptr<UploadFanout> fan = MakeShardedFanout();
  ASSERT_NE(fan, nullptr);
  Table t = MakeTable({Counter("mlx5_0", "port_rcv_data")});
  fan->OnSnapshot(Snap(t, 1, 100));
  v1::CollectiveBatch mixed = Collectives("near", 0, 5);
  const v1::CollectiveBatch far_batch = Collectives("far", 100, 3);
  for (const v1::CollectiveRecord& r : far_batch.records()) *mixed.add_records() = r;
  (*mixed.mutable_dropped_by_job())["far"] = 7;
  (*mixed.mutable_dropped_by_job())["near"] = 2;
  fan->EnqueueCollectives(mixed);

  ASSERT_TRUE(FakeAggregator::WaitFor(
      [&] { return fake_.contiguous() >= 2 && second_.contiguous() >= 1; }, kWait))
      << logs_.All();
  EXPECT_EQ(fan->JobTargets(), std::vector<std::string>{second_.address()});
  Got near = Contents(fake_);
  Got far = Contents(second_);
  EXPECT_EQ(near.batches.size(), 1u);  // the node's counters
  EXPECT_EQ(far.batches.size(), 0u);   // never to the job's shard
  ASSERT_EQ(near.records.size(), 5u);
  EXPECT_EQ(near.records.begin()->first, 0u);
  ASSERT_EQ(far.records.size(), 3u);
  EXPECT_EQ(far.records.begin()->first, 100u);
  for (const auto& [seq, m] : second_.accepted()) {
    if (!m.has_collectives()) continue;
    EXPECT_EQ(m.collectives().dropped_by_job().size(), 1u);
    EXPECT_EQ(m.collectives().dropped_by_job().at("far"), 7u);
  }
  ASSERT_FALSE(second_.hellos().empty());
  const v1::Hello hello = second_.hellos().front();
  EXPECT_EQ(hello.node(), "node-1");
  EXPECT_EQ(std::vector<std::string>(hello.capabilities().begin(), hello.capabilities().end()),
            std::vector<std::string>{"collectives"});
  EXPECT_EQ(fake_.hellos().front().capabilities_size(), 3);
  EXPECT_TRUE(fan->Shutdown(absl::Seconds(5)));
}

// The node moved to another shard (its leaf switch changed): later samples, link events and
// collective records go only to the new shard's replicas; a replica of both shards keeps its
// uploader and session; the old replica gets everything sent before the move, then its session is
// closed cleanly and its uploader retired in the background.
TEST_F(UploadFanoutTest, MovingSendsLaterDataOnlyToTheNewShardsReplicas) {
  FakeAggregator third;
  LinkEventLog links;
  auto fan = MakeFanout(&links);  // shard one: fake_, second_
  ASSERT_NE(fan, nullptr);
  Table t = MakeTable({Counter("mlx5_0", "port_rcv_data"), Counter("mlx5_0", "symbol_error")});
  for (int i = 0; i < 3; ++i) fan->OnSnapshot(Snap(t, 1000 * i, 100 + i));
  // Held in the old replicas' buffers until acknowledged: not lost by the move.
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return second_.contiguous() >= 3; }, kWait))
      << logs_.All();
  const std::shared_ptr<const Uploader> kept = fan->replica(1);
  ASSERT_EQ(kept->options().target, second_.address());

  // Shard two: second_ (both shards) and third.
  const absl::Time before = absl::Now();
  ASSERT_TRUE(fan->MoveNodeTo({second_.address(), third.address()}, absl::Seconds(5)).ok());
  EXPECT_LT(absl::Now() - before, absl::Seconds(1));  // never waits for the network
  EXPECT_EQ(fan->Targets(), (std::vector<std::string>{second_.address(), third.address()}));
  EXPECT_EQ(fan->replica(0).get(), kept.get());  // same uploader, same epoch, same session

  for (int i = 0; i < 3; ++i) fan->OnSnapshot(Snap(t, 5000 + 1000 * i, 200 + i));
  fan->EnqueueCollectives(Collectives("job-a", 0, 4));
  // (An old replica's uploader forwards the link log until its retirement ends.)
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return fan->Retiring() == 0; }, kWait));
  collectors::LinkEvent down;
  down.time = absl::FromUnixSeconds(201);
  down.source = "netlink";
  down.device = "eth3";
  down.from = collectors::LinkState::kUp;
  down.to = collectors::LinkState::kDown;
  links.Append({down});

  ASSERT_TRUE(FakeAggregator::WaitFor(
      [&] {
        Got g3 = Contents(third);
        Got g2 = Contents(second_);
        return g3.batches.size() == 3 && g3.records.size() == 4 && g3.link_events == 1 &&
               g2.batches.size() == 6 && g2.records.size() == 4 && g2.link_events == 1;
      },
      kWait))
      << logs_.All();
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return fan->Retiring() == 0; }, kWait));
  EXPECT_EQ(logs_.Count(absl::StrCat("upload to ", fake_.address(), " retired")), 1)
      << logs_.All();

  // The old replica: everything before the move (in its first session), then a session that
  // offers only collectives (so the old shard does not judge the node stale) and carries nothing.
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return fake_.hellos().size() == 2; }, kWait))
      << logs_.All();
  const std::vector<v1::Hello> old_hellos = fake_.hellos();
  // Counters, collectives and link events, to one of two replicas.
  EXPECT_EQ(std::vector<std::string>(old_hellos[0].capabilities().begin(),
                                     old_hellos[0].capabilities().end()),
            (std::vector<std::string>{"samples", "collectives", "link_events", "replicas=2"}));
  EXPECT_EQ(std::vector<std::string>(old_hellos[1].capabilities().begin(),
                                     old_hellos[1].capabilities().end()),
            std::vector<std::string>{"collectives"});
  std::set<int64_t> old_batches;
  int old_records = 0, old_link_events = 0;
  for (const FakeAggregator::Received& r : fake_.received()) {
    if (r.msg.has_samples()) old_batches.insert(r.msg.samples().timestamp_unix_nanos());
    old_records += r.msg.collectives().records_size();
    old_link_events += r.msg.link_events().events_size();
    if (r.session == 2) EXPECT_FALSE(r.msg.has_samples()) << r.msg.DebugString();
  }
  EXPECT_EQ(old_batches, (std::set<int64_t>{100'000'000'000, 101'000'000'000, 102'000'000'000}));
  EXPECT_EQ(old_records, 0);
  EXPECT_EQ(old_link_events, 0);
  Got moved = Contents(third);
  EXPECT_EQ(moved.batches, (std::set<int64_t>{200'000'000'000, 201'000'000'000, 202'000'000'000}));
  EXPECT_EQ(second_.hellos().size(), 1u);  // its session went on
  EXPECT_EQ(third.hellos().size(), 1u);
  // The node's counters now come here (one of the new shard's two replicas).
  EXPECT_EQ(third.hellos().front().capabilities_size(), 4);
  for (const FakeAggregator* agg : {&fake_, &second_, &third}) {
    EXPECT_EQ(agg->duplicates(), 0u);
    EXPECT_TRUE(agg->violations().empty()) << agg->violations().front();
  }
  // /metrics: the old replica's series are the collectives-only uploader's (nothing enqueued), the
  // new one's are there.
  testing::PromText text =
      testing::ParsePromText(prometheus::TextSerializer().Serialize(fan->MetricFamilies()));
  auto enqueued = text.Find("ringside_agent_upload_messages_enqueued_total",
                            {{"aggregator", fake_.address()}, {"type", "samples"}});
  ASSERT_EQ(enqueued.size(), 1u);
  EXPECT_EQ(enqueued[0].value, 0);
  EXPECT_EQ(
      text.Find("ringside_agent_upload_connected", {{"aggregator", third.address()}}).size(),
      1u);
  EXPECT_FALSE(fan->MoveNodeTo({}, absl::Seconds(1)).ok());
  EXPECT_TRUE(fan->Shutdown(absl::Seconds(5)));
}

// The node moves to a shard where one of its jobs was placed: that replica already has the node's
// collectives-only session. The new uploader opens its session only once the collectives-only
// one closed (with everything it held acknowledged): the aggregator keeps one session per node, a
// newer Hello replacing the older session, so overlapping them would make the two fight.
TEST_F(UploadFanoutTest, MovingToTheShardOfANodesJobOpensTheNewSessionAfterTheJobSessionClosed) {
  std::unique_ptr<UploadFanout> fan = MakeShardedFanout();
  ASSERT_NE(fan, nullptr);
  Table t = MakeTable({Counter("mlx5_0", "port_rcv_data")});
  fan->OnSnapshot(Snap(t, 1, 100));
  fan->EnqueueCollectives(Collectives("far", 0, 5));
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return second_.contiguous() >= 1; }, kWait))
      << logs_.All();
  ASSERT_EQ(fan->JobTargets(), std::vector<std::string>{second_.address()});
  // Records still in flight on the collectives-only session when the node moves.
  fan->EnqueueCollectives(Collectives("far", 5, 5));
  ASSERT_TRUE(fan->MoveNodeTo({second_.address()}, absl::Seconds(5)).ok());
  EXPECT_TRUE(fan->JobTargets().empty());
  for (int i = 0; i < 3; ++i) fan->OnSnapshot(Snap(t, 1000 * (i + 1), 200 + i));
  fan->EnqueueCollectives(Collectives("far", 10, 5));
  ASSERT_TRUE(FakeAggregator::WaitFor(
      [&] { return fan->Retiring() == 0 && Contents(second_).batches.size() == 3; }, kWait))
      << logs_.All();
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return Contents(second_).records.size() == 5; },
                                      kWait));
  EXPECT_EQ(second_.max_open_sessions(), 1) << "the node's two sessions overlapped";
  const std::vector<v1::Hello> hellos = second_.hellos();
  ASSERT_EQ(hellos.size(), 2u) << logs_.All();
  EXPECT_EQ(hellos[0].capabilities_size(), 1);  // collectives only
  EXPECT_EQ(hellos[1].capabilities_size(), 3);  // the node's counters now come here
  EXPECT_NE(hellos[0].agent_epoch(), hellos[1].agent_epoch());
  EXPECT_EQ(logs_.Count(absl::StrCat("upload to ", second_.address(),
                                     " retired (the node moved to another shard), everything "
                                     "acknowledged")),
            1)
      << logs_.All();
  // Every record once: 0..9 through the collectives-only session, 10..14 through the new one.
  std::map<uint64_t, int> all;
  for (const FakeAggregator::Received& r : second_.received()) {
    for (const v1::CollectiveRecord& rec : r.msg.collectives().records()) ++all[rec.seq()];
  }
  ASSERT_EQ(all.size(), 15u);
  for (const auto& [seq, n] : all) EXPECT_EQ(n, 1) << "record " << seq;
  EXPECT_TRUE(second_.violations().empty()) << second_.violations().front();
  EXPECT_TRUE(fan->Shutdown(absl::Seconds(5)));
}

// The old replica is down at the move: its retirement is bounded by the flush timeout and holds
// up neither the move nor the new shard.
TEST_F(UploadFanoutTest, RetiringAnUnreachableReplicaIsBoundedAndBlocksNothing) {
  fake_.Stop();
  absl::StatusOr<std::unique_ptr<UploadFanout>> made =
      UploadFanout::Create(Options(), {fake_.address()}, nullptr);
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<UploadFanout> fan = *std::move(made);
  Table t = MakeTable({Counter("mlx5_0", "port_rcv_data")});
  fan->OnSnapshot(Snap(t, 1, 100));
  const absl::Time start = absl::Now();
  ASSERT_TRUE(fan->MoveNodeTo({second_.address()}, absl::Milliseconds(500)).ok());
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(400));
  EXPECT_EQ(fan->Retiring(), 1u);
  fan->OnSnapshot(Snap(t, 2, 101));
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return Contents(second_).batches.size() == 1; }, kWait))
      << logs_.All();
  ASSERT_TRUE(FakeAggregator::WaitFor([&] { return fan->Retiring() == 0; }, absl::Seconds(5)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  EXPECT_EQ(logs_.Count("not everything acknowledged"), 1) << logs_.All();
  EXPECT_TRUE(fan->Shutdown(absl::Seconds(5)));
}

// Both replicas down at shutdown: stopping waits one flush timeout, not one per replica.
TEST_F(UploadFanoutTest, ShutdownFlushesReplicasInParallel) {
  fake_.Stop();
  second_.Stop();
  auto fan = MakeFanout(nullptr);
  ASSERT_NE(fan, nullptr);
  fan->EnqueueCollectives(Collectives("job-a", 0, 10));
  const absl::Time start = absl::Now();
  EXPECT_FALSE(fan->Shutdown(absl::Seconds(2)));  // nothing acknowledged
  EXPECT_LT(absl::Now() - start, absl::Seconds(3.5));
}

}  // namespace
}  // namespace ringside::daemon
