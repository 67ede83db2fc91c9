#include "analysis/congestion_detector.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tests/analysis/fabric_sim.h"

namespace ringside::analysis {
namespace {

using testing::At;
using testing::CountActive;
using testing::First;
using testing::SimCounter;

// mlx5 Q counters (hw_counters) are 32-bit and wrap.
SimCounter Hw(const char* counter, uint64_t start = 0) {
  return SimCounter("node-1", "infiniband_hw", "mlx5_0", "1", counter, 32, false, start);
}

TEST(CongestionTest, SustainedEcnMarksAreCongestionUntilTheyFall) {
  CongestionDetector d;
  std::vector<Finding> out;
  SimCounter ecn = Hw("np_ecn_marked_roce_packets", 4294900000u);  // wraps within a sample
  SimCounter cnp = Hw("np_cnp_sent");
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> noise(0, 2000);  // < 200/s
  int i = 0;
  for (; i < 30; ++i) {
    d.ObserveCounter(ecn.Step(At(i), noise(rng)), out);
    d.ObserveCounter(cnp.Step(At(i), noise(rng)), out);
  }
  ASSERT_TRUE(out.empty());
  const int start = i;
  for (; i < start + 10; ++i) {  // 5,000 marked packets/s, 2,500 CNPs/s
    d.ObserveCounter(ecn.Step(At(i), 50000 + noise(rng)), out);
    d.ObserveCounter(cnp.Step(At(i), 25000 + noise(rng)), out);
  }
  const Finding* f = First(out, IncidentKind::kCongestion, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->at, At(start + 2));  // the third sample above the threshold
  EXPECT_EQ(f->entity.at("node"), "node-1");
  EXPECT_EQ(f->entity.at("device"), "mlx5_0");
  EXPECT_NEAR(f->evidence.at("np_ecn_marked_roce_packets_per_s"), 5000, 200);
  EXPECT_NE(f->summary.find("congestion-marked"), std::string::npos) << f->summary;
  EXPECT_EQ(CountActive(out, IncidentKind::kCongestion), 1);
  const int calm = i;
  for (; i < calm + 20; ++i) {
    d.ObserveCounter(ecn.Step(At(i), noise(rng)), out);
    d.ObserveCounter(cnp.Step(At(i), noise(rng)), out);
  }
  const Finding* r = First(out, IncidentKind::kCongestion, false);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->at, At(calm - 1) + absl::Seconds(60));
}

TEST(CongestionTest, ShortBurstsAndResetsAreNotCongestion) {
  CongestionDetector d;
  std::vector<Finding> out;
  SimCounter ecn = Hw("np_ecn_marked_roce_packets");
  for (int i = 0; i < 360; ++i) {
    // Two samples in a row above the threshold, then quiet.
    d.ObserveCounter(ecn.Step(At(i), i % 10 < 2 ? 80000 : 100), out);
  }
  // A driver reload: the counter restarts; not 4 billion marks.
  d.ObserveCounter(ecn.Reset(At(360), 5), out);
  for (int i = 361; i < 400; ++i) d.ObserveCounter(ecn.Step(At(i), 100), out);
  EXPECT_TRUE(out.empty()) << out.front().summary;
}

TEST(CongestionTest, ThrottledSenderAndPriorityMarks) {
  PortDirectory dir;
  dir.MapNetdev("node-2", "eth1", "mlx5_1", "1");
  CongestionDetector d({}, &dir);
  std::vector<Finding> out;
  SimCounter rp("node-2", "infiniband_hw", "mlx5_1", "1", "rp_cnp_handled", 32);
  SimCounter marked("node-3", "ethtool", "eth7", "", "rx_prio3_marked", 64, false, 0, 3);
  for (int i = 0; i < 4; ++i) {
    d.ObserveCounter(rp.Step(At(i), 30000), out);
    d.ObserveCounter(marked.Step(At(i), 15000), out);
  }
  ASSERT_EQ(CountActive(out, IncidentKind::kCongestion), 2);
  const Finding& a = out[0];
  EXPECT_EQ(a.entity.at("netdev"), "eth1");  // the RDMA port knows its netdev
  EXPECT_NE(a.summary.find("throttled"), std::string::npos) << a.summary;
  const Finding& b = out[1];
  EXPECT_EQ(b.entity.at("netdev"), "eth7");
  EXPECT_EQ(b.entity.count("device"), 0u);
  EXPECT_NEAR(b.evidence.at("rx_prio3_marked_per_s"), 1500, 1);
}

TEST(CongestionTest, RestoredAndStale) {
  CongestionDetector d;
  Finding open;
  open.kind = IncidentKind::kCongestion;
  open.entity = {{"node", "node-1"}, {"device", "mlx5_0"}, {"port", "1"}};
  open.at = At(0);
  ASSERT_TRUE(d.Restore(open));
  std::vector<Finding> out;
  d.Advance(At(0) + absl::Minutes(31), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].active);
  EXPECT_EQ(out[0].evidence.at("stale"), 1);
  EXPECT_EQ(FindingKey(out[0]), FindingKey(open));
}

}  // namespace
}  // namespace ringside::analysis
