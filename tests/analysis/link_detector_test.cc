#include "analysis/link_detector.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/analysis/fabric_sim.h"

namespace ringside::analysis {
namespace {

using testing::At;
using testing::CountActive;
using testing::First;
using testing::SimCounter;
using testing::SimState;

constexpr double kActive = 4, kDown = 1;  // infiniband_port/state ids

// One InfiniBand port of one node, sampled every 10 s: its state, its 8-bit saturating link_downed
// and its error counters.
class IbPortTest : public ::testing::Test {
 protected:
  // The port goes `up` (ACTIVE) or down at sample `i`, with `downs` link_downed increments since
  // the previous sample.
  void Sample(int i, bool up, uint64_t downs = 0) {
    d_.ObserveState(state_.At(At(i), up ? kActive : kDown), out_);
    d_.ObserveCounter(link_downed_.Step(At(i), downs), out_);
  }

  LinkDetector d_;
  std::vector<Finding> out_;
  SimState state_{"node-1", "infiniband_port", "mlx5_0", "1", "state"};
  SimCounter link_downed_{"node-1", "infiniband", "mlx5_0", "1", "link_downed", 8, true};
};

TEST_F(IbPortTest, OneIsolatedFlapIsLinkDownNotFlapping) {
  for (int i = 0; i < 5; ++i) Sample(i, true);
  Sample(5, false, 1);  // went down: link_downed counts it too
  Sample(6, true);
  for (int i = 7; i < 200; ++i) Sample(i, true);
  ASSERT_EQ(CountActive(out_, IncidentKind::kLinkDown), 1);
  EXPECT_EQ(CountActive(out_, IncidentKind::kLinkFlapping), 0);
  const Finding* open = First(out_, IncidentKind::kLinkDown, true);
  EXPECT_EQ(open->at, At(5));  // at the sample that showed it down
  EXPECT_EQ(open->entity.at("node"), "node-1");
  EXPECT_EQ(open->entity.at("device"), "mlx5_0");
  EXPECT_EQ(open->entity.at("port"), "1");
  EXPECT_EQ(open->severity, Severity::kCritical);
  const Finding* resolved = First(out_, IncidentKind::kLinkDown, false);
  ASSERT_NE(resolved, nullptr);
  EXPECT_EQ(resolved->at, At(6));
}

TEST_F(IbPortTest, TwoCyclesWithinTheWindowAreFlappingAtTheSampleAfterTheSecond) {
  for (int i = 0; i < 3; ++i) Sample(i, true);
  Sample(3, false, 1);
  Sample(4, true);
  Sample(10, false, 1);  // 70 s later, the second down
  ASSERT_EQ(CountActive(out_, IncidentKind::kLinkFlapping), 0);
  Sample(11, true);  // the sample that completes the second cycle
  const Finding* f = First(out_, IncidentKind::kLinkFlapping, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->at, At(11));
  EXPECT_EQ(f->evidence.at("cycles_in_window"), 2);
  EXPECT_EQ(f->entity.at("device"), "mlx5_0");
  // Quiet for 10 minutes: resolved, and not before.
  for (int i = 12; i <= 70; ++i) Sample(i, true);
  EXPECT_EQ(First(out_, IncidentKind::kLinkFlapping, false), nullptr);
  Sample(71, true);
  const Finding* r = First(out_, IncidentKind::kLinkFlapping, false);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->at, At(71));  // 600 s after the last transition at sample 11
}

TEST_F(IbPortTest, TwoCyclesFurtherApartThanTheWindowAreTwoLinkDowns) {
  Sample(0, true);
  Sample(1, false, 1);
  Sample(2, true);
  for (int i = 3; i < 70; ++i) Sample(i, true);
  Sample(70, false, 1);  // 690 s after the first down
  Sample(71, true);
  EXPECT_EQ(CountActive(out_, IncidentKind::kLinkFlapping), 0);
  EXPECT_EQ(CountActive(out_, IncidentKind::kLinkDown), 2);
}

TEST_F(IbPortTest, CyclesBetweenSamplesSeenOnlyByTheCounter) {
  for (int i = 0; i < 3; ++i) Sample(i, true);
  Sample(3, true, 1);  // down and back up between samples 2 and 3
  ASSERT_EQ(CountActive(out_, IncidentKind::kLinkDown), 1);
  const Finding* r = First(out_, IncidentKind::kLinkDown, false);
  ASSERT_NE(r, nullptr);  // raised and resolved at once
  EXPECT_EQ(r->at, At(3));
  EXPECT_EQ(CountActive(out_, IncidentKind::kLinkFlapping), 0);
  Sample(4, true);
  Sample(5, true, 1);  // a second one within 10 minutes
  const Finding* f = First(out_, IncidentKind::kLinkFlapping, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->at, At(5));
  EXPECT_EQ(f->evidence.at("cycles_seen_only_by_counters"), 2);
}

TEST_F(IbPortTest, CounterBeforeStateInTheSameSampleIsNotCountedTwice) {
  for (int i = 0; i < 3; ++i) Sample(i, true);
  // The aggregator happens to hand over the counter step before the state sample.
  d_.ObserveCounter(link_downed_.Step(At(3), 1), out_);
  d_.ObserveState(state_.At(At(3), kDown), out_);
  Sample(4, true);
  for (int i = 5; i < 20; ++i) Sample(i, true);
  EXPECT_EQ(CountActive(out_, IncidentKind::kLinkDown), 1);
  EXPECT_EQ(CountActive(out_, IncidentKind::kLinkFlapping), 0);
}

TEST_F(IbPortTest, APortFirstSeenDownIsNotRaised) {
  for (int i = 0; i < 50; ++i) Sample(i, false);
  EXPECT_TRUE(out_.empty());
  Sample(50, true);
  Sample(51, false);  // now it was up
  EXPECT_EQ(CountActive(out_, IncidentKind::kLinkDown), 1);
}

TEST_F(IbPortTest, ASaturatedLinkDownedCounterAddsNoCycles) {
  SimCounter stuck{"node-1", "infiniband", "mlx5_0", "1", "link_downed", 8, true, 255};
  for (int i = 0; i < 100; ++i) {
    d_.ObserveState(state_.At(At(i), kActive), out_);
    d_.ObserveCounter(stuck.Step(At(i), i % 3), out_);  // it would count, but it is stuck at 255
  }
  EXPECT_TRUE(out_.empty());
}

TEST(LinkDetectorTest, EventsRaiseAtOnceAndMatchTheSampleAndCounters) {
  PortDirectory dir;
  dir.MapNetdev("node-2", "eth3", "mlx5_3", "1");
  LinkDetector d({}, &dir);
  std::vector<Finding> out;
  SimState state{"node-2", "infiniband_port", "mlx5_3", "1", "state"};
  SimState oper{"node-2", "netdev", "eth3", "", "operstate"};
  SimCounter downed{"node-2", "infiniband", "mlx5_3", "1", "link_downed", 8, true};
  // 32-bit, wrapping: at its maximum, so the flap's increment wraps it to 0.
  SimCounter carrier{"node-2", "netdev", "eth3", "", "carrier_down_count", 32, false, 4294967295u};
  SimCounter phy{"node-2", "ethtool", "eth3", "", "link_down_events_phy"};
  auto sample = [&](int i, uint64_t downs) {
    d.ObserveState(state.At(At(i), kActive), out);
    d.ObserveState(oper.At(At(i), 6), out);
    d.ObserveCounter(downed.Step(At(i), downs), out);
    d.ObserveCounter(carrier.Step(At(i), downs), out);  // wraps past 2^32 on the way
    d.ObserveCounter(phy.Step(At(i), downs), out);
  };
  for (int i = 0; i < 5; ++i) sample(i, 0);
  // A 2-second flap between samples 4 and 5, seen by netlink as it happened.
  LinkEvent down{"node-2",       "netlink",       "eth3", "", At(4) + absl::Seconds(3),
                 LinkState::kUp, LinkState::kDown};
  d.ObserveEvent(down, out);
  ASSERT_EQ(CountActive(out, IncidentKind::kLinkDown), 1);  // at once, not at the next sample
  EXPECT_EQ(out.back().at, At(4) + absl::Seconds(3));
  EXPECT_EQ(out.back().entity.at("netdev"), "eth3");
  EXPECT_EQ(out.back().entity.at("device"), "mlx5_3");
  LinkEvent up = down;
  up.time = At(4) + absl::Seconds(5);
  up.from = LinkState::kDown;
  up.to = LinkState::kUp;
  d.ObserveEvent(up, out);
  ASSERT_NE(First(out, IncidentKind::kLinkDown, false), nullptr);
  // Three counters count the same flap: still one cycle.
  for (int i = 5; i < 30; ++i) sample(i, i == 5 ? 1 : 0);
  EXPECT_EQ(CountActive(out, IncidentKind::kLinkDown), 1);
  EXPECT_EQ(CountActive(out, IncidentKind::kLinkFlapping), 0);
  // A second flap, this time only counted (shorter than netlink could report): flapping.
  sample(30, 1);
  const Finding* f = First(out, IncidentKind::kLinkFlapping, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->at, At(30));
  EXPECT_EQ(f->evidence.at("cycles_in_window"), 2);
  EXPECT_EQ(f->evidence.at("cycles_seen_by_events"), 1);
}

TEST(LinkDetectorTest, FlappingResolvesByAdvanceWhenNoSamplesCome) {
  LinkDetector d;
  std::vector<Finding> out;
  LinkEvent e{"node-3", "verbs", "mlx5_1", "1", At(0), LinkState::kUp, LinkState::kDown};
  for (int i = 0; i < 4; ++i) {
    e.time = At(0) + absl::Seconds(2 * i);
    e.from = i % 2 ? LinkState::kDown : LinkState::kUp;
    e.to = i % 2 ? LinkState::kUp : LinkState::kDown;
    d.ObserveEvent(e, out);
  }
  ASSERT_EQ(CountActive(out, IncidentKind::kLinkFlapping), 1);
  EXPECT_EQ(First(out, IncidentKind::kLinkFlapping, true)->at, At(0) + absl::Seconds(6));
  d.Advance(At(0) + absl::Minutes(9), out);
  EXPECT_EQ(First(out, IncidentKind::kLinkFlapping, false), nullptr);
  d.Advance(At(0) + absl::Minutes(11), out);
  EXPECT_NE(First(out, IncidentKind::kLinkFlapping, false), nullptr);
}

TEST(LinkDetectorTest, NvlinkDown) {
  LinkDetector d;
  std::vector<Finding> out;
  SimState st{"node-4", "nvlink", "2", "7", "link_state"};
  d.ObserveState(st.At(At(0), 1), out);
  d.ObserveState(st.At(At(1), 0), out);
  const Finding* f = First(out, IncidentKind::kLinkDown, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->entity.at("gpu"), "2");
  EXPECT_EQ(f->entity.at("link"), "7");
  EXPECT_EQ(f->summary, "gpu 2 link 7 on node-4 went down (sample)");
}

// --- link_degraded ---------------------------------------------------------------------------

TEST(LinkDegradedTest, SymbolErrorRateAboveTheNvsentinelBoundOverTheUfmWindow) {
  LinkDetector d;
  std::vector<Finding> out;
  SimCounter sym{"node-5", "infiniband", "mlx5_2", "1", "symbol_error", 16, true, 65000};
  int i = 0;
  for (; i < 30; ++i) d.ObserveCounter(sym.Step(At(i), i % 17 == 0 ? 1 : 0), out);  // healthy
  ASSERT_TRUE(out.empty());
  // 5 errors a sample (1,800/hour): above 120/hour; with the two earlier ones, 27 errors in the
  // 12-minute window pass the limit of 24 at the fifth sample.
  int opened_at = -1;
  for (int k = 0; k < 10; ++k, ++i) {
    d.ObserveCounter(sym.Step(At(i), 5), out);
    if (opened_at < 0 && CountActive(out, IncidentKind::kLinkDegraded) > 0) opened_at = k;
  }
  EXPECT_EQ(opened_at, 4);
  const Finding* f = First(out, IncidentKind::kLinkDegraded, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kCritical);
  EXPECT_EQ(f->entity.at("device"), "mlx5_2");
  EXPECT_EQ(f->evidence.at("symbol_error_in_window_limit"), 24);
  EXPECT_EQ(f->evidence.at("symbol_error_in_window"), 27);
  // Clean again: resolved 5 minutes after the last breach.
  const int last_burst = i - 1;
  for (; i < last_burst + 100; ++i) d.ObserveCounter(sym.Step(At(i), 0), out);
  const Finding* r = First(out, IncidentKind::kLinkDegraded, false);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->at, At(last_burst) + absl::Minutes(5));
}

