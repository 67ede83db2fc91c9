#include "analysis/pause_storm_detector.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/analysis/fabric_sim.h"

namespace ringside::analysis {
namespace {

using testing::At;
using testing::CountActive;
using testing::First;
using testing::SimCounter;

constexpr double kIntervalUs = 10e6;  // 10 s samples

// One RoCE port (netdev eth0 = mlx5_3 port 1) of a node, priority 3: the pause durations in µs
// (64-bit, started near 2^64 so that they wrap during the test), tx pause frames and the mlx5
// storm counters.
struct RocePort {
  explicit RocePort(const std::string& node)
      : rx(node, "ethtool", "eth0", "", "rx_prio3_pause_duration", 64, false,
           UINT64_MAX - 40'000'000, 3),
        tx(node, "ethtool", "eth0", "", "tx_prio3_pause_duration", 64, false,
           UINT64_MAX - 30'000'000, 3),
        tx_frames(node, "ethtool", "eth0", "", "tx_prio3_pause", 64, false, 0, 3),
        storm_warning(node, "ethtool", "eth0", "", "tx_pause_storm_warning_events") {}
  // Paused fractions of this sample's 10 s.
  void Sample(PauseStormDetector& d, absl::Time t, double rx_fraction, double tx_fraction,
              std::vector<Finding>& out, uint64_t storm_events = 0) {
    d.ObserveCounter(rx.Step(t, static_cast<uint64_t>(rx_fraction * kIntervalUs)), out);
    d.ObserveCounter(tx.Step(t, static_cast<uint64_t>(tx_fraction * kIntervalUs)), out);
    d.ObserveCounter(tx_frames.Step(t, static_cast<uint64_t>(tx_fraction * 20000)), out);
    d.ObserveCounter(storm_warning.Step(t, storm_events), out);
  }
  SimCounter rx, tx, tx_frames, storm_warning;
};

class PauseStormTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Topology> t = Topology::Parse(
        "# node  leaf\n"
        "node-a leaf-1\n"
        "node-b leaf-1\n"
        "node-c leaf-1\n"
        "node-d leaf-2\n");
    ASSERT_TRUE(t.ok()) << t.status();
    topology_ = *std::move(t);
    for (const char* n : {"node-a", "node-b", "node-c", "node-d"}) {
      dir_.MapNetdev(n, "eth0", "mlx5_3", "1");
      ports_.push_back(std::make_unique<RocePort>(n));
    }
    d_ = std::make_unique<PauseStormDetector>(PauseStormOptions{}, &topology_, &dir_);
  }

  Topology topology_;
  PortDirectory dir_;
  std::vector<std::unique_ptr<RocePort>> ports_;  // a, b, c, d
  std::unique_ptr<PauseStormDetector> d_;
  std::vector<Finding> out_;
  std::mt19937_64 rng_{7};
};

