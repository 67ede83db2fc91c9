#include "analysis/compact_time.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace ringside::analysis {
namespace {

TEST(CompactTimeTest, DefaultsAreThoseOfAbsl) {
  EXPECT_EQ(absl::Time(CompactTime()), absl::Time());
  EXPECT_EQ(absl::Duration(CompactDuration()), absl::Duration());
}

TEST(CompactTimeTest, WholeNanosecondsRoundTripExactly) {
  for (int64_t ns : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{1'795'918'024'123'456'789},
                     int64_t{-86'400'000'000'000}}) {
    const absl::Time t = absl::FromUnixNanos(ns);
    EXPECT_EQ(absl::Time(CompactTime(t)), t) << ns;
    EXPECT_EQ(absl::Duration(CompactDuration(absl::Nanoseconds(ns))), absl::Nanoseconds(ns)) << ns;
  }
  // What the detectors store: a sample's time less its interval.
  const absl::Time t = absl::FromUnixNanos(1'795'918'024'000'000'123) - absl::Milliseconds(250);
  EXPECT_EQ(absl::Time(CompactTime(t)), t);
}

TEST(CompactTimeTest, InfinitiesStayInfinite) {
  EXPECT_EQ(absl::Time(CompactTime(absl::InfinitePast())), absl::InfinitePast());
  EXPECT_EQ(absl::Time(CompactTime(absl::InfiniteFuture())), absl::InfiniteFuture());
  EXPECT_EQ(absl::Duration(CompactDuration(absl::InfiniteDuration())), absl::InfiniteDuration());
  EXPECT_EQ(absl::Duration(CompactDuration(-absl::InfiniteDuration())), -absl::InfiniteDuration());
  // Past the int64 range of nanoseconds (year 2262): saturated, and read back as infinite.
  EXPECT_EQ(absl::Time(CompactTime(absl::FromUnixSeconds(int64_t{1} << 40))),
            absl::InfiniteFuture());
  EXPECT_EQ(absl::Time(CompactTime(absl::FromUnixSeconds(-(int64_t{1} << 40)))),
            absl::InfinitePast());
}

TEST(CompactTimeTest, ArithmeticAndComparisonsReadAsAbsl) {
  const absl::Time t0 = absl::FromUnixNanos(1'000'000'000'000'000'000);
  CompactTime last = absl::InfinitePast();
  EXPECT_TRUE(last == absl::InfinitePast());
  EXPECT_LT(last, t0);
  last = std::max<absl::Time>(last, t0);
  EXPECT_EQ(t0 + absl::Seconds(3) - last, absl::Seconds(3));
  const CompactDuration interval = absl::Milliseconds(1500);
  EXPECT_EQ(3 * absl::Duration(interval), absl::Milliseconds(4500));
  EXPECT_EQ(sizeof(CompactTime), 8u);
  EXPECT_EQ(sizeof(CompactDuration), 8u);
}

}  // namespace
}  // namespace ringside::analysis
