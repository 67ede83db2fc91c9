#include "analysis/series_state.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "analysis/bfloat16.h"

namespace ringside::analysis {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

SeriesDefinition Counter(uint32_t id, std::string counter, uint8_t width, bool saturates = false) {
  SeriesDefinition d;
  d.id = id;
  d.source = "infiniband";
  d.device = "mlx5_0";
  d.port = "1";
  d.counter = std::move(counter);
  d.unit = "count";
  d.kind = SeriesKind::kCounter;
  d.width = width;
  d.saturates = saturates;
  return d;
}

// The state of one series, through a NodeSeries of its own (the stored form is packed; tests read
// the state back as a SeriesState copy).
class One {
 public:
  explicit One(SeriesKind kind, uint8_t width = 64, bool saturates = false)
      : node_(SeriesLimits{}, &pool_) {
    SeriesDefinition d = Counter(1, "c", width, saturates);
    d.kind = kind;
    EXPECT_TRUE(node_.Define(d).ok());
  }
  StepResult Observe(uint64_t raw, int64_t time_ns) {
    absl::StatusOr<StepResult> r = node_.Observe(1, raw, time_ns);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : StepResult{};
  }
  SeriesState operator()() const { return *node_.Find(1); }
  NodeSeries& node() { return node_; }

 private:
  SeriesIdentityPool pool_;
  NodeSeries node_;
};

// A bfloat16 window value: within 2^-8 of the exact rate.
void ExpectRounded(float got, float want) {
  EXPECT_NEAR(got, want, std::fabs(want) * kBFloat16RelativeError) << want;
}

class SeriesStateTest : public ::testing::Test {
 protected:
  One Fresh(uint8_t width, bool saturates = false) {
    return One(SeriesKind::kCounter, width, saturates);
  }
};

TEST_F(SeriesStateTest, FitsInSixtyFourBytes) {
  EXPECT_LE(NodeSeries::kBytesPerSeries, 64u);
  // Everything a node holds, over its series, once the definitions are in.
  SeriesIdentityPool pool;
  NodeSeries node(SeriesLimits{}, &pool);
  for (uint32_t id = 0; id < 1500; ++id) {
    ASSERT_TRUE(node.Define(Counter(id, "c" + std::to_string(id % 60), 64)).ok());
  }
  node.Compact();
  EXPECT_LE(node.MemoryBytes(), 1500 * 60 + sizeof(NodeSeries));
  EXPECT_GE(node.MemoryBytes(), 1500 * 60u);
}

TEST_F(SeriesStateTest, FirstSampleIsABaseline) {
  One s = Fresh(32);
  StepResult r = s.Observe(1000, 10 * kSecond);
  EXPECT_TRUE(r.accepted);
  EXPECT_EQ(r.kind, StepKind::kBaseline);
  EXPECT_EQ(s().last_step, StepKind::kBaseline);
  EXPECT_EQ(s().last_raw, 1000u);
  EXPECT_EQ(s().last_time_ns, 10 * kSecond);
  EXPECT_EQ(s().total, 0u);
  EXPECT_EQ(s().window_size, 0);
  EXPECT_TRUE(std::isnan(s().LatestRate()));
}

TEST_F(SeriesStateTest, RateIsDeltaOverTheSampleInterval) {
  One s = Fresh(64);
  s.Observe(1000, 10 * kSecond);
  StepResult r = s.Observe(1500, 10 * kSecond + kSecond / 2);  // +500 in 0.5 s
  EXPECT_EQ(r.kind, StepKind::kNormal);
  EXPECT_EQ(r.delta, 500u);
  EXPECT_FLOAT_EQ(r.rate, 1000.0f);
  r = s.Observe(4500, 12 * kSecond + kSecond / 2);  // +3000 in 2 s
  EXPECT_FLOAT_EQ(r.rate, 1500.0f);                 // the step's rate is exact
  EXPECT_EQ(s().total, 3500u);
  float w[kRateWindow];
  ASSERT_EQ(s().Window(w), 2);
  EXPECT_FLOAT_EQ(w[0], 1000.0f);  // 1000 fits in bfloat16's 8 significant bits
  ExpectRounded(w[1], 1500.0f);    // 1500 does not: 1504
  EXPECT_FLOAT_EQ(w[1], 1504.0f);
}

TEST_F(SeriesStateTest, WindowKeepsTheLastEightRatesOldestFirst) {
  One s = Fresh(64);
  s.Observe(0, kSecond);
  uint64_t v = 0;
  for (int i = 1; i <= 11; ++i) {
    v += static_cast<uint64_t>(i);  // rate i per second
    s.Observe(v, (1 + i) * kSecond);
  }
  float w[kRateWindow];
  ASSERT_EQ(s().Window(w), kRateWindow);
  for (int i = 0; i < kRateWindow; ++i) EXPECT_FLOAT_EQ(w[i], static_cast<float>(4 + i)) << i;
  EXPECT_FLOAT_EQ(s().LatestRate(), 11.0f);
  EXPECT_EQ(s().total, 66u);
  EXPECT_EQ(s().steps, 11);
}

TEST_F(SeriesStateTest, WrapsAtEachWidth) {
  struct Case {
    uint8_t width;
    uint64_t before;
    uint64_t after;
    uint64_t delta;
  };
  for (const Case& c : {Case{8, 250, 4, 10}, Case{16, 65530, 5, 11},
                        Case{32, 4294967290ull, 10, 16}, Case{64, UINT64_MAX - 1, 3, 5}}) {
    One s = Fresh(c.width);
    s.Observe(c.before, kSecond);
    StepResult r = s.Observe(c.after, 2 * kSecond);
    EXPECT_EQ(r.kind, StepKind::kWrap) << int(c.width);
    EXPECT_EQ(s().last_step, StepKind::kWrap) << int(c.width);
    EXPECT_EQ(r.delta, c.delta) << int(c.width);
    EXPECT_FLOAT_EQ(r.rate, static_cast<float>(c.delta)) << int(c.width);
    EXPECT_EQ(s().total, c.delta) << int(c.width);
    EXPECT_EQ(s().last_raw, c.after);
  }
}

TEST_F(SeriesStateTest, TotalAcrossManyWrapsEqualsTheCounterIncrease) {
  // A 16-bit wrapping counter advancing 12000 per step for 30 steps: 5 wraps, 360000 in all.
  One s = Fresh(16);
  uint64_t real = 123;
  s.Observe(real % 65536, kSecond);
  int wraps = 0;
  for (int i = 2; i <= 31; ++i) {
    real += 12000;
    StepResult r = s.Observe(real % 65536, i * kSecond);
    if (r.kind == StepKind::kWrap) ++wraps;
    EXPECT_EQ(r.delta, 12000u);
  }
  EXPECT_EQ(wraps, 5);
  EXPECT_EQ(s().total, 360000u);
}

TEST_F(SeriesStateTest, SaturatedSixteenBitCounter) {
  One s = Fresh(16, /*saturates=*/true);
  s.Observe(65000, kSecond);
  StepResult reach = s.Observe(65535, 2 * kSecond);
  EXPECT_EQ(reach.kind, StepKind::kSaturated);
  EXPECT_EQ(reach.delta, 535u);  // a lower bound
  EXPECT_TRUE(std::isnan(reach.rate));
  StepResult stuck = s.Observe(65535, 3 * kSecond);
  EXPECT_EQ(stuck.kind, StepKind::kSaturated);
  EXPECT_EQ(stuck.delta, 0u);
  EXPECT_EQ(s().last_step, StepKind::kSaturated);
  EXPECT_EQ(s().total, 535u);
  EXPECT_TRUE(std::isnan(s().LatestRate()));  // NaN survives bfloat16
  // Cleared by perfquery -R: a reset, then normal again.
  StepResult cleared = s.Observe(7, 4 * kSecond);
  EXPECT_EQ(cleared.kind, StepKind::kReset);
  EXPECT_EQ(cleared.delta, 7u);
  StepResult next = s.Observe(10, 5 * kSecond);
  EXPECT_EQ(next.kind, StepKind::kNormal);
  EXPECT_FLOAT_EQ(next.rate, 3.0f);
}

TEST_F(SeriesStateTest, DriverReloadIsAResetNotAWrap) {
  // A 32-bit Q counter at 1.2 M drops to 17 after a driver reload.
  One s = Fresh(32);
  s.Observe(1'200'000, kSecond);
  StepResult r = s.Observe(17, 3 * kSecond);
  EXPECT_EQ(r.kind, StepKind::kReset);
  EXPECT_EQ(r.delta, 17u);
  EXPECT_FLOAT_EQ(r.rate, 8.5f);
  EXPECT_EQ(s().last_raw, 17u);
  // A 64-bit netdev counter dropping to near zero.
  One n = Fresh(64);
  n.Observe(987654321012ull, kSecond);
  EXPECT_EQ(n.Observe(42, 2 * kSecond).kind, StepKind::kReset);
}

TEST_F(SeriesStateTest, InvalidValueKeepsTheBaseline) {
  One s = Fresh(8);
  s.Observe(100, kSecond);
  StepResult bad = s.Observe(300, 2 * kSecond);
  EXPECT_EQ(bad.kind, StepKind::kInvalid);
  EXPECT_EQ(s().last_raw, 100u);
  EXPECT_EQ(s().last_time_ns, kSecond);
  StepResult good = s.Observe(120, 3 * kSecond);  // 20 over 2 s
  EXPECT_EQ(good.kind, StepKind::kNormal);
  EXPECT_FLOAT_EQ(good.rate, 10.0f);
  EXPECT_EQ(s().total, 20u);
}

TEST_F(SeriesStateTest, OutOfOrderSampleIsIgnored) {
  One s = Fresh(64);
  s.Observe(100, 5 * kSecond);
  EXPECT_FALSE(s.Observe(50, 4 * kSecond).accepted);
  EXPECT_FALSE(s.Observe(150, 5 * kSecond).accepted);
  // Within the 10 µs resolution of the stored time: the same time.
  EXPECT_FALSE(s.Observe(150, 5 * kSecond + 9'999).accepted);
  EXPECT_EQ(s().last_raw, 100u);
  EXPECT_TRUE(s.Observe(150, 5 * kSecond + 10'000).accepted);
  EXPECT_EQ(s().last_raw, 150u);
}

TEST_F(SeriesStateTest, GaugeWindowHoldsValues) {
  One s(SeriesKind::kGauge, 0);
  s.Observe(4, kSecond);
  s.Observe(1, 2 * kSecond);
  EXPECT_EQ(s().last_step, StepKind::kValue);
  EXPECT_EQ(s().last_raw, 1u);
  float w[kRateWindow];
  ASSERT_EQ(s().Window(w), 2);
  EXPECT_FLOAT_EQ(w[0], 4.0f);
  EXPECT_FLOAT_EQ(w[1], 1.0f);
  EXPECT_EQ(s().total, 0u);
}

TEST_F(SeriesStateTest, NodeSeriesDefinesObservesAndLimits) {
  SeriesIdentityPool pool;
  SeriesLimits limits;
  limits.max_series_per_node = 3;
  NodeSeries node(limits, &pool);
  for (uint32_t id = 1; id <= 3; ++id) {
    auto r = node.Define(Counter(id, "c" + std::to_string(id), 32));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, NodeSeries::DefineResult::kNew);
  }
  auto over = node.Define(Counter(4, "c4", 32));
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(node.size(), 3u);
  // The same definition again changes nothing; an undefined id is refused.
  EXPECT_EQ(*node.Define(Counter(2, "c2", 32)), NodeSeries::DefineResult::kUnchanged);
  EXPECT_EQ(node.Observe(9, 1, kSecond).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(node.Observe(2, 10, kSecond).ok());
  auto step = node.Observe(2, 30, 2 * kSecond);
  ASSERT_TRUE(step.ok());
  EXPECT_FLOAT_EQ(step->rate, 20.0f);
  EXPECT_EQ(node.Views()[1].first_raw, 10u);  // the baseline of the total
  EXPECT_EQ(node.Views()[1].first_time_ns, kSecond);
  // A changed width keeps the state; another series under the id starts over.
  EXPECT_EQ(*node.Define(Counter(2, "c2", 64)), NodeSeries::DefineResult::kUpdated);
  EXPECT_EQ(node.Find(2)->total, 20u);
  EXPECT_EQ(node.Find(2)->width, 64);
  EXPECT_EQ(*node.Define(Counter(2, "other", 64)), NodeSeries::DefineResult::kReplaced);
  EXPECT_FALSE(node.Find(2)->has_value());
  std::vector<SeriesView> views = node.Views();
  ASSERT_EQ(views.size(), 3u);
  EXPECT_EQ(views[1].def.counter, "other");
  EXPECT_EQ(views[1].def.device, "mlx5_0");
  EXPECT_EQ(views[1].first_raw, 0u);  // replaced: no baseline yet
  // Names are interned: "infiniband", "mlx5_0", "1", "count", and c1, c3, other; one tuple each.
  EXPECT_EQ(pool.strings(), 7u);
  EXPECT_EQ(pool.size(), 3u);
}

TEST_F(SeriesStateTest, MalformedDefinitionsAreRefused) {
  SeriesIdentityPool pool;
  NodeSeries node(SeriesLimits{}, &pool);
  SeriesDefinition d = Counter(1, "", 32);
  EXPECT_EQ(node.Define(d).status().code(), absl::StatusCode::kInvalidArgument);
  d = Counter(1, "x", 65);
  EXPECT_EQ(node.Define(d).status().code(), absl::StatusCode::kInvalidArgument);
  d = Counter(1, std::string(300, 'x'), 32);
  EXPECT_EQ(node.Define(d).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(node.size(), 0u);
}

TEST_F(SeriesStateTest, StoreLimitsNodesAndReleasesNames) {
  SeriesStore::Options o;
  o.max_nodes = 2;
  SeriesStore store(o);
  auto a = store.AddNode("a");
  auto b = store.AddNode("b");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*store.AddNode("a"), *a);
  EXPECT_EQ(store.AddNode("c").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store.FindNode("b"), *b);
  EXPECT_EQ(store.FindNode("c"), nullptr);
  EXPECT_EQ(store.nodes(), 2u);
  ASSERT_TRUE((*a)->Define(Counter(1, "x", 32)).ok());
  ASSERT_TRUE((*b)->Define(Counter(1, "x", 32)).ok());
  EXPECT_EQ(store.pool().strings(), 5u);  // shared between the nodes
  EXPECT_EQ(store.pool().size(), 1u);     // one tuple for both
}

TEST_F(SeriesStateTest, BFloat16RoundsToNearestWithinItsBound) {
  // Exact: small integers and powers of two, zero, and signs.
  for (float v : {0.0f, 1.0f, -1.0f, 255.0f, 1000.0f, 0.5f, 1048576.0f}) {
    EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(v)), v) << v;
  }
  // 257 lies halfway between 256 and 258: ties to even (256); 259 rounds up to 260.
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(257.0f)), 256.0f);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(259.0f)), 260.0f);
  // Over float32's range, the relative error stays within 2^-8.
  for (float v = 1e-30f; v < 1e30f; v *= 1.37f) {
    for (float x : {v, -v}) {
      const float back = BFloat16ToFloat(FloatToBFloat16(x));
      EXPECT_LE(std::fabs(back - x), std::fabs(x) * kBFloat16RelativeError) << x;
    }
  }
  // A 400 Gb/s link's bytes per second, and an error rate of 1e-12 per second, keep 3 digits.
  ExpectRounded(BFloat16ToFloat(FloatToBFloat16(5e10f)), 5e10f);
  ExpectRounded(BFloat16ToFloat(FloatToBFloat16(1e-12f)), 1e-12f);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(BFloat16ToFloat(FloatToBFloat16(INFINITY))));
  EXPECT_TRUE(std::isinf(BFloat16ToFloat(FloatToBFloat16(3.4e38f))));  // past bfloat16's max
}