TEST_F(PauseStormTest, NamesThePortThatSendsPausesWithinThreeSamples) {
  std::uniform_real_distribution<double> noise(0, 0.05);
  const int start = 20;
  int detected = -1;
  for (int i = 0; i < 60; ++i) {
    const bool storm = i >= start && i < start + 20;
    // node-b's port cannot take traffic: it sends pauses nearly all the time. The switch backs up
    // and pauses node-a and node-c (same leaf) from the next sample; node-d is on another leaf.
    ports_[0]->Sample(*d_, At(i), storm && i > start ? 0.85 + noise(rng_) : noise(rng_),
                      noise(rng_), out_);
    ports_[1]->Sample(*d_, At(i), noise(rng_), storm ? 0.97 : noise(rng_), out_);
    ports_[2]->Sample(*d_, At(i), storm && i > start ? 0.9 : noise(rng_), noise(rng_), out_);
    ports_[3]->Sample(*d_, At(i), noise(rng_), noise(rng_), out_);
    if (detected < 0 && CountActive(out_, IncidentKind::kPauseStorm) > 0) detected = i;
  }
  ASSERT_GE(detected, start);
  EXPECT_LE(detected - start + 1, 3) << "detected at sample " << detected;
  const Finding* f = First(out_, IncidentKind::kPauseStorm, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->entity.at("node"), "node-b");
  EXPECT_EQ(f->entity.at("device"), "mlx5_3");
  EXPECT_EQ(f->entity.at("netdev"), "eth0");
  EXPECT_EQ(f->entity.at("priority"), "3");
  EXPECT_NEAR(f->evidence.at("origin_tx_pause_fraction"), 0.97, 0.01);
  EXPECT_EQ(f->evidence.count("spread/node-a/mlx5_3"), 1u);
  EXPECT_EQ(f->evidence.count("spread/node-c/mlx5_3"), 1u);
  EXPECT_EQ(f->evidence.count("spread/node-d/mlx5_3"), 0u);
  EXPECT_EQ(f->severity, Severity::kCritical);
  EXPECT_NE(f->summary.find("node-b mlx5_3 sends pauses"), std::string::npos) << f->summary;
  // One storm, one origin: the victims never become storms of their own.
  for (const Finding& x : out_) {
    if (x.kind == IncidentKind::kPauseStorm) {
      EXPECT_EQ(x.entity.at("node"), "node-b");
    }
  }
  // Over at sample 40: resolved after 30 s without a pause.
  const Finding* r = First(out_, IncidentKind::kPauseStorm, false);
  ASSERT_NE(r, nullptr);
  EXPECT_GE(r->at, At(start + 20) + absl::Seconds(20));
  EXPECT_LE(r->at, At(start + 20) + absl::Seconds(40));
}

TEST_F(PauseStormTest, OriginIsNamedEvenWhenTheVictimsMeetTheRuleFirst) {
  // The victims are paused from the storm's first sample and the aggregator hands over their
  // samples before the origin's: the earliest tx onset still names node-c.
  for (int i = 0; i < 10; ++i) {
    const bool storm = i >= 3;
    ports_[0]->Sample(*d_, At(i), storm ? 0.95 : 0, 0, out_);
    ports_[1]->Sample(*d_, At(i), storm ? 0.95 : 0, 0, out_);
    ports_[2]->Sample(*d_, At(i), 0, storm ? 0.6 : 0, out_);
  }
  const Finding* f = First(out_, IncidentKind::kPauseStorm, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->at, At(5));
  EXPECT_EQ(f->entity.at("node"), "node-c");
}

TEST_F(PauseStormTest, TheEarliestSenderIsTheOriginNotTheLoudest) {
  // node-a starts sending pauses at sample 3; the back-pressure reaches node-c, which starts
  // sending pauses itself a sample later, and more of them. node-b is paused by both.
  for (int i = 0; i < 10; ++i) {
    ports_[0]->Sample(*d_, At(i), 0, i >= 3 ? 0.7 : 0, out_);
    ports_[1]->Sample(*d_, At(i), i >= 3 ? 0.95 : 0, 0, out_);
    ports_[2]->Sample(*d_, At(i), 0, i >= 4 ? 0.99 : 0, out_);
  }
  const Finding* f = First(out_, IncidentKind::kPauseStorm, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->entity.at("node"), "node-a");
  EXPECT_EQ(CountActive(out_, IncidentKind::kPauseStorm), 1);
}

TEST_F(PauseStormTest, StormEventsRaiseAtOnce) {
  for (int i = 0; i < 5; ++i) ports_[0]->Sample(*d_, At(i), 0, 0.02, out_);
  ports_[0]->Sample(*d_, At(5), 0, 0.3, out_, /*storm_events=*/1);
  const Finding* f = First(out_, IncidentKind::kPauseStorm, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->at, At(5));
  EXPECT_EQ(f->entity.at("node"), "node-a");
  EXPECT_EQ(f->evidence.at("storm_warning_events"), 1);
}

