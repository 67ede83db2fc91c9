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
//   - a real fault after the steps (the IB port goes down, written in place) opens link_down.
#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sim/sysfs_tree.h"
#include "tests/testing/clock_step.h"
#include "tests/testing/process.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using testing::BinaryPath;

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
                         "--http-listen=127.0.0.1:0", "--state-dir=" + dir_.path() + "/state"}),
        dir_.path());
    ASSERT_TRUE(agg_->WaitForStderr("HTTP (/metrics", absl::Seconds(30))) << agg_->Stderr();
    grpc_ = PortFromLog(*agg_, "ingest \\(gRPC\\) listening on \\S+ \\(port ([0-9]+)\\)");
    http_ = PortFromLog(*agg_, "HTTP \\S+ \\S+ \\S+ listening on \\S+ \\(port ([0-9]+)\\)");
    ASSERT_GT(grpc_, 0) << agg_->Stderr();
    ASSERT_GT(http_, 0) << agg_->Stderr();
    agent_ = std::make_unique<testing::Process>(
        agent_clock_.Wrap({BinaryPath("daemon/ringside-agent"), "--sysfs-root=" + tree_.path(),
                           "--node-name=stepper", absl::StrCat("--aggregator=127.0.0.1:", grpc_),
                           "--interval=100ms", "--listen=", "--nvml-library=",
                           "--ethtool-source=off", "--link-events=false",
                           "--collectives-socket=", "--upload-backoff-max=500ms"}),
        dir_.path());
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
  std::unique_ptr<testing::Process> agg_;
  std::unique_ptr<testing::Process> agent_;
  int grpc_ = 0;
  int http_ = 0;
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

}  // namespace
}  // namespace ringside