// Issue #25: symbol_error rises 12 every 250 ms (48/s) from just before a scheduled sample,
// sampled every second, plus the early sample the agent takes when its 100 ms watch sees an
// error counter move: here 37 ms after each scheduled sample, the first catching one increment.
// The rates the incident shows are the counter's, not 12 / 37 ms = 324/s.
TEST(LinkDegradedTest, AnEarlySampleMsAfterTheLastDoesNotMakeTheRateOfOneIncrement) {
  LinkDetector d;
  std::vector<Finding> out;
  SimCounter sym{"node-05", "infiniband", "mlx5_0", "1", "symbol_error", 64, false};
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  const absl::Time first = t0 + absl::Milliseconds(980);  // increments at first + 250 ms × k
  uint64_t counted = 0;
  auto step_to = [&](absl::Time t) {  // the counter read at `t`: every increment due by then
    const uint64_t due =
        t < first
            ? 0
            : static_cast<uint64_t>(absl::FDivDuration(t - first, absl::Milliseconds(250))) + 1;
    const uint64_t inc = 12 * (due - counted);
    counted = due;
    return sym.Step(t, inc);
  };
  for (int s = -3; s <= 0; ++s) d.ObserveCounter(step_to(t0 + absl::Seconds(s)), out);  // clean
  ASSERT_TRUE(out.empty());
  for (int s = 1; s <= 8; ++s) {
    const absl::Time scheduled = t0 + absl::Seconds(s) - absl::Milliseconds(30);
    d.ObserveCounter(step_to(scheduled), out);
    d.ObserveCounter(step_to(scheduled + absl::Milliseconds(37)), out);  // early
  }
  const Finding* last = nullptr;
  for (const Finding& x : out) {
    if (x.kind != IncidentKind::kLinkDegraded || !x.active) continue;
    last = &x;
    // Every rate a finding showed: none of one increment over 37 ms.
    if (x.evidence.count("symbol_error_per_s")) {
      EXPECT_LE(x.evidence.at("symbol_error_per_s"), 60) << x.summary;
    }
  }
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->severity, Severity::kCritical);  // more than 24 in 12 minutes, too
  ASSERT_TRUE(last->evidence.count("symbol_error_per_s")) << last->summary;
  EXPECT_NEAR(last->evidence.at("symbol_error_per_s"), 48, 6) << last->summary;
  EXPECT_EQ(last->evidence.at("symbol_error_in_window"), 48) << last->summary;
}

