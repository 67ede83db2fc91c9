#include "analysis/counter_math.h"

#include <gtest/gtest.h>

namespace ringside::analysis {
namespace {

TEST(CounterMathTest, NormalIncrease) {
  Delta d = ComputeDelta(100, 250, 32, false);
  EXPECT_EQ(d.kind, DeltaKind::kNormal);
  EXPECT_EQ(d.value, 150u);
}

TEST(CounterMathTest, WrapsAtEachWidth) {
  // 8-bit: 250 → 4 is 255-250 + 1 + 4 = 10 steps.
  EXPECT_EQ(ComputeDelta(250, 4, 8, false).kind, DeltaKind::kWrap);
  EXPECT_EQ(ComputeDelta(250, 4, 8, false).value, 10u);
  EXPECT_EQ(ComputeDelta(65530, 5, 16, false).value, 11u);
  EXPECT_EQ(ComputeDelta(65530, 5, 16, false).kind, DeltaKind::kWrap);
  EXPECT_EQ(ComputeDelta(4294967290u, 10, 32, false).value, 16u);
  EXPECT_EQ(ComputeDelta(4294967290u, 10, 32, false).kind, DeltaKind::kWrap);
  Delta d64 = ComputeDelta(UINT64_MAX - 1, 3, 64, false);
  EXPECT_EQ(d64.kind, DeltaKind::kWrap);
  EXPECT_EQ(d64.value, 5u);
}

TEST(CounterMathTest, SaturatedSixteenBitCounterStopsReporting) {
  // Reaching all-ones: the last step is a lower bound and the counter is flagged saturated.
  Delta reach = ComputeDelta(65000, 65535, 16, true);
  EXPECT_EQ(reach.kind, DeltaKind::kSaturated);
  EXPECT_EQ(reach.value, 535u);
  Delta stuck = ComputeDelta(65535, 65535, 16, true);
  EXPECT_EQ(stuck.kind, DeltaKind::kSaturated);
  EXPECT_EQ(stuck.value, 0u);
}

TEST(CounterMathTest, SaturatingCounterNeverWraps) {
  // A PMA counter that drops was cleared (perfquery -R), even from near its maximum.
  Delta d = ComputeDelta(65530, 3, 16, true);
  EXPECT_EQ(d.kind, DeltaKind::kReset);
  EXPECT_EQ(d.value, 3u);
}

TEST(CounterMathTest, DriverReloadIsAReset) {
  // A 32-bit Q counter at 1.2 M drops to 17 after a driver reload: not a wrap.
  Delta d = ComputeDelta(1200000, 17, 32, false);
  EXPECT_EQ(d.kind, DeltaKind::kReset);
  EXPECT_EQ(d.value, 17u);
  // A 64-bit netdev counter dropping to near zero.
  EXPECT_EQ(ComputeDelta(987654321012ull, 42, 64, false).kind, DeltaKind::kReset);
}

TEST(CounterMathTest, ValueBeyondWidthIsInvalid) {
  EXPECT_EQ(ComputeDelta(10, 300, 8, false).kind, DeltaKind::kInvalid);
}

// mlx5 hw_counters: a 64-bit sum of 32-bit Q counters. One term wrapping drops the sum by about
// 2^32: a wrap; a larger or a small drop is a reset (a driver reload, a QP unbound).
TEST(CounterMathTest, ASumOf32BitTermsWrapsWhenOneTermDoes) {
  const uint64_t t = uint64_t{1} << 32;
  Delta d = ComputeDelta(t + 5000, 5000 + 100, 64, false, 32);  // one term: 2^32-... -> 100 more
  EXPECT_EQ(d.kind, DeltaKind::kWrap);
  EXPECT_EQ(d.value, 100u);
  d = ComputeDelta(3 * t - 10, 2 * t + 20, 64, false, 32);
  EXPECT_EQ(d.kind, DeltaKind::kWrap);
  EXPECT_EQ(d.value, 30u);
  EXPECT_EQ(ComputeDelta(3 * t, t, 64, false, 32).kind, DeltaKind::kReset);      // 2 x 2^32
  EXPECT_EQ(ComputeDelta(t + 1000, t, 64, false, 32).kind, DeltaKind::kReset);   // small drop
  EXPECT_EQ(ComputeDelta(t + 5000, 5100, 64, false, 0).kind, DeltaKind::kReset);  // not a sum
  EXPECT_EQ(ComputeDelta(t + 5000, 5100, 64, true, 32).kind, DeltaKind::kReset);  // saturating
}

TEST(CounterMathTest, WidthZeroMeansSixtyFour) {
  EXPECT_EQ(CounterMax(0), UINT64_MAX);
  EXPECT_EQ(CounterMax(4), 15u);
  EXPECT_EQ(CounterMax(32), 4294967295u);
}

}  // namespace
}  // namespace ringside::analysis
