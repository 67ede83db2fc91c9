#include "collectors/common/parse.h"

#include <gtest/gtest.h>

namespace ringside::collectors {
namespace {

TEST(ParseTest, Uint64AcceptsSysfsCounters) {
  EXPECT_EQ(*ParseUint64("123\n"), 123u);
  EXPECT_EQ(*ParseUint64("  0 \n"), 0u);
  EXPECT_EQ(*ParseUint64("18446744073709551615\n"), UINT64_MAX);
}

TEST(ParseTest, Uint64RejectsGarbage) {
  for (const char* bad : {"", "\n", "abc", "12ab", "-1", "1.5", "18446744073709551616",
                          "123456789012345678901234567890", "1 2"}) {
    absl::StatusOr<uint64_t> v = ParseUint64(bad);
    EXPECT_FALSE(v.ok()) << bad;
    EXPECT_TRUE(absl::IsDataLoss(v.status())) << bad;
  }
}

TEST(ParseTest, Int64) {
  EXPECT_EQ(*ParseInt64("-1\n"), -1);
  EXPECT_EQ(*ParseInt64("100000\n"), 100000);
  EXPECT_FALSE(ParseInt64("-").ok());
  EXPECT_FALSE(ParseInt64("--1").ok());
}

TEST(ParseTest, NotAvailable) {
  EXPECT_TRUE(IsNotAvailableText("N/A (no PMA)\n"));
  EXPECT_FALSE(IsNotAvailableText("0\n"));
}

TEST(ParseTest, StateAndPhysState) {
  absl::StatusOr<IdAndName> s = ParseIdAndName("4: ACTIVE\n");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->id, 4u);
  EXPECT_EQ(s->name, "ACTIVE");
  absl::StatusOr<IdAndName> p = ParseIdAndName("5: LinkUp\n");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->id, 5u);
  EXPECT_FALSE(ParseIdAndName("ACTIVE").ok());
  EXPECT_FALSE(ParseIdAndName("x: ACTIVE").ok());
  EXPECT_FALSE(ParseIdAndName("1: a: b").ok());
}

// Test vectors from shared/reference/ib-roce-counters.md §6.
TEST(ParseTest, RateVectorsFromProcfs) {
  EXPECT_EQ(*ParseIbRateBytesPerSecond("0 GB/sec"), 0u);
  EXPECT_EQ(*ParseIbRateBytesPerSecond("2.5 Gb/sec (1X SDR)\n"), 312500000u);
  EXPECT_EQ(*ParseIbRateBytesPerSecond("500 Gb/sec (4X HDR)\n"), 62500000000u);
  EXPECT_EQ(*ParseIbRateBytesPerSecond("40 Gb/sec (4X QDR)\n"), 5000000000u);
  EXPECT_EQ(*ParseIbRateBytesPerSecond("10 Gb/sec (4X)\n"), 1250000000u);
  EXPECT_EQ(*ParseIbRateBytesPerSecond("400 Gb/sec (4X NDR)\n"), 50000000000u);
  EXPECT_EQ(*ParseIbRateBytesPerSecond("56 Gb/sec (4X FDR)\n"), 7000000000u);
}

TEST(ParseTest, RateRejectsGarbage) {
  EXPECT_FALSE(ParseIbRateBytesPerSecond("").ok());
  EXPECT_FALSE(ParseIbRateBytesPerSecond("fast").ok());
  EXPECT_FALSE(ParseIbRateBytesPerSecond("40 Mb/sec").ok());
  EXPECT_FALSE(ParseIbRateBytesPerSecond("1.23456 Gb/sec").ok());
}

}  // namespace
}  // namespace ringside::collectors