// A short first step after a quiet stretch is spread over the quiet time before it, up to
// rate_min_interval; a step of that length or longer is its own rate.
TEST(LinkDegradedTest, RatesOverAtLeastRateMinInterval) {
  LinkOptions o;
  o.rate_min_interval = absl::Seconds(2);
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  // The symbol_error_per_s of the last finding after 10 quiet 1 s steps and one of `last` with
  // `errors`.
  auto rate_after = [&](absl::Duration last, uint64_t errors) {
    LinkDetector d(o);
    std::vector<Finding> out;
    SimCounter sym{"node-1", "infiniband", "mlx5_0", "1", "symbol_error", 64, false};
    for (int s = 0; s <= 10; ++s) d.ObserveCounter(sym.Step(t0 + absl::Seconds(s), 0), out);
    d.ObserveCounter(sym.Step(t0 + absl::Seconds(10) + last, errors), out);
    const Finding* f = nullptr;
    for (const Finding& x : out) {
      if (x.kind == IncidentKind::kLinkDegraded && x.active) f = &x;
    }
    return f != nullptr && f->evidence.count("symbol_error_per_s")
               ? f->evidence.at("symbol_error_per_s")
               : -1.0;
  };
  EXPECT_DOUBLE_EQ(rate_after(absl::Milliseconds(100), 30), 15);  // 30 over the last 2 s
  EXPECT_DOUBLE_EQ(rate_after(absl::Seconds(2), 30), 15);
  EXPECT_DOUBLE_EQ(rate_after(absl::Seconds(3), 90), 30);  // its own step
  o.rate_min_interval = absl::ZeroDuration();  // off: the step's own rate, however short
  EXPECT_DOUBLE_EQ(rate_after(absl::Milliseconds(100), 30), 300);
}

