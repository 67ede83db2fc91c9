// FabricAnalysis::Links and ::Stragglers (analysis/fabric_views.h) over real detector inputs: the
// state a link or rank is in, whether or not an incident is open about it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "analysis/fabric_analysis.h"
#include "tests/analysis/fabric_sim.h"

namespace ringside::analysis {
namespace {

using testing::At;
using testing::SimCounter;
using testing::SimState;

const LinkView* FindLink(const std::vector<LinkView>& links, const std::string& node,
                         const std::string& device) {
  for (const LinkView& l : links) {
    if (l.node == node && l.device == device) return &l;
  }
  return nullptr;
}

TEST(FabricViewsTest, LinksShowStateFlapsAndTimes) {
  FabricAnalysis a({}, nullptr);
  SimState ib{"node-1", "infiniband_port", "mlx5_0", "1", "state"};
  SimCounter downed{"node-1", "infiniband", "mlx5_0", "1", "link_downed", 8, true};
  SimState uncabled{"node-1", "infiniband_port", "mlx5_1", "1", "state"};
  SimState eth{"node-2", "netdev", "eth0", "", "operstate"};
  SimState nv{"node-2", "nvlink", "0", "3", "link_state"};
  const auto sample = [&](int i, bool up, uint64_t downs) {
    a.OnState(ib.At(At(i), up ? 4 : 1));
    a.OnCounter(downed.Step(At(i), downs));
    a.OnState(uncabled.At(At(i), 1));  // DOWN from the start: never up
  };
  for (int i = 0; i < 3; ++i) sample(i, true, 0);
  sample(3, false, 1);
  sample(4, true, 0);
  sample(10, false, 1);
  sample(11, true, 0);
  a.OnState(eth.At(At(11), 6));  // operstate up
  a.OnState(nv.At(At(11), 1));
  std::vector<IncidentChange> changes;
  ASSERT_TRUE(a.Flush(At(11), &changes).ok());
  bool flapping = false;
  for (const IncidentChange& c : changes) {
    flapping |= c.incident.kind == IncidentKind::kLinkFlapping && c.incident.open();
  }
  EXPECT_TRUE(flapping);

  const std::vector<LinkView> links = a.Links(At(11));
  ASSERT_EQ(links.size(), 4u);
  const LinkView* l = FindLink(links, "node-1", "mlx5_0");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->source, "infiniband");
  EXPECT_EQ(l->port, "1");
  EXPECT_EQ(l->state, LinkState::kUp);
  EXPECT_EQ(l->flaps_in_window, 2u);
  EXPECT_EQ(l->last_change, At(11));
  EXPECT_EQ(l->last_seen, At(11));

  const LinkView* u = FindLink(links, "node-1", "mlx5_1");
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->state, LinkState::kDown);
  EXPECT_EQ(u->flaps_in_window, 0u);
  EXPECT_EQ(u->last_change, absl::InfinitePast());  // never transitioned

  const LinkView* e = FindLink(links, "node-2", "eth0");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->source, "netdev");
  EXPECT_EQ(e->port, "");
  EXPECT_EQ(e->state, LinkState::kUp);

  const LinkView* n = FindLink(links, "node-2", "0");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->source, "nvlink");
  EXPECT_EQ(n->port, "3");
  EXPECT_EQ(n->state, LinkState::kUp);

  // Eleven minutes later both cycles are out of the 10-minute window.
  const std::vector<LinkView> later = a.Links(At(11) + absl::Minutes(11));
  l = FindLink(later, "node-1", "mlx5_0");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->flaps_in_window, 0u);
  EXPECT_EQ(l->last_seen, At(11));
}

// `nranks` ranks all-reduce after computing; `late_rank` computes 30 ms longer. Clocks are not
// synchronised (each rank's own offset), so the detector works from kernel durations.
void FeedJob(FabricAnalysis& a, const std::string& job, int nranks, int late_rank, int iterations,
             bool global_ranks, const std::string& function = "AllReduce") {
  int64_t now = 1'700'000'000'000'000'000LL;
  for (int i = 0; i < iterations; ++i) {
    const int64_t compute = 100'000'000, late = 30'000'000, xfer = 5'000'000;
    const int64_t done = now + compute + late + xfer;
    for (int r = 0; r < nranks; ++r) {
      CollectiveObservation o;
      o.job = job;
      o.comm_id = 42;
      o.comm_name = "dp";
      o.rank = r;
      o.nranks = nranks;
      o.global_rank = global_ranks ? 100 + r : -1;
      o.function = function;
      o.seq = i;
      o.bytes = 1 << 26;
      const int64_t offset = r * 1'000'000'000LL;
      o.start_ns = now + compute + (r == late_rank ? late : 0) + offset;
      o.stop_ns = done + offset;
      o.host = "node-" + std::to_string(r / 4);
      a.OnCollective(o);
    }
    now = done;
  }
}

TEST(FabricViewsTest, StragglersScoreTheLateRank) {
  FabricAnalysis a({}, nullptr);
  FeedJob(a, "job-1", 8, 5, 20, true);
  FeedJob(a, "job-1", 8, -1, 20, true, "AllGather");  // nobody late here: AllReduce shows rank 5
  FeedJob(a, "job-2", 4, 2, 3, false);
  ASSERT_TRUE(a.Flush(absl::FromUnixNanos(1'700'000'010'000'000'000LL)).ok());

  std::vector<RankView> ranks = a.Stragglers("job-1");
  ASSERT_EQ(ranks.size(), 8u);
  std::sort(ranks.begin(), ranks.end(),
            [](const RankView& x, const RankView& y) { return x.score > y.score; });
  const RankView& top = ranks[0];
  EXPECT_EQ(top.job, "job-1");
  EXPECT_EQ(top.rank, 105);  // the global rank
  EXPECT_EQ(top.node, "node-1");
  EXPECT_EQ(top.comm, "dp");
  EXPECT_DOUBLE_EQ(top.score, 1.0);
  EXPECT_EQ(top.instances, 20u);
  // Late by 30 ms in an instance of 35 ms (the others' kernels: 30 ms waiting + 5 ms transfer).
  EXPECT_NEAR(top.margin, 30.0 / 35.0, 1e-9);
  EXPECT_NEAR(top.wait_fraction, 0.0, 1e-9);  // it waits for no one
  for (size_t i = 1; i < ranks.size(); ++i) {
    EXPECT_EQ(ranks[i].score, 0.0) << ranks[i].rank;
    EXPECT_EQ(ranks[i].margin, 0.0);
    EXPECT_NEAR(ranks[i].wait_fraction, 30.0 / 35.0, 1e-6) << ranks[i].rank;  // AllReduce's
  }

  std::vector<RankView> two = a.Stragglers("job-2");
  ASSERT_EQ(two.size(), 4u);
  for (const RankView& r : two) {
    EXPECT_EQ(r.instances, 3u);
    if (r.rank == 2) {
      EXPECT_DOUBLE_EQ(r.score, 1.0);  // no global ranks: the rank in the communicator
    } else {
      EXPECT_EQ(r.score, 0.0);
    }
  }
  EXPECT_EQ(a.Stragglers("").size(), 12u);
  EXPECT_TRUE(a.Stragglers("job-3").empty());
}

}  // namespace
}  // namespace ringside::analysis
