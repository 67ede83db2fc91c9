// DiscoveredFabric: the graphs of several discovering agents merged (same subnet: the newest
// received wins node by node; disjoint planes: unioned; silent reporters dropped).
#include "daemon/aggregator/topology/discovered_fabric.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectors/ibmad/subnet_graph.h"
#include "gtest/gtest.h"
#include "tests/testing/fat_tree_graph.h"
#include "tests/testing/graph_info_defs.h"

namespace ringside::daemon {
namespace {

using collectors::DiscoveredLink;
using collectors::SubnetGraph;

using testing::AddIbNode;
using FatTree = testing::FatTreeGraph;

v1::SeriesDefs Defs(const SubnetGraph& g) {
  v1::SeriesDefs defs;
  v1::InfoRecord* other = defs.add_info();  // the agent's other records are ignored
  other->set_source("infiniband_device");
  other->set_device("mlx5_0");
  testing::AddGraphInfo(g, &defs);
  return defs;
}

// The cable between a and b is down: the pass no longer has it, nor a node only it led to.
void Unplug(SubnetGraph& g, uint64_t a, uint64_t b) {
  std::erase_if(g.links, [&](const DiscoveredLink& l) {
    return (l.a_guid == a && l.b_guid == b) || (l.a_guid == b && l.b_guid == a);
  });
  std::erase_if(g.nodes, [&](const auto& n) {
    return std::none_of(g.links.begin(), g.links.end(), [&](const DiscoveredLink& l) {
      return l.a_guid == n.first || l.b_guid == n.first;
    });
  });
}

struct Harness {
  std::vector<std::string> log;
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  DiscoveredFabric fabric{[this](const std::string& m) { log.push_back(m); },
                          {.stale_after = absl::Minutes(15), .now = [this] { return now; }}};
  std::string Log() const { return absl::StrJoin(log, "\n"); }
  bool Logged(absl::string_view s) const {
    return std::any_of(log.begin(), log.end(), [&](const std::string& l) {
      return absl::StrContains(l, s);
    });
  }
  std::string LeafOf(int host, int plane) const {
    return fabric.current()->LeafOf(FatTree::Host(host), absl::StrCat("mlx5_", plane));
  }
};

TEST(DiscoveredFabricTest, EqualGraphsFromTwoReportersChangeNothing) {
  Harness h;
  const FatTree t{1};
  h.fabric.OnInfo("disc1", Defs(t.Build()));
  ASSERT_EQ(h.log.size(), 1u) << h.Log();
  EXPECT_EQ(h.log[0],
            "fabric discovery from disc1: 14 nodes, 16 links, 6 switches, 8 CAs on 4 leaves");
  auto first = h.fabric.current();
  h.fabric.OnInfo("disc2", Defs(t.Build()));
  EXPECT_EQ(h.log.size(), 1u) << h.Log();
  EXPECT_EQ(h.fabric.updates(), 1u);
  EXPECT_EQ(h.fabric.current(), first);  // the same object: nothing to redo downstream
  EXPECT_EQ(h.fabric.reporter(), "disc1, disc2");
}

TEST(DiscoveredFabricTest, SameSubnetNewestReportWinsALinkDownStaysDown) {
  Harness h;
  const FatTree t{1};
  h.fabric.OnInfo("disc1", Defs(t.Build()));
  h.fabric.OnInfo("disc2", Defs(t.Build()));
  ASSERT_EQ(h.LeafOf(3, 1), absl::StrCat("0x", absl::Hex(t.Leaf(2), absl::kZeroPad16)));

  // disc2's next pass: host3's cable and leaf4's uplink to spine2 are down.
  SubnetGraph down = t.Build();
  Unplug(down, t.Leaf(2), t.Hca(3));
  Unplug(down, t.Leaf(4), t.Spine(2));
  h.log.clear();
  h.fabric.OnInfo("disc2", Defs(down));
  EXPECT_TRUE(h.Logged("fabric discovery from disc2: link gone: \"leaf2-p1\" 0x0000001100000202[1]"
                       " - \"host3 mlx5_1\" 0x0000001100001003[1]"))
      << h.Log();
  EXPECT_TRUE(h.Logged("fabric discovery from disc2: link gone: \"spine2-p1\" 0x0000001100000102[4]"
                       " - \"leaf4-p1\" 0x0000001100000204[4]"))
      << h.Log();
  EXPECT_TRUE(h.Logged("fabric discovery from disc2: node gone: \"host3 mlx5_1\"")) << h.Log();
  EXPECT_EQ(h.log.size(), 3u) << h.Log();
  EXPECT_EQ(h.LeafOf(3, 1), "");
  EXPECT_EQ(h.LeafOf(4, 1), absl::StrCat("0x", absl::Hex(t.Leaf(2), absl::kZeroPad16)));

  // disc1's older graph, with both links, does not bring them back; not even resent (a new
  // session of disc1 repeats its info set).
  h.log.clear();
  h.fabric.OnInfo("disc1", Defs(t.Build()));
  EXPECT_TRUE(h.log.empty()) << h.Log();
  EXPECT_EQ(h.LeafOf(3, 1), "");

  // disc1's next pass sees the same: nothing changes. Then the cable is back in disc1's pass.
  h.fabric.OnInfo("disc1", Defs(down));
  EXPECT_TRUE(h.log.empty()) << h.Log();
  h.fabric.OnInfo("disc1", Defs(t.Build()));
  EXPECT_EQ(h.log.size(), 3u) << h.Log();
  EXPECT_TRUE(h.Logged("fabric discovery from disc1: new link: \"leaf2-p1\"")) << h.Log();
  EXPECT_TRUE(h.Logged("fabric discovery from disc1: new node: \"host3 mlx5_1\"")) << h.Log();
  EXPECT_NE(h.LeafOf(3, 1), "");
  EXPECT_EQ(h.fabric.updates(), 3u);
}

TEST(DiscoveredFabricTest, PartialGraphCutsOnlyItsOwnCable) {
  Harness h;
  const FatTree t{1};
  h.fabric.OnInfo("disc1", Defs(t.Build()));
  // host5 (a discoverer) behind a down cable: its pass sees its own CA and nothing else.
  SubnetGraph alone;
  alone.complete = true;
  AddIbNode(alone, t.Hca(5), testing::kIbCa, 1, "host5 mlx5_1", 0);
  h.log.clear();
  h.fabric.OnInfo("host5", Defs(alone));
  ASSERT_EQ(h.log.size(), 2u) << h.Log();
  EXPECT_TRUE(absl::StartsWith(h.log[0], "fabric discovery from host5: link gone: \"leaf3-p1\""))
      << h.Log();
  EXPECT_TRUE(absl::StartsWith(h.log[1], "fabric discovery from host5: node gone: \"host5 mlx5_1\""))
      << h.Log();
  EXPECT_EQ(h.LeafOf(5, 1), "");
  for (int host : {1, 2, 3, 4, 6, 7, 8}) EXPECT_NE(h.LeafOf(host, 1), "") << host;
  EXPECT_EQ(h.fabric.current()->switches(), 6u);
}

TEST(DiscoveredFabricTest, DisjointPlanesAreUnioned) {
  Harness h;
  const FatTree p1{1}, p2{2};
  h.fabric.OnInfo("discA", Defs(p1.Build()));
  h.fabric.OnInfo("discB", Defs(p2.Build()));
  ASSERT_EQ(h.log.size(), 2u) << h.Log();
  EXPECT_EQ(h.log[1],
            "fabric discovery from discB: 14 new nodes, 0 nodes gone, 16 new links, 0 links gone; "
            "now 28 nodes, 32 links, 12 switches, 16 CAs on 8 leaves");
  auto topo = h.fabric.current();
  ASSERT_NE(topo, nullptr);
  EXPECT_EQ(topo->hosts(), 8u);
  for (int host = 1; host <= 8; ++host) {
    EXPECT_EQ(topo->LeavesOf(FatTree::Host(host)).size(), 2u) << host;  // one leaf per plane
  }
  EXPECT_EQ(h.fabric.reporter(), "discA, discB");

  // A change in one plane leaves the other alone.
  SubnetGraph down = p2.Build();
  Unplug(down, p2.Leaf(1), p2.Hca(1));
  h.log.clear();
  h.fabric.OnInfo("discB", Defs(down));
  EXPECT_EQ(h.log.size(), 2u) << h.Log();  // the link and the CA behind it
  EXPECT_EQ(h.LeafOf(1, 2), "");
  EXPECT_NE(h.LeafOf(1, 1), "");
}

TEST(DiscoveredFabricTest, SilentReporterStopsCounting) {
  Harness h;
  const FatTree p1{1}, p2{2};
  h.fabric.OnInfo("discA", Defs(p1.Build()));
  h.fabric.OnInfo("discB", Defs(p2.Build()));
  h.now += absl::Minutes(10);
  h.fabric.OnSamples("discA", {});
  h.fabric.OnSamples("other", {});
  h.now += absl::Minutes(6);  // discB silent for 16 minutes, discA for 6
  h.log.clear();
  h.fabric.OnSamples("discA", {});
  ASSERT_FALSE(h.log.empty());
  EXPECT_EQ(h.log[0],
            "fabric discovery: no report from discB for 16m, its graph no longer counts");
  EXPECT_TRUE(h.Logged("fabric discovery without discB: 0 new nodes, 14 nodes gone")) << h.Log();
  EXPECT_EQ(h.fabric.reporter(), "discA");
  EXPECT_EQ(h.LeafOf(1, 2), "");
  EXPECT_NE(h.LeafOf(1, 1), "");

  // discA's info set no longer has the graph (discovery turned off): samples do not keep it.
  v1::SeriesDefs none;
  none.set_has_info(true);
  h.fabric.OnInfo("discA", none);
  h.now += absl::Minutes(14);
  h.fabric.OnSamples("discA", {});
  EXPECT_NE(h.fabric.current(), nullptr);
  h.now += absl::Minutes(2);
  EXPECT_TRUE(h.fabric.Expire());
  EXPECT_EQ(h.fabric.current(), nullptr);
  EXPECT_EQ(h.fabric.reporter(), "");
  EXPECT_TRUE(h.Logged("fabric discovery without discA: no discovered graph left")) << h.Log();

  // It comes back with its next report.
  h.fabric.OnInfo("discA", Defs(p1.Build()));
  EXPECT_NE(h.fabric.current(), nullptr);
  EXPECT_EQ(h.log.back(),
            "fabric discovery from discA: 14 nodes, 16 links, 6 switches, 8 CAs on 4 leaves");
}

TEST(DiscoveredFabricTest, MalformedRecordsAreRefusedWhole) {
  Harness h;
  h.fabric.OnInfo("disc1", Defs(FatTree{1}.Build()));
  v1::SeriesDefs bad;
  bad.set_has_info(true);
  v1::InfoRecord* r = bad.add_info();
  r->set_source("ib_node");
  r->set_device("not-a-guid");
  h.fabric.OnInfo("disc2", bad);
  EXPECT_TRUE(h.Logged("fabric discovery from disc2: INVALID_ARGUMENT")) << h.Log();
  EXPECT_EQ(h.fabric.updates(), 1u);
  EXPECT_EQ(h.fabric.reporter(), "disc1");
}

// Ingest threads report and sample at once:
// the end state is that of the last reports.
TEST(DiscoveredFabricTest, ConcurrentReportsAndSamples) {
  std::atomic<int> logged{0};
  DiscoveredFabric fabric([&logged](const std::string&) { logged.fetch_add(1); });
  const FatTree p1{1}, p2{2};
  SubnetGraph down = p1.Build();
  Unplug(down, p1.Leaf(1), p1.Hca(1));
  const v1::SeriesDefs full1 = Defs(p1.Build()), down1 = Defs(down), full2 = Defs(p2.Build());
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&fabric, i] {
      const std::string node = i == 0 ? "discA" : "discB";
      for (int k = 0; k < 2000; ++k) fabric.OnSamples(node, {});
    });
  }
  threads.emplace_back([&] {
    for (int k = 0; k < 50; ++k) fabric.OnInfo("discA", k % 2 == 0 ? full1 : down1);
  });
  threads.emplace_back([&] {
    for (int k = 0; k < 50; ++k) fabric.OnInfo("discB", full2);
  });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(fabric.reporter(), "discA, discB");
  std::shared_ptr<const analysis::Topology> t = fabric.current();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->LeafOf("host1", "mlx5_1"), "");  // discA's last report: host1's cable down
  EXPECT_EQ(t->LeavesOf("host2").size(), 2u);
  EXPECT_EQ(fabric.updates(), 51u);  // plane 1, plane 2, then 49 changes of discA's graph
  EXPECT_EQ(logged.load(), 1 + 1 + 49 * 2);  // each change: the cable and host1's CA
}

}  // namespace
}  // namespace ringside::daemon