TEST(LinkDegradedTest, ACounterStuckAtItsMaximumKeepsItOpenUntilCleared) {
  LinkDetector d;
  std::vector<Finding> out;
  SimCounter sym{"node-5", "infiniband", "mlx5_2", "1", "symbol_error", 16, true, 65400};
  int i = 0;
  for (; i < 6; ++i) d.ObserveCounter(sym.Step(At(i), 10), out);
  ASSERT_EQ(CountActive(out, IncidentKind::kLinkDegraded), 1);
  for (; i < 20; ++i) d.ObserveCounter(sym.Step(At(i), 10), out);  // reaches 65535 and sticks
  ASSERT_EQ(sym.raw(), 65535u);
  for (; i < 200; ++i) d.ObserveCounter(sym.Step(At(i), 0), out);  // blind, not clean
  EXPECT_EQ(First(out, IncidentKind::kLinkDegraded, false), nullptr);
  EXPECT_EQ(CountActive(out, IncidentKind::kLinkDegraded), 1);  // and nothing raised twice
  d.ObserveCounter(sym.Reset(At(i++), 0), out);                 // cleared
  const int cleared = i - 1;
  for (; i < 300; ++i) d.ObserveCounter(sym.Step(At(i), 0), out);
  const Finding* r = First(out, IncidentKind::kLinkDegraded, false);
  ASSERT_NE(r, nullptr);
  EXPECT_LE(r->at, At(cleared) + absl::Minutes(5));
}

