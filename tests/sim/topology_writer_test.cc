// The simulated fabric's topology in ibnetdiscover's format parses with the aggregator's own
// parser (analysis/topology.h) and puts every rail of every node under its node's leaf switch.
#include "sim/topology_writer.h"

#include "analysis/topology.h"
#include "gtest/gtest.h"
#include "sim/scenario.h"

namespace ringside::sim {
namespace {

TEST(TopologyWriterTest, IbnetdiscoverOutputParsesAndPlacesEveryRailUnderItsLeaf) {
  Scenario s = DemoScenario(8, 8, absl::Seconds(60));
  s.nodes_per_leaf = 3;  // 3 leaves, the last one partly filled
  const std::string text = IbnetdiscoverTopology(s);
  absl::StatusOr<analysis::Topology> topo = analysis::Topology::Parse(text);
  ASSERT_TRUE(topo.ok()) << topo.status();
  EXPECT_EQ(topo->format(), analysis::Topology::Format::kIbnetdiscover);
  EXPECT_EQ(topo->hosts(), 8u);
  EXPECT_EQ(topo->cas(), 64u);
  EXPECT_EQ(topo->unnamed_cas(), 0u);
  EXPECT_EQ(topo->leaves(), 3u);
  EXPECT_TRUE(topo->warnings().empty()) << topo->warnings().front();
  for (int n = 0; n < s.nodes; ++n) {
    const std::string leaf = topo->LeafOf(s.NodeName(n), "mlx5_0");
    ASSERT_FALSE(leaf.empty()) << s.NodeName(n);
    EXPECT_EQ(topo->LeafName(leaf), LeafNameOf(s, n)) << s.NodeName(n);
    for (int h = 1; h < s.gpus; ++h) {
      EXPECT_EQ(topo->LeafOf(s.NodeName(n), "mlx5_" + std::to_string(h)), leaf);
    }
  }
  EXPECT_EQ(topo->HostsOn(topo->LeafOf(s.NodeName(0), "mlx5_0")).size(), 3u);
  EXPECT_EQ(topo->HostsOn(topo->LeafOf(s.NodeName(7), "mlx5_0")).size(), 2u);
}

}  // namespace
}  // namespace ringside::sim
