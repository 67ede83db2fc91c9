// `ringside topology --format=ibnetdiscover` of a discovered graph: the text parses back to the
// same graph (every CA cable, every switch-to-switch cable, the switches and their port counts).
// The fixtures' ibnetdiscover files are round-tripped in topology_merge_test.cc.
#include "analysis/topology_text.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "collectors/ibmad/subnet_topology.h"
#include "tests/testing/fat_tree_graph.h"

namespace ringside::analysis {
namespace {

std::vector<HcaAttachment> Sorted(const Topology& t) {
  std::vector<HcaAttachment> v = t.attachments();
  for (HcaAttachment& h : v) h.leaf.name = t.LeafName(h.leaf.id);
  std::sort(v.begin(), v.end(), [](const HcaAttachment& a, const HcaAttachment& b) {
    return std::tie(a.ca_guid, a.ca_port) < std::tie(b.ca_guid, b.ca_port);
  });
  return v;
}

TEST(TopologyTextTest, DiscoveredFatTreeRoundTrip) {
  const testing::FatTreeGraph tree{1};
  collectors::SubnetGraph g = tree.Build(/*spines=*/4, /*leaves=*/8);
  // A CA cabled by both of its ports, on two leaves.
  testing::AddIbNode(g, tree.Hca(99), testing::kIbCa, 2, "host99 mlx5_1", 200);
  testing::AddIbCable(g, tree.Leaf(1), 8, tree.Hca(99), 1);
  testing::AddIbCable(g, tree.Leaf(2), 8, tree.Hca(99), 2);
  absl::StatusOr<Topology> t = collectors::TopologyFromGraph(g);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->switch_links().size(), 32u);  // 8 leaves × 4 spines
  ASSERT_EQ(t->attachments().size(), 18u);
  EXPECT_EQ(t->switch_links().front(),
            (SwitchLink{"0x0000001100000101", 1, "0x0000001100000201", 3}));

  const std::string text = FormatIbnetdiscover(*t);
  EXPECT_TRUE(absl::StrContains(text, "Switch\t8 \"S-0000001100000101\"\t\t# \"spine1-p1\""))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "[3]\t\"S-0000001100000101\"[1]\t\t# \"spine1-p1\" lid 0"))
      << text;
  absl::StatusOr<Topology> back = Topology::Parse(text);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << text;
  EXPECT_EQ(Sorted(*back), Sorted(*t));
  EXPECT_EQ(back->switch_links(), t->switch_links());
  EXPECT_EQ(back->switch_names(), t->switch_names());
  EXPECT_EQ(back->switch_ports(), t->switch_ports());
  EXPECT_EQ(back->switches(), 12u);
  EXPECT_EQ(back->cas(), t->cas());
  EXPECT_EQ(back->hosts(), t->hosts());
  EXPECT_EQ(back->leaves(), t->leaves());
  EXPECT_EQ(FormatIbnetdiscover(*back), text);
}

// A node→switch map has no GUIDs and no switch links: hosts as CAs named by their description,
// on port 0 of the switch named in the map.
TEST(TopologyTextTest, NodeSwitchMapIsWrittenByName) {
  absl::StatusOr<Topology> t = Topology::Parse("node1 leaf-a\nnode2 leaf-a\nnode3 leaf-b\n");
  ASSERT_TRUE(t.ok()) << t.status();
  const std::string text = FormatIbnetdiscover(*t);
  EXPECT_TRUE(absl::StrContains(text, "Switch\t1 \"leaf-a\"\t\t# \"leaf-a\" base port 0")) << text;
  EXPECT_TRUE(absl::StrContains(text, "[0]\t\"node1\"[0]\t\t# \"node1\" lid 0")) << text;
  absl::StatusOr<Topology> back = Topology::Parse(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->hosts(), 3u);
  EXPECT_EQ(back->LeafOf("node3", ""), "");  // per CA now, not host-level
  EXPECT_EQ(back->LeavesOf("node3"), std::vector<std::string>{"leaf-b"});
  EXPECT_TRUE(back->switch_links().empty());
}

}  // namespace
}  // namespace ringside::analysis