TEST(LinkDegradedTest, SaturatedAndResetCountersRaiseNothing) {
  LinkDetector d;
  std::vector<Finding> out;
  SimCounter sym{"node-6", "infiniband", "mlx5_0", "1", "symbol_error", 16, true, 65535};
  SimCounter rcv{"node-6", "infiniband", "mlx5_0", "1", "port_rcv_errors", 16, true, 65535};
  SimCounter lli{"node-6", "infiniband", "mlx5_0", "1", "local_link_integrity_errors", 4, true, 15};
  for (int i = 0; i < 100; ++i) {  // stuck at their maximum: errors keep happening unseen
    d.ObserveCounter(sym.Step(At(i), 1000), out);
    d.ObserveCounter(rcv.Step(At(i), 1000), out);
    d.ObserveCounter(lli.Step(At(i), 3), out);
  }
  // Someone clears the counters (perfquery -R): a reset, not 65535 new errors.
  d.ObserveCounter(sym.Reset(At(100), 2), out);
  d.ObserveCounter(rcv.Reset(At(100), 0), out);
  d.ObserveCounter(lli.Reset(At(100), 1), out);
  for (int i = 101; i < 200; ++i) {
    d.ObserveCounter(sym.Step(At(i), 0), out);
    d.ObserveCounter(rcv.Step(At(i), 0), out);
    d.ObserveCounter(lli.Step(At(i), 0), out);
  }
  EXPECT_TRUE(out.empty()) << out.front().summary;
}

TEST(LinkDegradedTest, LocalLinkIntegrityAndLinkErrorRecovery) {
  LinkDetector d;
  std::vector<Finding> out;
  SimCounter ler{"node-7", "infiniband", "mlx5_0", "1", "link_error_recovery", 8, true};
  for (int i = 0; i < 6; ++i) d.ObserveCounter(ler.Step(At(i), 1), out);  // 6 in 60 s: > 5/min
  const Finding* f = First(out, IncidentKind::kLinkDegraded, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kWarning);
  SimCounter lli{"node-7", "infiniband", "mlx5_0", "1", "local_link_integrity_errors", 4, true};
  d.ObserveCounter(lli.Step(At(6), 1), out);
  ASSERT_EQ(CountActive(out, IncidentKind::kLinkDegraded), 2);  // escalated: an update
  EXPECT_EQ(out.back().severity, Severity::kCritical);
}

TEST(LinkDegradedTest, NvlinkReplayErrors) {
  LinkDetector d;
  std::vector<Finding> out;
  SimCounter replay{"node-8", "nvlink", "0", "3", "replay_errors"};
  SimCounter crc{"node-8", "nvlink", "0", "3", "crc_flit_errors"};
  for (int i = 0; i < 60; ++i) {
    d.ObserveCounter(replay.Step(At(i), 0), out);
    d.ObserveCounter(crc.Step(At(i), i % 7 == 0 ? 1 : 0), out);  // single CRC errors: normal
  }
  ASSERT_TRUE(out.empty());
  d.ObserveCounter(replay.Step(At(60), 1), out);
  const Finding* f = First(out, IncidentKind::kLinkDegraded, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->at, At(60));
  EXPECT_EQ(f->severity, Severity::kCritical);
  EXPECT_EQ(f->entity.at("gpu"), "0");
  EXPECT_EQ(f->entity.at("link"), "3");
  EXPECT_EQ(f->evidence.at("replay_errors_in_window"), 1);
  for (int i = 61; i < 100; ++i) d.ObserveCounter(replay.Step(At(i), 0), out);
  const Finding* r = First(out, IncidentKind::kLinkDegraded, false);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->at, At(90));  // clean for 5 minutes
}

