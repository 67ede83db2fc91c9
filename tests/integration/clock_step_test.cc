// Issue #18 item 3, the wall clock stepping (an NTP step) under a real ringside-agent and
// ringside-aggregator on loopback. Neither process can have its clock changed for real here, so
// both run under tests/testing/clock_step_shim.c (LD_PRELOAD): CLOCK_REALTIME, gettimeofday,
// time and Abseil's realtime futex waits see an offset the test rewrites while they run. The
// clocks step back and forward by minutes, independently on the two processes, on a fault-free
// generated sysfs tree whose congestion counters keep moving. Then:
//   - no incident is raised (the Query API lists none),
//   - no per-second rate the aggregator exports is negative,
//   - samples keep arriving through every step (no window stuck waiting for the clock to come
//     back), none is refused as out of order, and the agent's one session is never restarted,
//   - a real fault after the steps (the IB port goes down, written in place) opens link_down,
//   - staleness is an interval: the aggregator's step forward marks no node stale, its step back
//     does not keep a dead one fresh,
//   - after the agent's step back, a link event is not older than the samples before it,
//   - the plugin socket's frame timeout and rate limit ignore the agent's step forward.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/record_proto.h"
#include "sim/sysfs_tree.h"
#include "tests/testing/clock_step.h"
#include "tests/testing/process.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/unix_socket.h"

