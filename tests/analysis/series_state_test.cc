#include "analysis/series_state.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

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

class SeriesStateTest : public ::testing::Test {
 protected:
  SeriesState Fresh(uint8_t width, bool saturates = false) {
    SeriesState s;
    ResetSeriesState(s, SeriesKind::kCounter, width, saturates);
    return s;
  }
};

TEST_F(SeriesStateTest, FitsInSixtyFourBytes) { EXPECT_LE(sizeof(SeriesState), 64u); }

TEST_F(SeriesStateTest, FirstSampleIsABaseline) {
  SeriesState s = Fresh(32);
  StepResult r = ObserveSample(s, 1000, 10 * kSecond);
  EXPECT_TRUE(r.accepted);
  EXPECT_EQ(r.kind, StepKind::kBaseline);
  EXPECT_EQ(s.last_step, StepKind::kBaseline);
  EXPECT_EQ(s.last_raw, 1000u);
  EXPECT_EQ(s.last_time_ns, 10 * kSecond);
  EXPECT_EQ(s.total, 0u);
  EXPECT_EQ(s.window_size, 0);
  EXPECT_TRUE(std::isnan(s.LatestRate()));
}

TEST_F(SeriesStateTest, RateIsDeltaOverTheSampleInterval) {
  SeriesState s = Fresh(64);
  ObserveSample(s, 1000, 10 * kSecond);
  StepResult r = ObserveSample(s, 1500, 10 * kSecond + kSecond / 2);  // +500 in 0.5 s
  EXPECT_EQ(r.kind, StepKind::kNormal);
  EXPECT_EQ(r.delta, 500u);
  EXPECT_FLOAT_EQ(r.rate, 1000.0f);
  r = ObserveSample(s, 4500, 12 * kSecond + kSecond / 2);  // +3000 in 2 s
  EXPECT_FLOAT_EQ(r.rate, 1500.0f);
  EXPECT_EQ(s.total, 3500u);
  float w[kRateWindow];
  ASSERT_EQ(s.Window(w), 2);
  EXPECT_FLOAT_EQ(w[0], 1000.0f);
  EXPECT_FLOAT_EQ(w[1], 1500.0f);
}

TEST_F(SeriesStateTest, WindowKeepsTheLastEightRatesOldestFirst) {
  SeriesState s = Fresh(64);
  ObserveSample(s, 0, kSecond);
  uint64_t v = 0;
  for (int i = 1; i <= 11; ++i) {
    v += static_cast<uint64_t>(i);  // rate i per second
    ObserveSample(s, v, (1 + i) * kSecond);
  }
  float w[kRateWindow];
  ASSERT_EQ(s.Window(w), kRateWindow);
  for (int i = 0; i < kRateWindow; ++i) EXPECT_FLOAT_EQ(w[i], static_cast<float>(4 + i)) << i;
  EXPECT_FLOAT_EQ(s.LatestRate(), 11.0f);
  EXPECT_EQ(s.total, 66u);
  EXPECT_EQ(s.steps, 11);
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
    SeriesState s = Fresh(c.width);
    ObserveSample(s, c.before, kSecond);
    StepResult r = ObserveSample(s, c.after, 2 * kSecond);
    EXPECT_EQ(r.kind, StepKind::kWrap) << int(c.width);
    EXPECT_EQ(s.last_step, StepKind::kWrap) << int(c.width);
    EXPECT_EQ(r.delta, c.delta) << int(c.width);
    EXPECT_FLOAT_EQ(r.rate, static_cast<float>(c.delta)) << int(c.width);
    EXPECT_EQ(s.total, c.delta) << int(c.width);
    EXPECT_EQ(s.last_raw, c.after);
  }
}

TEST_F(SeriesStateTest, TotalAcrossManyWrapsEqualsTheCounterIncrease) {
  // A 16-bit wrapping counter advancing 12000 per step for 30 steps: 5 wraps, 360000 in all.
  SeriesState s = Fresh(16);
  uint64_t real = 123;
  ObserveSample(s, real % 65536, kSecond);
  int wraps = 0;
  for (int i = 2; i <= 31; ++i) {
    real += 12000;
    StepResult r = ObserveSample(s, real % 65536, i * kSecond);
    if (r.kind == StepKind::kWrap) ++wraps;
    EXPECT_EQ(r.delta, 12000u);
  }
  EXPECT_EQ(wraps, 5);
  EXPECT_EQ(s.total, 360000u);
}