TEST(LinkDegradedTest, NvlinkCrcOnlyAtAHundredASecond) {
  LinkDetector d;
  std::vector<Finding> out;
  SimCounter crc{"node-8", "nvlink", "1", "0", "crc_data_errors"};
  for (int i = 0; i < 6; ++i) d.ObserveCounter(crc.Step(At(i), 900), out);  // 90/s
  EXPECT_TRUE(out.empty());
  for (int i = 6; i < 12; ++i) d.ObserveCounter(crc.Step(At(i), 1500), out);  // 150/s
  const Finding* f = First(out, IncidentKind::kLinkDegraded, true);
  ASSERT_NE(f, nullptr);
  EXPECT_GE(f->evidence.at("crc_data_errors_per_s"), 100);
}

TEST(LinkDegradedTest, NvlinkEffectiveBerPacked) {
  LinkDetector d;
  std::vector<Finding> out;
  SimState ber{"node-9", "nvlink", "0", "1", "effective_ber"};
  d.ObserveState(ber.At(At(0), (15 << 8) | 255), out);  // "zero"
  d.ObserveState(ber.At(At(1), (1 << 8) | 13), out);    // 1e-13
  EXPECT_TRUE(out.empty());
  d.ObserveState(ber.At(At(2), (3 << 8) | 11), out);  // 3e-11
  ASSERT_EQ(CountActive(out, IncidentKind::kLinkDegraded), 1);
}

TEST(LinkDetectorTest, RestoredLinkDownResolvesWhenTheLinkIsUp) {
  LinkDetector d;
  Finding open;
  open.kind = IncidentKind::kLinkDown;
  open.entity = {{"node", "node-1"}, {"device", "mlx5_0"}, {"port", "1"}};
  open.at = At(0);
  ASSERT_TRUE(d.Restore(open));
  std::vector<Finding> out;
  SimState st{"node-1", "infiniband_port", "mlx5_0", "1", "state"};
  d.ObserveState(st.At(At(1), kDown), out);  // still down: nothing new
  EXPECT_TRUE(out.empty());
  d.ObserveState(st.At(At(2), kActive), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].active);
  EXPECT_EQ(FindingKey(out[0]), FindingKey(open));
  Finding other;
  other.kind = IncidentKind::kPauseStorm;
  EXPECT_FALSE(d.Restore(other));
}

TEST(LinkDetectorTest, StaleLinksResolve) {
  LinkDetector d;
  std::vector<Finding> out;
  SimState st{"node-1", "infiniband_port", "mlx5_0", "1", "state"};
  d.ObserveState(st.At(At(0), kActive), out);
  d.ObserveState(st.At(At(1), kDown), out);
  ASSERT_EQ(CountActive(out, IncidentKind::kLinkDown), 1);
  d.Advance(At(1) + absl::Minutes(31), out);
  ASSERT_NE(First(out, IncidentKind::kLinkDown, false), nullptr);
  EXPECT_EQ(First(out, IncidentKind::kLinkDown, false)->evidence.at("stale"), 1);
  EXPECT_EQ(d.links(), 0u);
}