namespace ringside {
namespace {

using testing::BinaryPath;
namespace rc = ::ringside::collectors;

// The plugin socket's limits for these tests: a burst of 100 records, then 10 a second.
constexpr double kPluginRate = 10;
constexpr double kPluginBurst = 100;

std::string Frame(uint64_t first_seq, int n, const char* job) {
  std::vector<rc::CollectiveRecordFields> v;
  for (int i = 0; i < n; ++i) {
    rc::CollectiveRecordFields r;
    r.rank = 1;
    r.nranks = 4;
    r.pid = 4242;
    r.comm_id = 99;
    r.seq = first_seq + static_cast<uint64_t>(i);
    r.bytes = 1 << 20;
    r.enqueue_unix_nanos = absl::ToUnixNanos(absl::Now());
    r.channels = 2;
    r.job_id.Set(job);
    r.host.Set("container-clock");
    r.function.Set("AllReduce");
    v.push_back(r);
  }
  rc::BatchHeaderFields h;
  h.job_id.Set(job);
  return *rc::EncodeFrame(h, v);
}

// Every match of `pattern`'s first group in `text`, as int64.
std::vector<int64_t> AllInts(const std::string& text, const std::string& pattern) {
  std::vector<int64_t> out;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back(std::stoll((*it)[1].str()));
  }
  return out;
}

// Occurrences of `needle` in `text`.
size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

int PortFromLog(testing::Process& p, const std::string& pattern) {
  std::smatch m;
  const std::string err = p.Stderr();
  if (!std::regex_search(err, m, std::regex(pattern))) return 0;
  return std::stoi(m[1].str());
}

double Sum(const testing::PromText& t, const std::string& name,
           const std::map<std::string, std::string>& match = {}) {
  double v = 0;
  for (const testing::PromSample& s : t.Find(name, match)) v += s.value;
  return v;
}

class ClockStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(agg_clock_.ok());
    ASSERT_TRUE(agent_clock_.ok());
    sim::HcaSpec hca;  // InfiniBand, with the congestion hw_counters
    ASSERT_TRUE(tree_writer_.AddHca(hca).ok());
    agg_ = std::make_unique<testing::Process>(
        agg_clock_.Wrap({BinaryPath("daemon/ringside-aggregator"), "--listen=127.0.0.1:0",
                         "--http-listen=127.0.0.1:0", "--state-dir=" + dir_.path() + "/state",
                         "--stale-after=3s"}),
        dir_.path());
    ASSERT_TRUE(agg_->WaitForStderr("HTTP (/metrics", absl::Seconds(30))) << agg_->Stderr();
    grpc_ = PortFromLog(*agg_, "ingest \\(gRPC\\) listening on \\S+ \\(port ([0-9]+)\\)");
    http_ = PortFromLog(*agg_, "HTTP \\S+ \\S+ \\S+ listening on \\S+ \\(port ([0-9]+)\\)");
    ASSERT_GT(grpc_, 0) << agg_->Stderr();
    ASSERT_GT(http_, 0) << agg_->Stderr();
    agent_ = std::make_unique<testing::Process>(
        agent_clock_.Wrap({BinaryPath("daemon/ringside-agent"), "--sysfs-root=" + tree_.path(),
                           "--node-name=stepper", absl::StrCat("--aggregator=127.0.0.1:", grpc_),
                           "--interval=100ms", "--listen=127.0.0.1:0", "--nvml-library=",
                           "--ethtool-source=off", "--link-events=true",
                           "--link-state-interval=100ms", "--collectives-socket=" + socket_,
                           absl::StrCat("--collectives-rate=", kPluginRate),
                           absl::StrCat("--collectives-burst=", kPluginBurst),
                           "--upload-backoff-max=500ms"}),
        dir_.path());
    ASSERT_TRUE(agent_->WaitForStderr("serving /metrics on", absl::Seconds(20)))
        << agent_->Stderr();
    agent_http_ = PortFromLog(*agent_, "serving /metrics on \\S+ \\(port ([0-9]+)\\)");
    ASSERT_GT(agent_http_, 0) << agent_->Stderr();
  }

  void TearDown() override {
    if (agent_) {
      agent_->Signal(SIGTERM);
      EXPECT_EQ(agent_->Wait(absl::Seconds(20)), 0) << agent_->Stderr();
    }
    if (agg_) {
      agg_->Signal(SIGTERM);
      EXPECT_EQ(agg_->Wait(absl::Seconds(20)), 0) << agg_->Stderr();
    }
  }

  testing::PromText Metrics() {
    return testing::ParsePromText(testing::HttpGet(http_, "/metrics"));
  }
  testing::PromText AgentMetrics() {
    return testing::ParsePromText(testing::HttpGet(agent_http_, "/metrics"));
  }
  // ringside_aggregator_node_stale of the agent's node (-1 when not exported).
  double NodeStale() {
    const std::vector<testing::PromSample> v =
        Metrics().Find("ringside_aggregator_node_stale", {{"node", "stepper"}});
    return v.empty() ? -1 : v[0].value;
  }
  // The newest sample time the aggregator holds for the agent's node.
  int64_t LastSampleNanos() {
    const std::vector<int64_t> t =
        AllInts(testing::HttpGet(http_, "/api/v1/series?node=stepper"),
                "\"last_time_unix_nanos\":(-?[0-9]+)");
    return t.empty() ? 0 : *std::max_element(t.begin(), t.end());
  }
  // The times of the sysfs port-state events of mlx5_0 port 1 to `to` the aggregator received.
  std::vector<int64_t> PortEventNanos(const std::string& to) {
    return AllInts(testing::HttpGet(http_, "/api/v1/link_events?node=stepper"),
                   "\"time_unix_nanos\":\"(-?[0-9]+)\",\"source\":\"sysfs\",\"device\":"
                   "\"mlx5_0\",\"port\":\"1\",\"from\":\"[A-Z_]+\",\"to\":\"" +
                       to + "\"");
  }

  // Runs for `d` with the congestion counters moving (in place, as the kernel's files change),
  // scraping the aggregator every 200 ms: every exported per-second rate and paused ratio must be
  // >= 0. Returns the samples the aggregator took in meanwhile.
  double Traffic(absl::Duration d) {
    const double before = Sum(Metrics(), "ringside_aggregator_samples_received_total");
    const absl::Time end = absl::Now() + d;  // the test's own clock is never stepped
    while (absl::Now() < end) {
      counter_ += 1000;
      for (const char* c : {"np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled"}) {
        EXPECT_TRUE(tree_writer_.SetHwCounter("mlx5_0", 1, c, counter_).ok());
      }
      const testing::PromText m = Metrics();
      for (const testing::PromSample& s : m.samples) {
        const bool rate = s.name.find("_per_second") != std::string::npos ||
                          s.name == "ringside_pfc_paused_ratio";
        if (rate) {
          EXPECT_GE(s.value, 0) << s.name << " at step " << step_;
        }
        if (s.name == "ringside_aggregator_node_stale") {
          EXPECT_EQ(s.value, 0) << "a live node judged stale at step " << step_;
        }
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    return Sum(Metrics(), "ringside_aggregator_samples_received_total") - before;
  }

  testing::TempDir dir_;
  testing::TempDir tree_;
  sim::SysfsTreeWriter tree_writer_{tree_.path()};
  testing::ClockOffset agg_clock_{dir_.path() + "/agg.offset", CLOCK_STEP_SHIM};
  testing::ClockOffset agent_clock_{dir_.path() + "/agent.offset", CLOCK_STEP_SHIM};
  const std::string socket_ = dir_.path() + "/plugin.sock";
  std::unique_ptr<testing::Process> agg_;
  std::unique_ptr<testing::Process> agent_;
  int grpc_ = 0;
  int http_ = 0;
  int agent_http_ = 0;
  uint64_t counter_ = 0;
  std::string step_ = "start";
};

TEST_F(ClockStepTest, StepsBackAndForwardRaiseNothingAndStickNothing) {
  // Connected and sampling before the first step.
  ASSERT_TRUE(agent_->WaitForStderr("connected to", absl::Seconds(20))) << agent_->Stderr();
  ASSERT_GT(Traffic(absl::Seconds(2)), 0) << agg_->Stderr() << agent_->Stderr();

  // Each step, then 2.5 s of traffic (25 sampling cycles): samples must keep coming.
  struct Step {
    const char* what;
    testing::ClockOffset* clock;
    absl::Duration offset;
  };
  const std::vector<Step> steps = {
      {"agent back 5 min", &agent_clock_, absl::Minutes(-5)},
      {"aggregator forward 7 min", &agg_clock_, absl::Minutes(7)},
      {"agent forward 10 min (+5)", &agent_clock_, absl::Minutes(5)},
      {"aggregator back 10 min (-3)", &agg_clock_, absl::Minutes(-3)},
      {"agent back 8 min (-3)", &agent_clock_, absl::Minutes(-3)},
      {"aggregator forward 18 min (+15): 10 min ahead of the agent", &agg_clock_,
       absl::Minutes(15)},
  };
  for (const Step& s : steps) {
    step_ = s.what;
    s.clock->Set(s.offset);
    const double taken = Traffic(absl::Milliseconds(2500));
    // 25 cycles of a few dozen series; a stalled sampler, uploader or ingest takes nothing.
    EXPECT_GT(taken, 100) << "after " << s.what << "\n" << agg_->Stderr() << agent_->Stderr();
  }

  const testing::PromText m = Metrics();
  EXPECT_EQ(Sum(m, "ringside_aggregator_samples_rejected_total", {{"reason", "out_of_order"}}), 0)
      << "samples refused as older than the series' last one";
  EXPECT_EQ(Sum(m, "ringside_aggregator_sessions_started_total"), 1)
      << "a clock step restarted the agent's session\n" << agent_->Stderr();
  EXPECT_EQ(Sum(m, "ringside_aggregator_sequence_gap_messages_total"), 0);
  EXPECT_EQ(Sum(m, "ringside_incident_changes_total"), 0) << agg_->Stderr();
  EXPECT_EQ(testing::HttpGet(http_, "/api/v1/incidents?limit=100"), "[]\n");
  // Nor a stall reported, nor a node judged stale (--stale-after=3s).
  EXPECT_EQ(agg_->Stderr().find("stuck"), std::string::npos) << agg_->Stderr();
  EXPECT_EQ(agg_->Stderr().find("is stale"), std::string::npos) << agg_->Stderr();
  // Rates were exported at all (so the >= 0 checks above checked something).
  EXPECT_FALSE(m.Find("ringside_roce_ecn_marked_packets_per_second").empty()) << m.samples.size();

  // A real fault after all that is still seen: the port goes down, in place.
  step_ = "port down";
  ASSERT_TRUE(tree_writer_.SetPortState("mlx5_0", 1, 1, 2).ok());
  EXPECT_TRUE(agg_->WaitForStderr("opened: link_down", absl::Seconds(15)))
      << agg_->Stderr() << agent_->Stderr();
  const std::string incidents = testing::HttpGet(http_, "/api/v1/incidents?limit=100");
  EXPECT_NE(incidents.find("\"kind\":\"link_down\""), std::string::npos) << incidents;
}

// Staleness is an interval (--stale-after=3s here), on the aggregator's monotonic clock: its
// step forward of 7 minutes while the agent is silent (SIGSTOP) marks nothing stale, and its
// step back of 10 minutes right after the agent died does not keep the node fresh.
TEST_F(ClockStepTest, StalenessIgnoresTheAggregatorsSteps) {
  ASSERT_TRUE(agent_->WaitForStderr("connected to", absl::Seconds(20))) << agent_->Stderr();
  ASSERT_GT(Traffic(absl::Seconds(1)), 0) << agg_->Stderr() << agent_->Stderr();
  ASSERT_EQ(NodeStale(), 0);

  step_ = "aggregator forward 7 min, agent silent";
  agent_->Signal(SIGSTOP);
  agg_clock_.Set(absl::Minutes(7));
  const absl::Time end = absl::Now() + absl::Milliseconds(1500);
  int scrapes = 0;
  while (absl::Now() < end) {
    const testing::PromText m = Metrics();
    EXPECT_EQ(Sum(m, "ringside_aggregator_node_stale", {{"node", "stepper"}}), 0)
        << "stale " << (absl::Now() - (end - absl::Milliseconds(1500))) << " after the step";
    EXPECT_EQ(Sum(m, "ringside_aggregator_nodes_stale"), 0);
    ++scrapes;
    absl::SleepFor(absl::Milliseconds(100));
  }
  agent_->Signal(SIGCONT);
  EXPECT_GE(scrapes, 10);
  EXPECT_GT(Traffic(absl::Seconds(1)), 0) << agg_->Stderr() << agent_->Stderr();
  EXPECT_EQ(agg_->Stderr().find("is stale"), std::string::npos) << agg_->Stderr();
  // Nor is the analysis flush loop, idle while the agent was stopped, reported stuck.
  EXPECT_EQ(agg_->Stderr().find("stuck"), std::string::npos) << agg_->Stderr();

  // The agent dies; at once the aggregator's clock steps back 10 minutes (to -3): the node must
  // still be judged stale after --stale-after (3 s), not after the step's length.
  step_ = "agent gone, aggregator back 10 min";
  agent_->Signal(SIGTERM);
  EXPECT_EQ(agent_->Wait(absl::Seconds(20)), 0) << agent_->Stderr();
  agent_.reset();
  const absl::Time gone = absl::Now();
  agg_clock_.Set(absl::Minutes(-3));
  while (NodeStale() != 1 && absl::Now() < gone + absl::Seconds(8)) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(NodeStale(), 1) << "a dead node kept fresh by the step back\n" << agg_->Stderr();
  const absl::Duration took = absl::Now() - gone;
  EXPECT_GE(took, absl::Milliseconds(2500)) << "stale before --stale-after";
  EXPECT_LE(took, absl::Seconds(5)) << "--stale-after is 3s, housekeeping every 500ms";
  EXPECT_TRUE(agg_->WaitForStderr("node stepper is stale", absl::Seconds(2))) << agg_->Stderr();
}

// Timed waits in progress when the wall clock steps back: Debian's Abseil times
// Mutex::AwaitWithTimeout against CLOCK_REALTIME, so such a wait would last the step's length
// (the shim makes Abseil's waits behave as on a real machine). The aggregator's analysis flush
// tick, idle (nothing queued to wake it), must keep ticking; the agent's uploader, waiting out its
// reconnect backoff while the aggregator is down, must reconnect as soon as it is back.
TEST_F(ClockStepTest, TimedWaitsInProgressIgnoreAStepBack) {
  ASSERT_TRUE(agent_->WaitForStderr("connected to", absl::Seconds(20))) << agent_->Stderr();
  ASSERT_GT(Traffic(absl::Seconds(1)), 0) << agg_->Stderr() << agent_->Stderr();

  step_ = "aggregator back 5 min, idle";
  agent_->Signal(SIGSTOP);
  absl::SleepFor(absl::Milliseconds(500));  // the flush thread back in its wait
  agg_clock_.Set(absl::Minutes(-5));
  const double before = Sum(Metrics(), "ringside_analysis_flushes_total");
  absl::SleepFor(absl::Milliseconds(3500));
  const double flushes = Sum(Metrics(), "ringside_analysis_flushes_total") - before;
  EXPECT_GE(flushes, 2) << "the analysis flush tick held by the step back\n" << agg_->Stderr();
  agent_->Signal(SIGCONT);
  agg_clock_.Set(absl::ZeroDuration());

  step_ = "aggregator down, agent back 5 min";
  agg_->Signal(SIGTERM);
  ASSERT_EQ(agg_->Wait(absl::Seconds(20)), 0) << agg_->Stderr();
  agg_.reset();
  absl::SleepFor(absl::Milliseconds(1500));  // the agent in its reconnect backoff (<= 500 ms)
  agent_clock_.Set(absl::Minutes(-5));
  absl::SleepFor(absl::Milliseconds(300));
  const size_t connects = Count(agent_->Stderr(), "connected to");
  agg_ = std::make_unique<testing::Process>(
      agg_clock_.Wrap({BinaryPath("daemon/ringside-aggregator"),
                       absl::StrCat("--listen=127.0.0.1:", grpc_), "--http-listen=127.0.0.1:0",
                       "--state-dir=" + dir_.path() + "/state", "--stale-after=3s"}),
      dir_.path());
  ASSERT_TRUE(agg_->WaitForStderr("HTTP (/metrics", absl::Seconds(30))) << agg_->Stderr();
  http_ = PortFromLog(*agg_, "HTTP \\S+ \\S+ \\S+ listening on \\S+ \\(port ([0-9]+)\\)");
  const absl::Time back = absl::Now();
  while (Count(agent_->Stderr(), "connected to") <= connects &&
         absl::Now() < back + absl::Seconds(20)) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  const absl::Duration took = absl::Now() - back;
  EXPECT_GT(Count(agent_->Stderr(), "connected to"), connects)
      << "the agent did not reconnect: its backoff wait held by the step back\n"
      << agent_->Stderr();
  EXPECT_LT(took, absl::Seconds(5)) << agent_->Stderr();
  std::fprintf(stderr, "reconnected %.2f s after the aggregator came back\n",
               absl::ToDoubleSeconds(took));
  EXPECT_GT(Traffic(absl::Seconds(1)), 0) << agg_->Stderr() << agent_->Stderr();
}

// After the agent's clock steps back 5 minutes, its link events are stamped on the sample times'
// clock: a port taken down and up gives events not older than the samples before them, in order,
// and link_down opens promptly.
TEST_F(ClockStepTest, LinkEventsAfterAStepBackAreNotOlderThanTheSamples) {
  ASSERT_TRUE(agent_->WaitForStderr("connected to", absl::Seconds(20))) << agent_->Stderr();
  ASSERT_GT(Traffic(absl::Seconds(1)), 0) << agg_->Stderr() << agent_->Stderr();
  step_ = "agent back 5 min";
  agent_clock_.Set(absl::Minutes(-5));
  ASSERT_GT(Traffic(absl::Milliseconds(1500)), 0) << agg_->Stderr() << agent_->Stderr();

  const int64_t sampled = LastSampleNanos();
  ASSERT_GT(sampled, 0);
  ASSERT_TRUE(PortEventNanos("LINK_STATE_DOWN").empty());
  const size_t ups_before = PortEventNanos("LINK_STATE_UP").size();
  const absl::Time down_at = absl::Now();
  ASSERT_TRUE(tree_writer_.SetPortState("mlx5_0", 1, 1, 2).ok());
  std::vector<int64_t> downs;
  while (downs.empty() && absl::Now() < down_at + absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(100));
    downs = PortEventNanos("LINK_STATE_DOWN");
  }
  ASSERT_EQ(downs.size(), 1u) << testing::HttpGet(http_, "/api/v1/link_events?node=stepper");
  EXPECT_GE(downs[0], sampled) << "the down event is "
                               << absl::Nanoseconds(sampled - downs[0])
                               << " older than the last sample before it";
  EXPECT_LE(downs[0], LastSampleNanos() + absl::ToInt64Nanoseconds(absl::Seconds(1)))
      << "the down event is ahead of the samples";
  EXPECT_TRUE(agg_->WaitForStderr("opened: link_down", absl::Seconds(5)))
      << agg_->Stderr() << agent_->Stderr();
  EXPECT_LE(absl::Now() - down_at, absl::Seconds(5));

  // And back up: the up event comes after the down, and after the samples taken meanwhile.
  ASSERT_GT(Traffic(absl::Milliseconds(500)), 0);
  const int64_t sampled_down = LastSampleNanos();
  ASSERT_TRUE(tree_writer_.SetPortState("mlx5_0", 1, 4, 5).ok());
  std::vector<int64_t> ups;
  const absl::Time up_at = absl::Now();
  while (ups.size() <= ups_before && absl::Now() < up_at + absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(100));
    ups = PortEventNanos("LINK_STATE_UP");
  }
  ASSERT_EQ(ups.size(), ups_before + 1)
      << testing::HttpGet(http_, "/api/v1/link_events?node=stepper");
  EXPECT_GE(ups.back(), sampled_down);
  EXPECT_GT(ups.back(), downs[0]);
  const testing::PromText m = Metrics();
  EXPECT_EQ(Sum(m, "ringside_aggregator_samples_rejected_total", {{"reason", "out_of_order"}}), 0);
  EXPECT_EQ(Sum(m, "ringside_aggregator_sessions_started_total"), 1) << agent_->Stderr();
}

