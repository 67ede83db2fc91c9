// Leaves from the agents' LLDP and netdev info records (daemon/aggregator/topology/lldp_topology.h).
#include "daemon/aggregator/topology/lldp_topology.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ringside::daemon {
namespace {

v1::InfoRecord Netdev(const std::string& netdev, const std::string& rdma_device) {
  v1::InfoRecord r;
  r.set_source("netdev");
  r.set_device(netdev);
  if (!rdma_device.empty()) {
    (*r.mutable_labels())["rdma_device"] = rdma_device;
    (*r.mutable_labels())["rdma_port"] = "1";
  }
  return r;
}

v1::InfoRecord Lldp(const std::string& netdev, const std::string& chassis_name,
                    const std::string& port, const std::string& chassis_id = "0c:29:00:00:00:01") {
  v1::InfoRecord r;
  r.set_source("lldp");
  r.set_device(netdev);
  if (!chassis_name.empty()) (*r.mutable_labels())["chassis_name"] = chassis_name;
  (*r.mutable_labels())["chassis_id"] = chassis_id;
  (*r.mutable_labels())["port_id"] = port;
  (*r.mutable_labels())["port_descr"] = port;
  (*r.mutable_labels())["mgmt_addr"] = "10.1.0.1";
  return r;
}

v1::SeriesDefs Defs(std::vector<v1::InfoRecord> records) {
  v1::SeriesDefs d;
  d.set_has_info(true);
  for (v1::InfoRecord& r : records) *d.add_info() = std::move(r);
  return d;
}

class LldpTopologyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // node-a, node-b on leaf-1; node-c on leaf-2; every node's eth0 on the management switch.
    t_.OnInfo("node-a", Defs({Netdev("eth0", ""), Netdev("eth2", "mlx5_0"),
                              Lldp("eth0", "mgmt-sw", "ge-0/0/1"), Lldp("eth2", "leaf-1", "Ethernet1")}));
    t_.OnInfo("node-b", Defs({Netdev("eth0", ""), Netdev("eth2", "mlx5_0"),
                              Lldp("eth0", "mgmt-sw", "ge-0/0/2"), Lldp("eth2", "leaf-1", "Ethernet2")}));
    t_.OnInfo("node-c", Defs({Netdev("eth0", ""), Netdev("eth2", "mlx5_0"),
                              Lldp("eth0", "mgmt-sw", "ge-0/0/3"), Lldp("eth2", "leaf-2", "Ethernet1")}));
  }
  LldpTopology t_;
};

TEST_F(LldpTopologyTest, PeersMapEachRocePortToItsSwitchAndPort) {
  std::vector<LldpPortPeer> peers = t_.Peers();
  ASSERT_EQ(peers.size(), 6u);
  const LldpPortPeer& b = peers[3];  // node-b eth2
  EXPECT_EQ(b.node, "node-b");
  EXPECT_EQ(b.netdev, "eth2");
  EXPECT_EQ(b.rdma_device, "mlx5_0");
  EXPECT_EQ(b.rdma_port, "1");
  EXPECT_EQ(b.switch_name, "leaf-1");
  EXPECT_EQ(b.switch_port, "Ethernet2");
  EXPECT_EQ(b.mgmt_addr, "10.1.0.1");
  EXPECT_EQ(peers[2].netdev, "eth0");
  EXPECT_EQ(peers[2].rdma_device, "") << "the management NIC is no RoCE port";
}