// Advance visits every link only once per sweep interval (stale_after / 30, 1-10 s) and what is
// open or pending at every call: a flapping link still resolves at the first call after
// flap_quiet, and a stale one within one sweep interval of stale_after.
TEST(LinkDetectorTest, BetweenSweepsWhatIsOpenResolvesOnTimeAndStaleLinksWithinASweep) {
  LinkOptions o;
  o.flap_quiet = absl::Seconds(30);
  o.stale_after = absl::Minutes(5);
  LinkDetector d(o);
  ASSERT_EQ(d.sweep_interval(), absl::Seconds(10));
  std::vector<Finding> out;
  const absl::Time t0 = At(0);
  d.Advance(t0, out);  // the first call sweeps
  // B: down, then nothing more (stale after 5 minutes).
  SimState b{"node-2", "infiniband_port", "mlx5_0", "1", "state"};
  d.ObserveState(b.At(t0, kActive), out);
  d.ObserveState(b.At(t0 + absl::Seconds(1), kDown), out);
  // A: flapping from events between two sweeps.
  LinkEvent e{"node-3", "verbs", "mlx5_1", "1", t0, LinkState::kUp, LinkState::kDown};
  for (int i = 0; i < 4; ++i) {
    e.time = t0 + absl::Seconds(2 + 2 * i);
    e.from = i % 2 ? LinkState::kDown : LinkState::kUp;
    e.to = i % 2 ? LinkState::kUp : LinkState::kDown;
    d.ObserveEvent(e, out);
  }
  ASSERT_EQ(CountActive(out, IncidentKind::kLinkFlapping), 1);
  ASSERT_EQ(d.links(), 2u);
  absl::Time stale_at = absl::InfinitePast();
  for (int s = 1; s <= 330; ++s) {
    const absl::Time now = t0 + absl::Seconds(s);
    const size_t before = out.size();
    d.Advance(now, out);
    for (size_t i = before; i < out.size(); ++i) {
      if (out[i].kind == IncidentKind::kLinkFlapping && !out[i].active) {
        // The last transition was at t0 + 8 s: quiet for 30 s at t0 + 38 s, not a sweep time.
        EXPECT_EQ(now, t0 + absl::Seconds(38));
      }
      if (out[i].kind == IncidentKind::kLinkDown && !out[i].active &&
          out[i].entity.at("node") == "node-2") {
        stale_at = now;
      }
    }
  }
  ASSERT_NE(First(out, IncidentKind::kLinkFlapping, false), nullptr);
  // B's last input was at t0 + 1 s: stale from t0 + 301 s, found by a sweep at most 10 s later.
  EXPECT_GE(stale_at, t0 + absl::Seconds(301));
  EXPECT_LE(stale_at, t0 + absl::Seconds(311));
  EXPECT_EQ(d.links(), 0u);  // A went stale too (last input t0 + 8 s)
}

}  // namespace
}  // namespace ringside::analysis

namespace ringside::analysis {
namespace {

// The fabric scan (collectors/ibmad, source "ibmad") reads a switch port's PMA counters and
// PortInfo state under the sysfs names: the switch end of a link is judged by the same rules, on
// the switch's GUID and port.
TEST(FabricScanTest, ASwitchPortFlappingAndTakingSymbolErrorsIsRaisedOnTheSwitchPort) {
  LinkDetector d;
  std::vector<Finding> out;
  const std::string guid = "0x0002c90300a1b2c3";
  SimState state{"node-1", "ibmad", guid, "17", "state"};
  SimCounter downed{"node-1", "ibmad", guid, "17", "link_downed", 8, true};
  SimCounter sym{"node-1", "ibmad", guid, "17", "symbol_error", 16, true};
  for (int i = 0; i < 60; ++i) {
    const bool down = i == 10 || i == 20;
    d.ObserveState(state.At(At(i), down ? kDown : kActive), out);
    d.ObserveCounter(downed.Step(At(i), down ? 1 : 0), out);
    d.ObserveCounter(sym.Step(At(i), i >= 40 ? 5 : 0), out);
  }
  const Finding* flap = First(out, IncidentKind::kLinkFlapping, true);
  ASSERT_NE(flap, nullptr);
  EXPECT_EQ(flap->at, At(21));  // the sample after the second down→up cycle
  EXPECT_EQ(flap->entity.at("device"), guid);
  EXPECT_EQ(flap->entity.at("port"), "17");
  const Finding* degraded = First(out, IncidentKind::kLinkDegraded, true);
  ASSERT_NE(degraded, nullptr);
  EXPECT_EQ(degraded->entity.at("device"), guid);
  EXPECT_TRUE(LinkDetector::Uses("ibmad", "port_rcv_errors"));
  EXPECT_TRUE(LinkDetector::Uses("ibmad", "phys_state"));
  EXPECT_FALSE(LinkDetector::Uses("ibmad", "port_xmit_data"));
}

}  // namespace
}  // namespace ringside::analysis
