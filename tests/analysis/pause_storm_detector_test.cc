#include "analysis/pause_storm_detector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/correlator.h"
#include "analysis/incident_store.h"
#include "analysis/incidents.h"
#include "tests/analysis/fabric_sim.h"

namespace ringside::analysis {
namespace {

using testing::At;
using testing::CountActive;
using testing::First;
using testing::SimCounter;

constexpr double kIntervalUs = 10e6;  // 10 s samples

// One RoCE port (netdev eth0 = mlx5_3 port 1) of a node, priority 3 unless told: the pause
// durations in µs (64-bit, started near 2^64 so that they wrap during the test), tx pause frames
// and the mlx5 storm counters.
struct RocePort {
  explicit RocePort(const std::string& node, int prio = 3)
      : rx(node, "ethtool", "eth0", "", absl::StrCat("rx_prio", prio, "_pause_duration"), 64,
           false, UINT64_MAX - 40'000'000, prio),
        tx(node, "ethtool", "eth0", "", absl::StrCat("tx_prio", prio, "_pause_duration"), 64,
           false, UINT64_MAX - 30'000'000, prio),
        tx_frames(node, "ethtool", "eth0", "", absl::StrCat("tx_prio", prio, "_pause"), 64, false,
                  0, prio),
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

// The pause_storm incidents the findings name (one FindingKey each), in the order they opened.
std::vector<std::string> StormKeys(const std::vector<Finding>& out) {
  std::vector<std::string> keys;
  for (const Finding& f : out) {
    if (f.kind != IncidentKind::kPauseStorm) continue;
    const std::string k = FindingKey(f);
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  return keys;
}

std::string Label(const Finding& f, const char* k) {
  auto it = f.entity.find(k);
  return it == f.entity.end() ? "" : it->second;
}

// The latest finding of the storm named after `node` (its origin, or its node when unknown) on
// `prio`.
const Finding* Latest(const std::vector<Finding>& out, const std::string& node,
                      const std::string& prio = "3") {
  const Finding* last = nullptr;
  for (const Finding& f : out) {
    if (f.kind == IncidentKind::kPauseStorm && Label(f, "node") == node &&
        Label(f, "priority") == prio) {
      last = &f;
    }
  }
  return last;
}

// Without a topology each node is its own domain; the nodes' samples are handed over in the order
// given (the aggregator's order within a sample is arbitrary).
class PauseStormNoTopologyTest : public PauseStormTest {
 protected:
  void SetUp() override {
    PauseStormTest::SetUp();
    d_ = std::make_unique<PauseStormDetector>(PauseStormOptions{}, nullptr, &dir_);
  }
};

TEST_F(PauseStormNoTopologyTest, VictimsOnOtherNodesAreTheOriginsInferredSpread) {
  for (int i = 0; i < 40; ++i) {
    const bool storm = i >= 3 && i < 20;
    // node-b sends pauses from sample 3; node-a and node-c are paused from the next sample.
    ports_[1]->Sample(*d_, At(i), 0, storm ? 0.97 : 0.01, out_);
    ports_[0]->Sample(*d_, At(i), storm && i >= 4 ? 0.9 : 0.01, 0, out_);
    ports_[2]->Sample(*d_, At(i), storm && i >= 4 ? 0.85 : 0.01, 0, out_);
    ports_[3]->Sample(*d_, At(i), 0.01, 0.01, out_);
  }
  // One fault, one incident, named after its origin.
  ASSERT_EQ(StormKeys(out_).size(), 1u);
  for (const Finding& f : out_) {
    EXPECT_EQ(Label(f, "node"), "node-b");
    EXPECT_EQ(f.entity.count("origin"), 0u);
  }
  const Finding* f = First(out_, IncidentKind::kPauseStorm, true);
  EXPECT_EQ(f->at, At(5));
  const Finding* last = nullptr;  // the last update while open
  for (const Finding& x : out_) {
    if (x.active) last = &x;
  }
  ASSERT_NE(last, nullptr);
  EXPECT_NEAR(last->evidence.at("spread/node-a/mlx5_3"), 0.9, 0.01);
  EXPECT_NEAR(last->evidence.at("spread/node-c/mlx5_3"), 0.85, 0.01);
  EXPECT_EQ(last->evidence.count("spread/node-d/mlx5_3"), 0u);
  // Inferred: each started one 10 s sample after the origin.
  EXPECT_EQ(last->evidence.at("inferred_spread/node-a/mlx5_3"), 10);
  EXPECT_EQ(last->evidence.at("inferred_spread/node-c/mlx5_3"), 10);
  EXPECT_EQ(last->evidence.at("inferred_spread_ports"), 2);
  EXPECT_EQ(last->evidence.at("spread_ports"), 2);
  EXPECT_NE(last->summary.find("node-a/mlx5_3 (paused 90%, from +10 s; inferred"),
            std::string::npos)
      << last->summary;
  // Over once, after 30 s without a pause anywhere.
  const Finding* r = First(out_, IncidentKind::kPauseStorm, false);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->at, At(22));  // the last pause in the sample ending At(19)
  EXPECT_EQ(d_->open_storms(), 0u);
}

TEST_F(PauseStormNoTopologyTest, VictimsMeetingTheRuleFirstOpenTheOriginsStorm) {
  // Victims paused from the origin's first sample, their samples handed over before its: the
  // first port to meet the rule is node-a; the storm opens named after node-b's sending port.
  for (int i = 0; i < 10; ++i) {
    const bool storm = i >= 3;
    ports_[0]->Sample(*d_, At(i), storm ? 0.95 : 0, 0, out_);
    ports_[2]->Sample(*d_, At(i), storm ? 0.95 : 0, 0, out_);
    ports_[1]->Sample(*d_, At(i), 0, storm ? 0.6 : 0, out_);
  }
  ASSERT_EQ(StormKeys(out_).size(), 1u);
  const Finding* f = First(out_, IncidentKind::kPauseStorm, true);
  EXPECT_EQ(f->at, At(5));
  EXPECT_EQ(Label(*f, "node"), "node-b");
  EXPECT_EQ(f->evidence.at("inferred_spread/node-a/mlx5_3"), 0);
  const Finding* last = Latest(out_, "node-b");
  EXPECT_EQ(last->evidence.at("inferred_spread/node-c/mlx5_3"), 0);
  EXPECT_EQ(last->severity, Severity::kCritical);
}

TEST_F(PauseStormNoTopologyTest, TwoOriginsOnDifferentPrioritiesAreTwoIncidents) {
  RocePort a("node-a"), b("node-b"), c5("node-c", 5), d5("node-d", 5);
  for (int i = 0; i < 12; ++i) {
    const bool storm = i >= 3;
    b.Sample(*d_, At(i), 0, storm ? 0.9 : 0, out_);
    d5.Sample(*d_, At(i), 0, storm ? 0.9 : 0, out_);
    a.Sample(*d_, At(i), storm && i >= 4 ? 0.8 : 0, 0, out_);
    c5.Sample(*d_, At(i), storm && i >= 4 ? 0.8 : 0, 0, out_);
  }
  ASSERT_EQ(StormKeys(out_).size(), 2u);
  const Finding* p3 = Latest(out_, "node-b", "3");
  const Finding* p5 = Latest(out_, "node-d", "5");
  ASSERT_NE(p3, nullptr);
  ASSERT_NE(p5, nullptr);
  EXPECT_EQ(p3->evidence.count("spread/node-a/mlx5_3"), 1u);
  EXPECT_EQ(p3->evidence.count("spread/node-c/mlx5_3"), 0u);
  EXPECT_EQ(p5->evidence.count("spread/node-c/mlx5_3"), 1u);
  EXPECT_EQ(p5->evidence.count("spread/node-a/mlx5_3"), 0u);
  for (const Finding& f : out_) EXPECT_EQ(f.entity.count("origin"), 0u) << f.summary;
}

TEST_F(PauseStormNoTopologyTest, LateVictimsAndOtherPrioritiesAreTheirOwnIncidents) {
  RocePort c5("node-c", 5);
  for (int i = 0; i < 30; ++i) {
    const bool storm = i >= 3;
    ports_[1]->Sample(*d_, At(i), 0, storm ? 0.9 : 0, out_);
    // Paused 70 s after the origin started: beyond the three-sample window.
    ports_[0]->Sample(*d_, At(i), i >= 10 ? 0.8 : 0, 0, out_);
    // Paused at the same time as the origin, but on priority 5.
    c5.Sample(*d_, At(i), i >= 4 ? 0.8 : 0, 0, out_);
  }
  ASSERT_EQ(StormKeys(out_).size(), 3u);
  const Finding* b = Latest(out_, "node-b");
  EXPECT_EQ(b->evidence.at("spread_ports"), 0);
  EXPECT_EQ(b->evidence.count("inferred_spread_ports"), 0u);
  const Finding* a = Latest(out_, "node-a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(Label(*a, "origin"), "unknown");
  EXPECT_EQ(a->at, At(12));
  const Finding* c = Latest(out_, "node-c", "5");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(Label(*c, "origin"), "unknown");
}

TEST_F(PauseStormNoTopologyTest, AnOriginThatStoppedSendingIsNotInferred) {
  for (int i = 0; i < 12; ++i) {
    // node-b sends for three samples (the storm opens at sample 5), then stops; node-a is paused
    // from sample 6, within the window of node-b's start but after node-b stopped.
    ports_[1]->Sample(*d_, At(i), 0, i >= 3 && i <= 5 ? 0.9 : 0, out_);
    ports_[0]->Sample(*d_, At(i), i >= 6 ? 0.8 : 0, 0, out_);
  }
  ASSERT_EQ(StormKeys(out_).size(), 2u);
  EXPECT_EQ(Label(*Latest(out_, "node-a"), "origin"), "unknown");
  EXPECT_EQ(Latest(out_, "node-b")->evidence.at("spread_ports"), 0);
}

TEST_F(PauseStormNoTopologyTest, InferredVictimsStillPausedKeepTheStormOpen) {
  // node-b stops sending at sample 10; node-a stays paused until sample 25. It stays part of the
  // storm (as a topology's spread would), never a storm of its own, and the storm resolves 30 s
  // after node-a's last pause.
  for (int i = 0; i < 40; ++i) {
    ports_[1]->Sample(*d_, At(i), 0, i >= 3 && i < 10 ? 0.9 : 0, out_);
    ports_[0]->Sample(*d_, At(i), i >= 4 && i < 25 ? 0.8 : 0, 0, out_);
  }
  ASSERT_EQ(StormKeys(out_).size(), 1u);
  int resolved = 0;
  for (const Finding& f : out_) resolved += !f.active;
  ASSERT_EQ(resolved, 1);
  const Finding* r = First(out_, IncidentKind::kPauseStorm, false);
  EXPECT_EQ(Label(*r, "node"), "node-b");
  EXPECT_EQ(r->at, At(27));  // node-a last paused in the sample ending At(24)
}

TEST_F(PauseStormNoTopologyTest, AVictimOpenBeforeItsOriginIsMergedIntoTheOriginsStorm) {
  for (int i = 0; i < 12; ++i) {
    // node-c is paused from the start, 50 s before node-b sends: unrelated, its own storm.
    ports_[2]->Sample(*d_, At(i), 0.8, 0, out_);
    // node-a is paused from sample 3 and meets the rule at sample 5 with no sender in view; node-b
    // sends from sample 5 (20 s after node-a's start) and meets the rule at sample 7.
    ports_[0]->Sample(*d_, At(i), i >= 3 ? 0.9 : 0, 0, out_);
    ports_[1]->Sample(*d_, At(i), 0, i >= 5 ? 0.97 : 0, out_);
  }
  ASSERT_EQ(StormKeys(out_).size(), 3u);
  // node-a's own storm opened at sample 5, and resolves at sample 7 as part of node-b's.
  const Finding* a_open = First(out_, IncidentKind::kPauseStorm, true);
  ASSERT_NE(a_open, nullptr);
  EXPECT_EQ(Label(*a_open, "node"), "node-c");
  const Finding* a = Latest(out_, "node-a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(Label(*a, "origin"), "unknown");
  EXPECT_FALSE(a->active);
  EXPECT_EQ(a->at, At(7));
  EXPECT_EQ(a->evidence.at("merged"), 1);
  EXPECT_NE(a->summary.find("part of the storm sent by node-b mlx5_3"), std::string::npos)
      << a->summary;
  const Finding* b = Latest(out_, "node-b");
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->active);
  EXPECT_EQ(b->evidence.at("inferred_spread/node-a/mlx5_3"), -20);
  EXPECT_EQ(b->evidence.count("spread/node-c/mlx5_3"), 0u);
  // node-c's storm is still open, on its own.
  const Finding* c = Latest(out_, "node-c");
  EXPECT_TRUE(c->active);
  EXPECT_EQ(Label(*c, "origin"), "unknown");
  EXPECT_EQ(d_->open_storms(), 2u);
}

TEST_F(PauseStormNoTopologyTest, AnInferredVictimCountingStormEventsIsASenderOfItsOwn) {
  for (int i = 0; i < 8; ++i) {
    ports_[1]->Sample(*d_, At(i), 0, i >= 3 ? 0.9 : 0, out_);
    // node-a, node-b's inferred spread from sample 5, counts a stall-prevention event at sample 7.
    ports_[0]->Sample(*d_, At(i), i >= 4 ? 0.8 : 0, i >= 7 ? 0.3 : 0, out_, i == 7 ? 1 : 0);
  }
  ASSERT_EQ(StormKeys(out_).size(), 2u);
  EXPECT_EQ(Latest(out_, "node-b")->evidence.count("inferred_spread/node-a/mlx5_3"), 1u);
  const Finding* a = Latest(out_, "node-a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->at, At(7));
  EXPECT_EQ(a->entity.count("origin"), 0u);
  EXPECT_EQ(a->evidence.at("storm_warning_events"), 1);
}

TEST_F(PauseStormTest, WithATopologyTwoLeavesAreTwoStorms) {
  for (int i = 0; i < 12; ++i) {
    const bool storm = i >= 3;
    ports_[1]->Sample(*d_, At(i), 0, storm ? 0.9 : 0, out_);            // node-b, leaf-1
    ports_[3]->Sample(*d_, At(i), 0, storm ? 0.9 : 0, out_);            // node-d, leaf-2
    ports_[0]->Sample(*d_, At(i), storm && i >= 4 ? 0.8 : 0, 0, out_);  // node-a, leaf-1
  }
  ASSERT_EQ(StormKeys(out_).size(), 2u);
  const Finding* b = Latest(out_, "node-b");
  const Finding* d = Latest(out_, "node-d");
  ASSERT_NE(b, nullptr);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(b->evidence.count("spread/node-a/mlx5_3"), 1u);
  EXPECT_EQ(d->evidence.at("spread_ports"), 0);
  for (const Finding& f : out_) EXPECT_EQ(f.evidence.count("inferred_spread_ports"), 0u);
}

TEST_F(PauseStormTest, WithATopologyAPortOnAnotherLeafIsNotInferred) {
  // node-d (leaf-2) is paused when node-b (leaf-1) starts sending, but the topology says it is
  // not on node-b's leaf: its own storm, on its leaf, origin unknown.
  for (int i = 0; i < 12; ++i) {
    const bool storm = i >= 3;
    ports_[1]->Sample(*d_, At(i), 0, storm ? 0.9 : 0, out_);
    ports_[3]->Sample(*d_, At(i), storm && i >= 4 ? 0.8 : 0, 0, out_);
  }
  ASSERT_EQ(StormKeys(out_).size(), 2u);
  EXPECT_EQ(Latest(out_, "node-b")->evidence.at("spread_ports"), 0);
  const Finding* d = nullptr;
  for (const Finding& f : out_) {
    if (Label(f, "leaf") == "leaf-2") d = &f;
  }
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(Label(*d, "origin"), "unknown");
}

TEST_F(PauseStormNoTopologyTest, AJobOnAnInferredVictimIsInTheStormsBlastRadius) {
  for (int i = 0; i < 8; ++i) {
    const bool storm = i >= 3;
    ports_[1]->Sample(*d_, At(i), 0, storm ? 0.97 : 0, out_);
    ports_[0]->Sample(*d_, At(i), storm && i >= 4 ? 0.9 : 0, 0, out_);
    ports_[3]->Sample(*d_, At(i), 0, 0, out_);
  }
  MemoryIncidentStore store;
  IncidentManager incidents(&store);
  ASSERT_TRUE(incidents.Load(At(0)).ok());
  ASSERT_TRUE(incidents.Apply(out_).ok());
  // job-1: ranks 0-3 on node-a, 4-7 on node-b, 8-11 on node-d; no topology.
  Correlator c(nullptr);
  const char* nodes[] = {"node-a", "node-b", "node-d"};
  for (int r = 0; r < 12; ++r) {
    CollectiveObservation o;
    o.job = "job-1";
    o.comm_id = 1;
    o.rank = r;
    o.nranks = 12;
    o.global_rank = r;
    o.function = "AllReduce";
    o.start_ns = absl::ToUnixNanos(At(7));
    o.stop_ns = absl::ToUnixNanos(At(7) + absl::Milliseconds(5));
    o.host = nodes[r / 4];
    c.ObserveCollective(o);
  }
  ASSERT_TRUE(c.Correlate(incidents, At(8)).ok());
  const Incident* storm = nullptr;
  for (const Incident* inc : incidents.Open()) {
    if (inc->kind == IncidentKind::kPauseStorm) storm = inc;
  }
  ASSERT_NE(storm, nullptr);
  EXPECT_EQ(storm->entity.at("node"), "node-b");
  ASSERT_EQ(storm->affected.size(), 1u);
  EXPECT_EQ(storm->affected[0].job, "job-1");
  EXPECT_EQ(storm->affected[0].nodes, (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(storm->affected[0].ranks, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
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