TEST_F(PauseStormTest, BurstyPausesBelowTheRuleRaiseNothing) {
  std::uniform_real_distribution<double> u(0, 1);
  // Six hours: every port now and then paused 60-100 % for one or two samples, never three.
  int burst_left[4] = {0, 0, 0, 0};
  int quiet[4] = {0, 0, 0, 0};
  for (int i = 0; i < 6 * 360; ++i) {
    for (int p = 0; p < 4; ++p) {
      double rx = u(rng_) * 0.2, tx = u(rng_) * 0.2;
      if (burst_left[p] == 0 && quiet[p] > 3 && u(rng_) < 0.05)
        burst_left[p] = u(rng_) < 0.5 ? 1 : 2;
      if (burst_left[p] > 0) {
        --burst_left[p];
        quiet[p] = 0;
        rx = 0.6 + 0.4 * u(rng_);
        tx = 0.6 + 0.4 * u(rng_);
      } else {
        ++quiet[p];
      }
      ports_[p]->Sample(*d_, At(i), rx, tx, out_);
    }
  }
  EXPECT_TRUE(out_.empty()) << out_.front().summary;
}

TEST_F(PauseStormTest, OriginOutOfViewNamesTheLeaf) {
  for (int i = 0; i < 6; ++i) {
    ports_[0]->Sample(*d_, At(i), 0.9, 0, out_);
    ports_[2]->Sample(*d_, At(i), 0.9, 0, out_);
  }
  ASSERT_EQ(CountActive(out_, IncidentKind::kPauseStorm), 1);
  const Finding& f = *First(out_, IncidentKind::kPauseStorm, true);
  EXPECT_EQ(f.entity.at("leaf"), "leaf-1");
  EXPECT_EQ(f.entity.at("origin"), "unknown");
  EXPECT_EQ(f.evidence.count("spread/node-a/mlx5_3"), 1u);
  EXPECT_EQ(f.evidence.count("spread/node-c/mlx5_3"), 1u);
}

TEST_F(PauseStormTest, AResetPauseCounterIsNoStorm) {
  SimCounter rx{"node-a", "ethtool", "eth0",          "", "rx_prio3_pause_duration",
                64,       false,     900'000'000'000, 3};
  for (int i = 0; i < 5; ++i) d_->ObserveCounter(rx.Step(At(i), 1000), out_);
  // A driver reload zeroes it; the next reads count from zero.
  d_->ObserveCounter(rx.Reset(At(5), 9'000'000), out_);
  for (int i = 6; i < 9; ++i) d_->ObserveCounter(rx.Step(At(i), 1000), out_);
  EXPECT_TRUE(out_.empty());
}

TEST_F(PauseStormTest, WithoutATopologyTheDomainIsTheNode) {
  PauseStormDetector d({}, nullptr, &dir_);
  for (int i = 0; i < 4; ++i) {
    ports_[0]->Sample(d, At(i), 0.9, 0, out_);
    ports_[1]->Sample(d, At(i), 0, 0.9, out_);
  }
  ASSERT_EQ(CountActive(out_, IncidentKind::kPauseStorm), 2);
  // node-b sends pauses: it names itself; node-a's paused port has no sender in view on node-a.
  EXPECT_EQ(First(out_, IncidentKind::kPauseStorm, true)->entity.at("origin"), "unknown");
  EXPECT_EQ(out_.back().entity.at("node"), "node-b");
  EXPECT_EQ(out_.back().entity.count("origin"), 0u);
}

TEST_F(PauseStormTest, RestoredStormResolvesWhenQuiet) {
  Finding open;
  open.kind = IncidentKind::kPauseStorm;
  open.entity = {{"node", "node-b"},
                 {"device", "mlx5_3"},
                 {"port", "1"},
                 {"netdev", "eth0"},
                 {"priority", "3"}};
  open.at = At(0);
  ASSERT_TRUE(d_->Restore(open));
  for (int i = 1; i < 3; ++i) ports_[1]->Sample(*d_, At(i), 0, 0.8, out_);
  EXPECT_TRUE(out_.empty());  // still storming: no duplicate
  for (int i = 3; i < 8; ++i) ports_[1]->Sample(*d_, At(i), 0, 0, out_);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_FALSE(out_[0].active);
  EXPECT_EQ(FindingKey(out_[0]), FindingKey(open));
}

}  // namespace
}  // namespace ringside::analysis