TEST_F(SeriesStateTest, WindowRoundsRatesButStepsAndTotalsStayExact) {
  One s = Fresh(64);
  const int64_t t0 = 1'700'000'000 * kSecond + 123'456'789;  // not on the 10 µs grid
  s.Observe(0, t0);
  uint64_t v = 0;
  for (int i = 1; i <= 5; ++i) {
    v += 12'345'678'901ull;  // ~12.3 GB/s
    StepResult r = s.Observe(v, t0 + i * kSecond);
    // The step's rate uses the previous time to 10 µs: within 1e-5 of the exact rate.
    EXPECT_NEAR(r.rate, 12'345'678'901.0, 12'345'678'901.0 * 1e-5);
    ExpectRounded(s().LatestRate(), r.rate);
  }
  EXPECT_EQ(s().total, v);
  EXPECT_EQ(s().last_raw, v);
  // The stored time is the sample's, to 10 µs, rounded down.
  EXPECT_EQ(s().last_time_ns, t0 + 5 * kSecond - 6'789);
}

TEST_F(SeriesStateTest, RebaseKeepsTimesAndRates) {
  SeriesIdentityPool pool;
  NodeSeries node(SeriesLimits{}, &pool);
  ASSERT_TRUE(node.Define(Counter(1, "fast", 64)).ok());
  ASSERT_TRUE(node.Define(Counter(2, "slow", 64)).ok());
  const int64_t t0 = 1'700'000'000 * kSecond;
  ASSERT_TRUE(node.Observe(1, 0, t0).ok());
  ASSERT_TRUE(node.Observe(2, 0, t0).ok());
  EXPECT_EQ(node.time_base_ns(), t0);
  // Series 1 runs on for 3 hours, one sample a minute: the base moves once it passes 2 h.
  int64_t t = t0;
  for (int i = 1; i <= 180; ++i) {
    t = t0 + i * 60 * kSecond;
    auto r = node.Observe(1, static_cast<uint64_t>(i) * 6000, t);
    ASSERT_TRUE(r.ok());
    EXPECT_FLOAT_EQ(r->rate, 100.0f) << i;
  }
  EXPECT_GT(node.time_base_ns(), t0 + NodeSeries::kRebaseAfterNs);
  EXPECT_EQ(node.Find(1)->last_time_ns, t);
  EXPECT_EQ(node.Find(1)->total, 180u * 6000);
  // Series 2's last sample, 3 h old, is still within the range: its time and rate are exact.
  EXPECT_EQ(node.Find(2)->last_time_ns, t0);
  ObservedSample d;
  StepResult r;
  ASSERT_TRUE(node.TryObserve(2, 10'800, t0 + 3 * 3600 * kSecond, &r, &d));
  EXPECT_EQ(r.delta, 10'800u);
  EXPECT_FLOAT_EQ(r.rate, 1.0f);
  EXPECT_EQ(d.prev_time_ns, t0);
  EXPECT_EQ(d.time_ns, t0 + 3 * 3600 * kSecond);
  EXPECT_EQ(d.counter, "slow");
  // The first sample's time survives the rebase (to the second).
  EXPECT_EQ(node.Views()[1].first_time_ns, t0);
  EXPECT_EQ(node.Views()[1].first_raw, 0u);
}

TEST_F(SeriesStateTest, SeriesOlderThanTheRangeKeepsItsTotalButLosesItsRate) {
  SeriesIdentityPool pool;
  NodeSeries node(SeriesLimits{}, &pool);
  ASSERT_TRUE(node.Define(Counter(1, "live", 32)).ok());
  ASSERT_TRUE(node.Define(Counter(2, "stalled", 32)).ok());
  const int64_t t0 = 1'700'000'000 * kSecond + 5'000;
  ASSERT_TRUE(node.Observe(2, 4'294'967'000u, t0).ok());
  // 10 hours later (past the ±5.9 h range), the other series moves the base.
  const int64_t t1 = t0 + 10 * 3600 * kSecond;
  ASSERT_TRUE(node.Observe(1, 1, t1).ok());
  EXPECT_EQ(node.Find(2)->last_time_ns, 0);  // unknown now
  EXPECT_EQ(node.Find(2)->last_raw, 4'294'967'000u);
  // A sample older than the range after a known one is out of order...
  EXPECT_FALSE(node.Observe(1, 2, t0).value().accepted);
  // ... and the stalled series' next step: delta exact (a wrap), rate unknown.
  ObservedSample d;
  StepResult r;
  ASSERT_TRUE(node.TryObserve(2, 704, t1 + kSecond, &r, &d));
  EXPECT_TRUE(r.accepted);
  EXPECT_EQ(r.kind, StepKind::kWrap);
  EXPECT_EQ(r.delta, 1000u);
  EXPECT_TRUE(std::isnan(r.rate));
  EXPECT_EQ(d.prev_time_ns, 0);  // the detectors skip a step of unknown length
  EXPECT_EQ(node.Find(2)->total, 1000u);
  EXPECT_EQ(node.Find(2)->last_time_ns, t1 + kSecond - 5'000);  // to 10 µs, rounded down
  // From then on, normal again (over 2 s + 5 µs, the previous time being kept to 10 µs).
  r = node.Observe(2, 904, t1 + 3 * kSecond).value();
  EXPECT_NEAR(r.rate, 100.0f, 1e-3);
  EXPECT_EQ(node.Find(2)->total, 1200u);
  // The first time is kept (in seconds from the node's first sample).
  EXPECT_EQ(node.Views()[1].first_time_ns, t0 - 5'000);
}

TEST_F(SeriesStateTest, FarOutTimesDoNotBreakTheArithmetic) {
  SeriesIdentityPool pool;
  NodeSeries node(SeriesLimits{}, &pool);
  ASSERT_TRUE(node.Define(Counter(1, "a", 64)).ok());
  ASSERT_TRUE(node.Observe(1, 10, std::numeric_limits<int64_t>::min()).ok());
  auto r = node.Observe(1, 20, std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->accepted);
  EXPECT_EQ(r->delta, 10u);
  EXPECT_EQ(node.Find(1)->total, 10u);
  EXPECT_FALSE(node.Observe(1, 30, 0).value().accepted);  // older than the newest
}

TEST_F(SeriesStateTest, IdsDefinedOutOfOrderAreFoundInOrder) {
  SeriesIdentityPool pool;
  NodeSeries node(SeriesLimits{}, &pool);
  for (uint32_t id : {10u, 20u, 30u, 5u, 25u, 1000u, 0u}) {
    auto r = node.Define(Counter(id, "c" + std::to_string(id), 64));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, NodeSeries::DefineResult::kNew) << id;
  }
  std::vector<uint32_t> ids;
  for (const SeriesView& v : node.Views()) ids.push_back(v.def.id);
  EXPECT_EQ(ids, (std::vector<uint32_t>{0, 5, 10, 20, 25, 30, 1000}));
  // Each id reaches its own series, in batch order and out of it.
  for (uint32_t id : {0u, 5u, 10u, 20u, 25u, 30u, 1000u, 25u, 0u, 1000u}) {
    ObservedSample d;
    StepResult r;
    ASSERT_TRUE(node.TryObserve(id, id, kSecond + id, &r, &d)) << id;
    EXPECT_EQ(d.counter, "c" + std::to_string(id));
  }
  for (uint32_t missing : {1u, 11u, 999u, 1001u}) {
    EXPECT_EQ(node.Observe(missing, 1, 2 * kSecond).status().code(), absl::StatusCode::kNotFound);
    EXPECT_FALSE(node.Find(missing).has_value());
  }
  EXPECT_EQ(node.Find(25)->last_raw, 25u);
}

TEST_F(SeriesStateTest, IdentitiesAreSharedAcrossNodesAndFreed) {
  SeriesIdentityPool pool;
  auto a = std::make_unique<NodeSeries>(SeriesLimits{}, &pool);
  auto b = std::make_unique<NodeSeries>(SeriesLimits{}, &pool);
  for (uint32_t id = 0; id < 600; ++id) {  // more than one chunk of the pool
    ASSERT_TRUE(a->Define(Counter(id, "c" + std::to_string(id), 64)).ok());
    ASSERT_TRUE(b->Define(Counter(id, "c" + std::to_string(id), 64)).ok());
  }
  EXPECT_EQ(pool.size(), 600u);
  EXPECT_EQ(pool.strings(), 604u);
  // A changed unit is another tuple; the old one stays while b holds it.
  SeriesDefinition d = Counter(7, "c7", 64);
  d.unit = "bytes";
  EXPECT_EQ(*a->Define(d), NodeSeries::DefineResult::kUpdated);
  EXPECT_EQ(a->Views()[7].def.unit, "bytes");
  EXPECT_EQ(b->Views()[7].def.unit, "count");
  EXPECT_EQ(pool.size(), 601u);
  const size_t bytes = pool.bytes();
  a.reset();
  EXPECT_EQ(pool.size(), 600u);
  EXPECT_EQ(pool.strings(), 604u);  // "bytes" is gone, c0..c599 stay
  b.reset();
  EXPECT_EQ(pool.size(), 0u);
  EXPECT_EQ(pool.strings(), 0u);
  EXPECT_LT(pool.bytes(), bytes);
  // Freed handles are reused.
  NodeSeries c(SeriesLimits{}, &pool);
  ASSERT_TRUE(c.Define(Counter(1, "x", 64)).ok());
  EXPECT_EQ(c.Views()[0].def.counter, "x");
  EXPECT_EQ(pool.size(), 1u);
}

TEST_F(SeriesStateTest, KindChangeStartsANewBaseline) {
  One s = Fresh(32);
  s.Observe(10, kSecond);
  s.Observe(30, 2 * kSecond);
  SeriesDefinition d = Counter(1, "c", 32);
  d.kind = SeriesKind::kGauge;
  EXPECT_EQ(*s.node().Define(d), NodeSeries::DefineResult::kUpdated);
  EXPECT_FALSE(s().has_value());
  EXPECT_EQ(s().total, 0u);
  EXPECT_EQ(s.node().Views()[0].first_raw, 0u);
  EXPECT_EQ(s.node().Views()[0].first_time_ns, 0);
  s.Observe(7, 3 * kSecond);
  EXPECT_EQ(s().kind, SeriesKind::kGauge);
  EXPECT_EQ(s().window_size, 1);
  EXPECT_EQ(s().LatestRate(), 7.0f);
  EXPECT_EQ(s.node().Views()[0].first_raw, 7u);
  EXPECT_EQ(s.node().Views()[0].first_time_ns, 3 * kSecond);
}

// A node's definitions as an agent sends them (ids ascending), as views.
std::vector<SeriesDefinitionRef> Refs(const std::vector<SeriesDefinition>& defs) {
  std::vector<SeriesDefinitionRef> refs;
  for (const SeriesDefinition& d : defs) refs.push_back(SeriesDefinitionRef::Of(d));
  return refs;
}

// Everything a reader sees of a node, as text.
std::string Dump(const NodeSeries& node) {
  std::string out;
  for (const SeriesView& v : node.Views()) {
    out += std::to_string(v.def.id) + " " + v.def.source + "/" + v.def.device + "/" + v.def.port +
           "/" + v.def.counter + "/" + v.def.unit + " p" + std::to_string(v.def.priority) + " k" +
           std::to_string(static_cast<int>(v.def.kind)) + " w" + std::to_string(v.def.width) +
           " s" + std::to_string(v.def.saturates) + " t" + std::to_string(v.def.term_width) +
           " raw" + std::to_string(v.state.last_raw) + " total" + std::to_string(v.state.total) +
           " n" + std::to_string(v.state.steps) + "\n";
  }
  return out;
}

TEST_F(SeriesStateTest, ReconnectWithIdenticalDefinitionsKeepsEveryStateAndTouchesNoIdentity) {
  SeriesIdentityPool pool;
  NodeSeries node(SeriesLimits{}, &pool);
  std::vector<SeriesDefinition> defs;
  for (uint32_t id = 0; id < 300; ++id) defs.push_back(Counter(id, "c" + std::to_string(id), 32));
  DefineCounts first;
  ASSERT_TRUE(node.DefineAll(Refs(defs), &first).ok());
  EXPECT_EQ(first.added, 300u);
  // Allocated at its exact size: nothing for Compact to give back.
  EXPECT_EQ(node.MemoryBytes(), 300 * NodeSeries::kBytesPerSeries + sizeof(NodeSeries));
  for (uint32_t id = 0; id < 300; ++id) {
    ASSERT_TRUE(node.Observe(id, 100, kSecond).ok());
    ASSERT_TRUE(node.Observe(id, 100 + id, 2 * kSecond).ok());
  }
  const std::string before = Dump(node);
  const size_t tuples = pool.size();
  const uint32_t refs = pool.Get(0).refs.load();  // the first tuple (id 0's)
  DefineCounts again;
  ASSERT_TRUE(node.DefineAll(Refs(defs), &again).ok());
  EXPECT_EQ(again.unchanged, 300u);
  EXPECT_EQ(again.added + again.redefined, 0u);
  EXPECT_EQ(Dump(node), before);  // totals, last values, step counts: all kept
  EXPECT_EQ(node.Find(299)->total, 299u);
  EXPECT_EQ(pool.size(), tuples);
  EXPECT_EQ(pool.Get(0).refs.load(), refs);  // no identity acquired or released
  // The samples after the reconnect continue the rates.
  auto step = node.Observe(7, 127, 3 * kSecond);
  ASSERT_TRUE(step.ok());
  EXPECT_FLOAT_EQ(step->rate, 20.0f);
}

// DefineAll equals Define one after another: news, unchanged, updated, replaced, a malformed
// definition or the limit midway (the ones before it kept), ids out of order.
TEST_F(SeriesStateTest, DefineAllEqualsOneDefineAfterAnother) {
  SeriesLimits limits;
  limits.max_series_per_node = 8;
  auto held = [] {
    std::vector<SeriesDefinition> d;
    for (uint32_t id : {2u, 4u, 6u, 8u}) d.push_back(Counter(id, "c" + std::to_string(id), 32));
    return d;
  }();
  std::vector<std::vector<SeriesDefinition>> messages;
  {
    std::vector<SeriesDefinition> m = held;  // identical
    messages.push_back(m);
    m[1].width = 64;                              // updated: the state kept
    m[2].counter = "other";                       // replaced
    m[3].unit = "packets";                        // updated: a new identity, the state kept
    m.insert(m.begin(), Counter(1, "new1", 16));  // new, below the largest: merged in order
    m.push_back(Counter(9, "new9", 64));
    messages.push_back(m);
    std::vector<SeriesDefinition> bad = m;
    bad[3].counter = std::string(300, 'x');  // a name over the limit: refused as before
    messages.push_back(bad);
    std::vector<SeriesDefinition> over = m;  // past 8 series
    for (uint32_t id = 10; id < 16; ++id) over.push_back(Counter(id, "n" + std::to_string(id), 8));
    messages.push_back(over);
    std::vector<SeriesDefinition> unordered = m;  // repeated and descending ids
    unordered.push_back(Counter(3, "three", 8));
    unordered.push_back(Counter(3, "three-again", 8));
    messages.push_back(unordered);
  }
  for (size_t k = 0; k < messages.size(); ++k) {
    SCOPED_TRACE(k);
    SeriesIdentityPool pool_a;
    SeriesIdentityPool pool_b;
    NodeSeries a(limits, &pool_a);
    NodeSeries b(limits, &pool_b);
    for (const SeriesDefinition& d : held) {
      ASSERT_TRUE(a.Define(d).ok());
      ASSERT_TRUE(b.Define(d).ok());
      ASSERT_TRUE(a.Observe(d.id, 5, kSecond).ok());
      ASSERT_TRUE(b.Observe(d.id, 5, kSecond).ok());
      ASSERT_TRUE(a.Observe(d.id, 9, 2 * kSecond).ok());
      ASSERT_TRUE(b.Observe(d.id, 9, 2 * kSecond).ok());
    }
    absl::Status one_by_one;
    DefineCounts want;
    for (const SeriesDefinition& d : messages[k]) {
      absl::StatusOr<NodeSeries::DefineResult> r = a.Define(d);
      if (!r.ok()) {
        one_by_one = r.status();
        break;
      }
      if (*r == NodeSeries::DefineResult::kNew)
        ++want.added;
      else if (*r == NodeSeries::DefineResult::kUnchanged)
        ++want.unchanged;
      else
        ++want.redefined;
    }
    DefineCounts got;
    EXPECT_EQ(b.DefineAll(Refs(messages[k]), &got), one_by_one);
    EXPECT_EQ(got.added, want.added);
    EXPECT_EQ(got.unchanged, want.unchanged);
    EXPECT_EQ(got.redefined, want.redefined);
    EXPECT_EQ(Dump(b), Dump(a));
    EXPECT_EQ(pool_b.size(), pool_a.size());
    EXPECT_EQ(pool_b.strings(), pool_a.strings());
  }
}

TEST_F(SeriesStateTest, DefineAllRefusesLongNamesAsDefineDoes) {
  SeriesIdentityPool pool;
  NodeSeries node(SeriesLimits{}, &pool);
  std::vector<SeriesDefinition> defs = {Counter(1, "ok", 32), Counter(2, std::string(257, 'x'), 32),
                                        Counter(3, "after", 32)};
  DefineCounts counts;
  absl::Status s = node.DefineAll(Refs(defs), &counts);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "series 2: a name of 257 bytes exceeds 256");
  EXPECT_EQ(node.size(), 1u);  // the one before it, as Define one after another
  EXPECT_EQ(counts.added, 1u);
  EXPECT_FALSE(node.Find(3).has_value());
}

TEST_F(SeriesStateTest, AcquireManyInternsOnceAndSharesWithAcquire) {
  SeriesIdentityPool pool;
  const uint32_t held = pool.Acquire({"infiniband", "mlx5_0", "1", "symbol_error", "count", -1});
  std::vector<SeriesIdentityKey> keys = {
      {"infiniband", "mlx5_0", "1", "symbol_error", "count", -1},  // held
      {"ethtool", "eth0", "", "tx_prio3_pause", "packets", 3},     // new
      {"ethtool", "eth0", "", "tx_prio3_pause", "packets", 3},     // the same new one
      {"ethtool", "eth0", "", "tx_prio3_pause", "packets", 4},     // another priority
  };
  std::vector<uint32_t> handles(keys.size());
  pool.AcquireMany(keys, absl::MakeSpan(handles));
  EXPECT_EQ(handles[0], held);
  EXPECT_EQ(handles[1], handles[2]);
  EXPECT_NE(handles[1], handles[3]);
  EXPECT_EQ(pool.size(), 3u);
  EXPECT_EQ(pool.Get(held).refs.load(), 2u);
  EXPECT_EQ(pool.Get(handles[1]).refs.load(), 2u);
  EXPECT_EQ(*pool.Get(handles[3]).counter, "tx_prio3_pause");
  EXPECT_EQ(pool.Get(handles[3]).priority, 4);
  // Found again by Acquire; freed when the last holder releases.
  EXPECT_EQ(pool.Acquire(keys[3]), handles[3]);
  for (uint32_t h : {handles[3], handles[3]}) pool.Release(h);
  EXPECT_EQ(pool.size(), 2u);
}

// Hints (a definition set's, by reference): a hint that names the key's held tuple is taken
// without a lookup; a stale one (its tuple freed, the handle reused for another) is looked up as
// any key and corrected; every hint ends naming what was acquired.
TEST_F(SeriesStateTest, AcquireManyTakesHintsThatStillHoldAndCorrectsStaleOnes) {
  SeriesIdentityPool pool;
  std::vector<SeriesIdentityKey> keys = {
      {"infiniband", "mlx5_0", "1", "symbol_error", "count", -1},
      {"ethtool", "eth0", "", "tx_prio3_pause", "packets", 3},
  };
  std::vector<std::atomic<uint64_t>> hint_store(keys.size());  // zero: no hint
  std::vector<std::atomic<uint64_t>*> hints = {&hint_store[0], &hint_store[1]};
  std::vector<uint32_t> first(keys.size());
  pool.AcquireMany(keys, absl::MakeSpan(first), hints);
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(hint_store[i].load(),
              SeriesIdentityPool::PackHint(first[i], pool.Get(first[i]).generation));
  }
  // Held: the hints are taken, one more reference each.
  std::vector<uint32_t> second(keys.size());
  pool.AcquireMany(keys, absl::MakeSpan(second), hints);
  EXPECT_EQ(second, first);
  EXPECT_EQ(pool.Get(first[0]).refs.load(), 2u);
  EXPECT_EQ(pool.Get(first[1]).refs.load(), 2u);
  // The tuple of key 1 freed, its handle reused for another tuple: the hint is stale.
  pool.Release(first[1]);
  pool.Release(first[1]);
  const SeriesIdentityKey other = {"netdev", "eth9", "", "rx_bytes", "bytes", -1};
  const uint32_t reused = pool.Acquire(other);
  ASSERT_EQ(reused, first[1]);  // the freed handle, a new generation
  std::vector<uint32_t> third(keys.size());
  pool.AcquireMany(keys, absl::MakeSpan(third), hints);
  EXPECT_EQ(third[0], first[0]);
  EXPECT_NE(third[1], reused);  // not the other tuple
  EXPECT_EQ(*pool.Get(third[1]).counter, "tx_prio3_pause");
  EXPECT_EQ(pool.Get(third[1]).priority, 3);
  EXPECT_EQ(*pool.Get(reused).counter, "rx_bytes");
  EXPECT_EQ(pool.Get(reused).refs.load(), 1u);
  EXPECT_EQ(hint_store[1].load(),
            SeriesIdentityPool::PackHint(third[1], pool.Get(third[1]).generation));
  // A hint that names a handle never handed out is ignored.
  hint_store[0].store(SeriesIdentityPool::PackHint(1000, 1));
  std::vector<uint32_t> fourth(keys.size());
  pool.AcquireMany(keys, absl::MakeSpan(fourth), hints);
  EXPECT_EQ(fourth, third);
}

// A node defined with a set's hints equals one defined without, and shares its identities.
TEST_F(SeriesStateTest, DefineAllWithIdentityHintsSharesTheIdentities) {
  SeriesIdentityPool pool;
  std::vector<SeriesDefinition> defs;
  for (uint32_t id = 0; id < 100; ++id) defs.push_back(Counter(id, "c" + std::to_string(id), 32));
  std::vector<std::atomic<uint64_t>> hints(defs.size());
  NodeSeries a(SeriesLimits{}, &pool);
  NodeSeries b(SeriesLimits{}, &pool);
  NodeSeries c(SeriesLimits{}, &pool);
  DefineCounts ca, cb, cc;
  ASSERT_TRUE(a.DefineAll(Refs(defs), &ca, absl::MakeSpan(hints)).ok());
  ASSERT_TRUE(b.DefineAll(Refs(defs), &cb, absl::MakeSpan(hints)).ok());
  ASSERT_TRUE(c.DefineAll(Refs(defs), &cc).ok());
  EXPECT_EQ(ca.added, 100u);
  EXPECT_EQ(cb.added, 100u);
  EXPECT_EQ(pool.size(), 100u);
  for (uint32_t id = 0; id < 100; ++id) {
    ASSERT_TRUE(a.Observe(id, 5, kSecond).ok());
    ASSERT_TRUE(b.Observe(id, 5, kSecond).ok());
    ASSERT_TRUE(c.Observe(id, 5, kSecond).ok());
  }
  EXPECT_EQ(Dump(a), Dump(b));
  EXPECT_EQ(Dump(a), Dump(c));
  EXPECT_EQ(pool.Get(0).refs.load(), 3u);
}

// The layout changes whenever a slot may name another series (hints by slot rely on it), and
// only then; every node's layouts are its own.
TEST_F(SeriesStateTest, LayoutChangesWhenASlotMayNameAnotherSeries) {
  SeriesIdentityPool pool;
  NodeSeries node(SeriesLimits{}, &pool);
  NodeSeries other(SeriesLimits{}, &pool);
  EXPECT_NE(node.layout(), 0u);
  EXPECT_NE(node.layout(), other.layout());
  std::vector<SeriesDefinition> defs = {Counter(1, "a", 32), Counter(3, "b", 32)};
  uint64_t last = node.layout();
  DefineCounts counts;
  ASSERT_TRUE(node.DefineAll(Refs(defs), &counts).ok());
  EXPECT_NE(node.layout(), last);
  last = node.layout();
  // Samples, the same definitions again, a Compact: the same layout, carried by the samples.
  StepResult r;
  ObservedSample detail;
  ASSERT_TRUE(node.TryObserve(3, 7, kSecond, &r, &detail));
  EXPECT_EQ(detail.layout, last);
  EXPECT_EQ(detail.slot, 1u);
  ASSERT_TRUE(node.DefineAll(Refs(defs), &counts).ok());
  node.Compact();
  EXPECT_EQ(node.layout(), last);
  // An id below the others moves their slots; a replaced series and a new width change it too.
  ASSERT_TRUE(node.Define(Counter(2, "c", 32)).ok());
  EXPECT_NE(node.layout(), last);
  last = node.layout();
  ASSERT_TRUE(node.TryObserve(3, 8, 2 * kSecond, &r, &detail));
  EXPECT_EQ(detail.slot, 2u);
  EXPECT_EQ(detail.layout, last);
  ASSERT_TRUE(node.Define(Counter(2, "d", 32)).ok());  // another series under id 2
  EXPECT_NE(node.layout(), last);
  last = node.layout();
  ASSERT_TRUE(node.Define(Counter(2, "d", 64)).ok());  // the same series, updated
  EXPECT_NE(node.layout(), last);
  last = node.layout();
  ASSERT_TRUE(node.Define(Counter(2, "d", 64)).ok());  // unchanged
  EXPECT_EQ(node.layout(), last);
}

// Several threads defining nodes from one set's hints at once while others release theirs (stale
// hints, reused handles): every node gets the identities of its definitions, and nothing leaks.
TEST_F(SeriesStateTest, IdentityHintsSharedByThreadsStayCorrect) {
  SeriesIdentityPool pool;
  std::vector<SeriesDefinition> defs;
  for (uint32_t id = 0; id < 200; ++id) defs.push_back(Counter(id, "c" + std::to_string(id), 32));
  std::vector<std::atomic<uint64_t>> hints(defs.size());
  std::vector<SeriesDefinitionRef> refs = Refs(defs);
  std::atomic<int> wrong{0};
  auto work = [&](int seed) {
    for (int round = 0; round < 50; ++round) {
      NodeSeries node(SeriesLimits{}, &pool);
      DefineCounts counts;
      if (!node.DefineAll(refs, &counts, absl::MakeSpan(hints)).ok()) ++wrong;
      // A node of other series now and then: handles freed and reused under the hints.
      if ((round + seed) % 3 == 0) {
        NodeSeries other(SeriesLimits{}, &pool);
        ASSERT_TRUE(other.Define(Counter(1, "x" + std::to_string(round), 32)).ok());
      }
      for (uint32_t id : {0u, 77u, 199u}) {
        StepResult r;
        ObservedSample detail;
        if (!node.TryObserve(id, 1, kSecond, &r, &detail) ||
            detail.counter != "c" + std::to_string(id)) {
          ++wrong;
        }
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(work, t);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(pool.size(), 0u);  // every node gone: every identity released
}

}  // namespace
}  // namespace ringside::analysis