TEST_F(SeriesStateTest, SaturatedSixteenBitCounter) {
  SeriesState s = Fresh(16, /*saturates=*/true);
  ObserveSample(s, 65000, kSecond);
  StepResult reach = ObserveSample(s, 65535, 2 * kSecond);
  EXPECT_EQ(reach.kind, StepKind::kSaturated);
  EXPECT_EQ(reach.delta, 535u);  // a lower bound
  EXPECT_TRUE(std::isnan(reach.rate));
  StepResult stuck = ObserveSample(s, 65535, 3 * kSecond);
  EXPECT_EQ(stuck.kind, StepKind::kSaturated);
  EXPECT_EQ(stuck.delta, 0u);
  EXPECT_EQ(s.last_step, StepKind::kSaturated);
  EXPECT_EQ(s.total, 535u);
  // Cleared by perfquery -R: a reset, then normal again.
  StepResult cleared = ObserveSample(s, 7, 4 * kSecond);
  EXPECT_EQ(cleared.kind, StepKind::kReset);
  EXPECT_EQ(cleared.delta, 7u);
  StepResult next = ObserveSample(s, 10, 5 * kSecond);
  EXPECT_EQ(next.kind, StepKind::kNormal);
  EXPECT_FLOAT_EQ(next.rate, 3.0f);
}

TEST_F(SeriesStateTest, DriverReloadIsAResetNotAWrap) {
  // A 32-bit Q counter at 1.2 M drops to 17 after a driver reload.
  SeriesState s = Fresh(32);
  ObserveSample(s, 1'200'000, kSecond);
  StepResult r = ObserveSample(s, 17, 3 * kSecond);
  EXPECT_EQ(r.kind, StepKind::kReset);
  EXPECT_EQ(r.delta, 17u);
  EXPECT_FLOAT_EQ(r.rate, 8.5f);
  EXPECT_EQ(s.last_raw, 17u);
  // A 64-bit netdev counter dropping to near zero.
  SeriesState n = Fresh(64);
  ObserveSample(n, 987654321012ull, kSecond);
  EXPECT_EQ(ObserveSample(n, 42, 2 * kSecond).kind, StepKind::kReset);
}

TEST_F(SeriesStateTest, InvalidValueKeepsTheBaseline) {
  SeriesState s = Fresh(8);
  ObserveSample(s, 100, kSecond);
  StepResult bad = ObserveSample(s, 300, 2 * kSecond);
  EXPECT_EQ(bad.kind, StepKind::kInvalid);
  EXPECT_EQ(s.last_raw, 100u);
  EXPECT_EQ(s.last_time_ns, kSecond);
  StepResult good = ObserveSample(s, 120, 3 * kSecond);  // 20 over 2 s
  EXPECT_EQ(good.kind, StepKind::kNormal);
  EXPECT_FLOAT_EQ(good.rate, 10.0f);
  EXPECT_EQ(s.total, 20u);
}

TEST_F(SeriesStateTest, OutOfOrderSampleIsIgnored) {
  SeriesState s = Fresh(64);
  ObserveSample(s, 100, 5 * kSecond);
  EXPECT_FALSE(ObserveSample(s, 50, 4 * kSecond).accepted);
  EXPECT_FALSE(ObserveSample(s, 150, 5 * kSecond).accepted);
  EXPECT_EQ(s.last_raw, 100u);
}

TEST_F(SeriesStateTest, GaugeWindowHoldsValues) {
  SeriesState s;
  ResetSeriesState(s, SeriesKind::kGauge, 0, false);
  ObserveSample(s, 4, kSecond);
  ObserveSample(s, 1, 2 * kSecond);
  EXPECT_EQ(s.last_step, StepKind::kValue);
  EXPECT_EQ(s.last_raw, 1u);
  float w[kRateWindow];
  ASSERT_EQ(s.Window(w), 2);
  EXPECT_FLOAT_EQ(w[0], 4.0f);
  EXPECT_FLOAT_EQ(w[1], 1.0f);
  EXPECT_EQ(s.total, 0u);
}

TEST_F(SeriesStateTest, NodeSeriesDefinesObservesAndLimits) {
  StringPool pool;
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
  // Names are interned: "infiniband", "mlx5_0", "1", "count", and c1, c3, other.
  EXPECT_EQ(pool.size(), 7u);
}

TEST_F(SeriesStateTest, MalformedDefinitionsAreRefused) {
  StringPool pool;
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
  EXPECT_EQ(store.pool().size(), 5u);  // shared between the nodes
}

}  // namespace
}  // namespace ringside::analysis