// The plugin socket's frame timeout (10 s) and rate limit (a burst of 100, then 10 records/s per
// connection) are on the agent's monotonic clock: a frame half sent when the agent's clock steps
// 10 minutes forward is finished, not cut off; and the step does not refill a bucket.
TEST_F(ClockStepTest, PluginSocketIgnoresTheAgentsStepForward) {
  const absl::Time start = absl::Now();  // before the connections: their buckets start full
  const int framing = testing::ConnectUnix(socket_);
  const int flooding = testing::ConnectUnix(socket_);
  ASSERT_GE(framing, 0) << agent_->Stderr();
  ASSERT_GE(flooding, 0) << agent_->Stderr();
  auto records = [&](const char* job) {
    return Sum(AgentMetrics(), "ringside_agent_collective_records_total", {{"job", job}});
  };
  // One connection takes its burst.
  ASSERT_TRUE(testing::SendAll(flooding, Frame(0, 50, "job-rate")));
  ASSERT_TRUE(testing::SendAll(flooding, Frame(50, 50, "job-rate")));
  while (records("job-rate") < kPluginBurst && absl::Now() < start + absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_EQ(records("job-rate"), kPluginBurst) << agent_->Stderr();

  // The other sends half a frame; the clock steps; the rest follows 1.5 s later (the listener has
  // looked at the connection meanwhile: its poll timeout is at most 1 s).
  const std::string frame = Frame(0, 5, "job-frame");
  ASSERT_TRUE(testing::SendAll(framing, frame.substr(0, frame.size() / 2)));
  absl::SleepFor(absl::Milliseconds(200));
  step_ = "agent forward 10 min";
  agent_clock_.Set(absl::Minutes(10));
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_TRUE(testing::SendAll(framing, frame.substr(frame.size() / 2)));
  // And 100 more records on the first: at 10/s only what the seconds since its burst refilled
  // pass, not a new burst.
  EXPECT_TRUE(testing::SendAll(flooding, Frame(100, 50, "job-rate")));
  EXPECT_TRUE(testing::SendAll(flooding, Frame(150, 50, "job-rate")));
  const absl::Time sent = absl::Now();
  testing::PromText m;
  auto job = [&m](const char* name, const char* job) {
    return Sum(m, name, {{"job", job}});
  };
  while (absl::Now() < start + absl::Seconds(15)) {
    absl::SleepFor(absl::Milliseconds(50));
    m = AgentMetrics();
    if (job("ringside_agent_collective_records_total", "job-frame") +
                job("ringside_agent_collective_rate_limited_records_total", "job-frame") >= 5 &&
        job("ringside_agent_collective_records_total", "job-rate") +
                job("ringside_agent_collective_rate_limited_records_total", "job-rate") >= 200) {
      break;
    }
  }
  // The bucket refills only while records arrive: until `sent`, and the listener's read of them
  // (allowed half a second).
  const double elapsed = absl::ToDoubleSeconds(sent - start) + 0.5;
  EXPECT_EQ(Sum(m, "ringside_agent_collective_rejections_total"), 0)
      << "a connection was cut off\n" << agent_->Stderr();
  EXPECT_EQ(Sum(m, "ringside_agent_collective_connections"), 2);
  EXPECT_EQ(job("ringside_agent_collective_records_total", "job-frame"), 5)
      << "the frame finished after the step was not taken in whole\n" << agent_->Stderr();
  const double taken = job("ringside_agent_collective_records_total", "job-rate");
  EXPECT_LE(taken, kPluginBurst + kPluginRate * elapsed + 1)
      << "the step forward refilled the bucket (" << elapsed << " s since the connection)";
  EXPECT_EQ(taken + job("ringside_agent_collective_rate_limited_records_total", "job-rate"), 200);
  ::close(framing);
  ::close(flooding);
}

}  // namespace
}  // namespace ringside