TEST_F(LldpTopologyTest, LeavesAreTheSwitchesOfHostsRocePorts) {
  EXPECT_EQ(t_.NodeSwitchLines(), "node-a leaf-1\nnode-b leaf-1\nnode-c leaf-2\n");
  auto leaves = LldpLeaves(t_.Peers());
  ASSERT_EQ(leaves.size(), 2u);
  EXPECT_EQ(leaves["leaf-1"], (std::vector<std::string>{"node-a", "node-b"}));

  absl::StatusOr<analysis::Topology> topo = t_.ToTopology();
  ASSERT_TRUE(topo.ok()) << topo.status();
  EXPECT_EQ(topo->leaves(), 2u);
  EXPECT_EQ(topo->HostsOn("leaf-1"), (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(topo->LeavesOf("node-c"), (std::vector<std::string>{"leaf-2"}));
  EXPECT_EQ(topo->LeafOf("node-a", "mlx5_0"), "leaf-1");
}

TEST_F(LldpTopologyTest, RecablingMovesTheNodeToItsNewLeaf) {
  // The same set again, or a change that moves no node to another leaf: nothing to rebuild.
  EXPECT_FALSE(t_.OnInfo("node-c", Defs({Netdev("eth0", ""), Netdev("eth2", "mlx5_0"),
                                         Lldp("eth0", "mgmt-sw", "ge-0/0/3"),
                                         Lldp("eth2", "leaf-2", "Ethernet1")})));
  EXPECT_FALSE(t_.OnInfo("node-c", Defs({Netdev("eth2", "mlx5_0"), Lldp("eth2", "leaf-2", "Ethernet9")})));
  EXPECT_TRUE(
      t_.OnInfo("node-c", Defs({Netdev("eth2", "mlx5_0"), Lldp("eth2", "leaf-1", "Ethernet3")})));
  EXPECT_EQ(t_.NodeSwitchLines(), "node-a leaf-1\nnode-b leaf-1\nnode-c leaf-1\n");
  // Info without has_info is not a complete set: ignored.
  v1::SeriesDefs partial = Defs({Netdev("eth2", "mlx5_0"), Lldp("eth2", "leaf-9", "Ethernet3")});
  partial.set_has_info(false);
  t_.OnInfo("node-c", partial);
  EXPECT_EQ(t_.NodeSwitchLines(), "node-a leaf-1\nnode-b leaf-1\nnode-c leaf-1\n");
  EXPECT_TRUE(t_.ForgetNode("node-c"));
  EXPECT_FALSE(t_.ForgetNode("node-c"));
  EXPECT_EQ(t_.NodeSwitchLines(), "node-a leaf-1\nnode-b leaf-1\n");
}

TEST(LldpTopologyRulesTest, HostToHostCablesAndUnnamedSwitches) {
  LldpTopology t;
  // node-x's RoCE port is cabled straight to node-y (which runs an agent): no leaf.
  t.OnInfo("node-x", Defs({Netdev("eth2", "mlx5_0"), Lldp("eth2", "node-y", "eth2")}));
  t.OnInfo("node-y", Defs({Netdev("eth2", "mlx5_0"), Lldp("eth2", "node-x", "eth2")}));
  // A switch that sends no system name is named by its chassis id; a name with a space becomes
  // one column.
  t.OnInfo("node-z", Defs({Netdev("eth2", "mlx5_0"), Netdev("eth3", "mlx5_1"),
                           Lldp("eth2", "", "Ethernet4", "0c:29:00:00:00:09"),
                           Lldp("eth3", "rack 7 leaf", "Ethernet5")}));
  EXPECT_EQ(t.NodeSwitchLines(), "node-z 0c:29:00:00:00:09\nnode-z rack_7_leaf\n");
  absl::StatusOr<analysis::Topology> topo = t.ToTopology();
  ASSERT_TRUE(topo.ok()) << topo.status();
  EXPECT_EQ(topo->LeavesOf("node-z"),
            (std::vector<std::string>{"0c:29:00:00:00:09", "rack_7_leaf"}));

  LldpTopology empty;
  EXPECT_EQ(empty.ToTopology().status().code(), absl::StatusCode::kNotFound);
}

TEST(LldpTopologyFeedTest, HandsANewTopologyToTheAnalysisOnlyWhenLeavesChange) {
  analysis::FabricAnalysis analysis(analysis::FabricAnalysisOptions{}, nullptr);
  LldpTopologyFeed feed;
  EXPECT_EQ(feed.current(), nullptr);
  std::string line = feed.OnInfo(
      "node-a", Defs({Netdev("eth2", "mlx5_0"), Lldp("eth2", "leaf-1", "Ethernet1")}), &analysis);
  EXPECT_EQ(line, "topology from LLDP (after node-a's update): 1 leaves, 1 hosts");
  ASSERT_NE(feed.current(), nullptr);
  EXPECT_EQ(feed.current()->LeavesOf("node-a"), (std::vector<std::string>{"leaf-1"}));
  const analysis::Topology* first = feed.current();

  // Same leaves (another port on the same switch): nothing rebuilt.
  EXPECT_EQ(feed.OnInfo("node-a", Defs({Netdev("eth2", "mlx5_0"), Lldp("eth2", "leaf-1", "Ethernet5")}),
                        &analysis),
            "");
  EXPECT_EQ(feed.current(), first);

  // Recabled to leaf-2: a new topology.
  line = feed.OnInfo("node-a", Defs({Netdev("eth2", "mlx5_0"), Lldp("eth2", "leaf-2", "Ethernet1")}),
                     &analysis);
  EXPECT_FALSE(line.empty());
  EXPECT_EQ(feed.current()->LeavesOf("node-a"), (std::vector<std::string>{"leaf-2"}));

  // Unplugged: no topology left, and the analysis is told so.
  line = feed.OnInfo("node-a", Defs({Netdev("eth2", "mlx5_0")}), &analysis);
  EXPECT_EQ(line, "topology from LLDP: none (after node-a's update)");
  EXPECT_EQ(feed.current(), nullptr);
}

}  // namespace
}  // namespace ringside::daemon
