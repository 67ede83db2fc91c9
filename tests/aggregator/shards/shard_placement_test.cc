// The agent's own shard placement (daemon/agent/shard_placement.h): the leaf it takes from LLDP is
// the one the aggregator derives from the same records and the one a `node switch` file naming
// those switches gives, so all three place the node on the same shard; management NICs do not
// count; recabling moves the node, a neighbour that times out does not.
#include "daemon/agent/shard_placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/shard_map.h"
#include "analysis/topology.h"
#include "collectors/ibmad/subnet_graph.h"
#include "collectors/lldp/lldp_collector.h"
#include "daemon/aggregator/topology/lldp_topology.h"
#include "prometheus/text_serializer.h"
#include "tests/testing/prom_text.h"

namespace ringside::daemon {
namespace {

using collectors::InfoRecord;

InfoRecord Netdev(const std::string& netdev, const std::string& rdma_device = "") {
  InfoRecord r{"netdev", netdev, "", {}};
  if (!rdma_device.empty()) {
    r.labels["rdma_device"] = rdma_device;
    r.labels["rdma_port"] = "1";
  }
  return r;
}

collectors::LldpNeighbor Neighbor(const std::string& netdev, const std::string& name,
                                  const std::string& chassis_id, const std::string& port) {
  collectors::LldpNeighbor n;
  n.netdev = netdev;
  n.protocol = "LLDP";
  n.chassis_id_subtype = "mac";
  n.chassis_id = chassis_id;
  n.chassis_name = name;
  n.port_id_subtype = "ifname";
  n.port_id = port;
  return n;
}

std::vector<const InfoRecord*> Ptrs(const std::vector<InfoRecord>& records) {
  std::vector<const InfoRecord*> out;
  for (const InfoRecord& r : records) out.push_back(&r);
  return out;
}

// The same records as the aggregator receives them.
NodeInfoRecords OnTheWire(const std::vector<InfoRecord>& records) {
  NodeInfoRecords out;
  for (const InfoRecord& r : records) {
    v1::InfoRecord& p = out.records.emplace_back();
    p.set_source(r.source);
    p.set_device(r.device);
    p.set_port(r.port);
    for (const auto& [k, v] : r.labels) (*p.mutable_labels())[k] = v;
  }
  return out;
}

std::shared_ptr<const analysis::ShardMap> FourShards() {
  absl::StatusOr<analysis::ShardMap> m = analysis::ShardMap::Parse(
      "shard-0 a0:9472 b0:9472\n"
      "shard-1 a1:9472 b1:9472\n"
      "shard-2 a2:9472 b2:9472\n"
      "shard-3 a3:9472 b3:9472\n");
  EXPECT_TRUE(m.ok()) << m.status();
  return std::make_shared<const analysis::ShardMap>(*std::move(m));
}

// gpu-07: a management NIC on a management switch, two RoCE ports on two leaves (one with a
// space in its system name), one netdev whose neighbour sent only a chassis id.
std::vector<InfoRecord> Gpu07() {
  return {
      Netdev("eno1"),
      collectors::LldpInfoRecord(Neighbor("eno1", "mgmt-sw 1", "0c:00:00:00:00:01", "Gi1/0/7")),
      Netdev("ens1f0", "mlx5_0"),
      collectors::LldpInfoRecord(Neighbor("ens1f0", "rack 3 leaf", "0c:00:00:00:03:00", "Eth1/7")),
      Netdev("ens1f1", "mlx5_1"),
      collectors::LldpInfoRecord(Neighbor("ens1f1", "", "0c:00:00:00:02:00", "Eth1/7")),
      Netdev("lo"),
  };
}

TEST(ShardPlacementTest, LldpLeafIsTheAggregatorsAndTheFilesLeafSoTheShardIsTheSame) {
  const std::vector<InfoRecord> records = Gpu07();
  // Of its RoCE ports' switches, the first in sorted order: the MAC-only one sorts first.
  const std::string leaf = LldpLeafOfNode("gpu-07", Ptrs(records));
  EXPECT_EQ(leaf, "0c:00:00:00:02:00");

  // The aggregator, from the same records (another node on one of the leaves too).
  std::map<std::string, NodeInfoRecords> nodes;
  nodes["gpu-07"] = OnTheWire(records);
  nodes["gpu-08"] = OnTheWire({Netdev("ens1f0", "mlx5_0"),
                               collectors::LldpInfoRecord(Neighbor(
                                   "ens1f0", "rack 3 leaf", "0c:00:00:00:03:00", "Eth1/8"))});
  const std::string lines = LldpNodeSwitchLines(LldpPeers(nodes));
  EXPECT_EQ(lines,
            "gpu-07 0c:00:00:00:02:00\n"
            "gpu-07 rack_3_leaf\n"
            "gpu-08 rack_3_leaf\n");
  absl::StatusOr<analysis::Topology> from_aggregator =
      analysis::Topology::Parse(lines, analysis::Topology::Format::kNodeSwitchMap);
  ASSERT_TRUE(from_aggregator.ok()) << from_aggregator.status();
  // An operator's file naming the same switches, in another order.
  absl::StatusOr<analysis::Topology> file = analysis::Topology::Parse(
      "# node switch\ngpu-07 rack_3_leaf\ngpu-07 0c:00:00:00:02:00\n",
      analysis::Topology::Format::kNodeSwitchMap);
  ASSERT_TRUE(file.ok()) << file.status();

  const std::string key = PlacementKey(ShardPlacementMode::kAuto, "gpu-07", nullptr, leaf);
  EXPECT_EQ(key, "leaf:0c:00:00:00:02:00");
  EXPECT_EQ(key, analysis::ShardMap::NodePlacementKey("gpu-07", &*from_aggregator));
  EXPECT_EQ(key, analysis::ShardMap::NodePlacementKey("gpu-07", &*file));

  auto map = FourShards();
  ShardPlacement by_lldp(map, ShardPlacementMode::kAuto, "gpu-07", nullptr, leaf);
  EXPECT_TRUE(by_lldp.UsesDiscovery());
  EXPECT_EQ(by_lldp.key(), key);
  EXPECT_EQ(by_lldp.shard(), map->shards()[map->ShardOfNode("gpu-07", &*file)].name);
  EXPECT_EQ(by_lldp.replicas(), map->shards()[map->ShardOfNode("gpu-07", &*file)].replicas);

  // The same from lldpd's answer read directly (the wait at start), with a second neighbour
  // on ens1f0 that the collector would not take either.
  std::vector<collectors::LldpNeighbor> read = {
      Neighbor("eno1", "mgmt-sw 1", "0c:00:00:00:00:01", "Gi1/0/7"),
      Neighbor("ens1f0", "rack 3 leaf", "0c:00:00:00:03:00", "Eth1/7"),
      Neighbor("ens1f0", "aaa-other", "0c:00:00:00:09:00", "Eth9"),
      Neighbor("ens1f1", "", "0c:00:00:00:02:00", "Eth1/7"),
  };
  std::map<std::string, collectors::RdmaPortRef> rdma = {{"ens1f0", {"mlx5_0", "1"}},
                                                         {"ens1f1", {"mlx5_1", "1"}}};
  EXPECT_EQ(LldpLeafFromNeighbors("gpu-07", read, rdma), leaf);
  read.pop_back();  // ens1f1 silent: the other leaf, named as the file names it
  EXPECT_EQ(LldpLeafFromNeighbors("gpu-07", read, rdma), "rack_3_leaf");
}

TEST(ShardPlacementTest, ManagementNicsAndCablesBackToTheHostAreNoLeaf) {
  const std::vector<InfoRecord> mgmt_only = {
      Netdev("eno1"),
      collectors::LldpInfoRecord(Neighbor("eno1", "mgmt-sw", "0c:00:00:00:00:01", "Gi1/0/7")),
      Netdev("ens1f0", "mlx5_0"),  // a RoCE port without a neighbour
  };
  EXPECT_EQ(LldpLeafOfNode("gpu-07", Ptrs(mgmt_only)), "");
  // The management switch is not even a candidate when an RDMA device is known elsewhere.
  std::vector<collectors::LldpNeighbor> read = {
      Neighbor("eno1", "mgmt-sw", "0c:00:00:00:00:01", "Gi1/0/7"),
      Neighbor("ens1f0", "gpu-07", "0c:00:00:00:07:00", "ens1f1")};  // looped back to itself
  EXPECT_EQ(LldpLeafFromNeighbors("gpu-07", read, {{"ens1f0", {"mlx5_0", "1"}}}), "");

  ShardPlacement p(FourShards(), ShardPlacementMode::kAuto, "gpu-07", nullptr,
                   LldpLeafOfNode("gpu-07", Ptrs(mgmt_only)));
  EXPECT_EQ(p.key(), "node:gpu-07");
}

// Two leaves that the four-shard map puts on different shards.
std::pair<std::string, std::string> LeavesOnTwoShards(const analysis::ShardMap& map) {
  const size_t first = map.ShardOfKey("leaf:leaf-00");
  for (int i = 1; i < 100; ++i) {
    std::string other = absl::StrCat("leaf-", i < 10 ? "0" : "", i);
    if (map.ShardOfKey("leaf:" + other) != first) return {"leaf-00", other};
  }
  return {"", ""};
}

TEST(ShardPlacementTest, RecablingMovesTheNodeAndATimedOutNeighbourDoesNot) {
  auto map = FourShards();
  const auto [a, b] = LeavesOnTwoShards(*map);
  ASSERT_FALSE(b.empty());
  ShardPlacement p(map, ShardPlacementMode::kLldp, "gpu-07", nullptr, a);
  const std::string shard_a = p.shard();
  EXPECT_EQ(p.key(), "leaf:" + a);

  // Same leaf again, or nothing (lldpd's TTL ran out while the port was down): no change.
  EXPECT_FALSE(p.Update(a).key_changed);
  EXPECT_FALSE(p.Update("").key_changed);
  EXPECT_EQ(p.key(), "leaf:" + a);
  EXPECT_EQ(p.moves(), 0u);

  // Recabled to leaf b.
  ShardPlacement::Change c = p.Update(b);
  EXPECT_TRUE(c.key_changed);
  EXPECT_TRUE(c.moved);
  EXPECT_EQ(c.from, shard_a);
  EXPECT_EQ(c.to, map->shards()[map->ShardOfKey("leaf:" + b)].name);
  EXPECT_NE(c.to, c.from);
  EXPECT_EQ(c.key, "leaf:" + b);
  EXPECT_EQ(c.replicas, map->shards()[map->ShardOfKey("leaf:" + b)].replicas);
  EXPECT_EQ(p.shard(), c.to);
  EXPECT_EQ(p.moves(), 1u);

  // /metrics: where it is now, what placed it, how often it moved.
  testing::PromText text =
      testing::ParsePromText(prometheus::TextSerializer().Serialize(p.MetricFamilies()));
  auto info = text.Find("ringside_agent_shard_info", {{"node", "gpu-07"}});
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].value, 1);
  EXPECT_EQ(info[0].labels["shard"], c.to);
  EXPECT_EQ(info[0].labels["placed_by"], "leaf:" + b);
  EXPECT_EQ(info[0].labels["placement"], "lldp");
  auto moves = text.Find("ringside_agent_shard_moves_total", {{"node", "gpu-07"}});
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].value, 1);
  EXPECT_EQ(text.types["ringside_agent_shard_moves_total"], "counter");
  EXPECT_EQ(text.types["ringside_agent_shard_info"], "gauge");
}

TEST(ShardPlacementTest, LldpNamingALeafAfterTheStartMovesANodePlacedByName) {
  auto map = FourShards();
  ShardPlacement p(map, ShardPlacementMode::kAuto, "gpu-07", nullptr);
  EXPECT_EQ(p.key(), "node:gpu-07");
  EXPECT_EQ(p.shard(), map->shards()[map->ShardOfNode("gpu-07")].name);
  ShardPlacement::Change c = p.Update("rack_3_leaf");
  EXPECT_TRUE(c.key_changed);
  EXPECT_EQ(c.key, "leaf:rack_3_leaf");
  EXPECT_EQ(c.moved, map->ShardOfKey("leaf:rack_3_leaf") != map->ShardOfNode("gpu-07"));
  EXPECT_EQ(p.moves(), c.moved ? 1u : 0u);
}

TEST(ShardPlacementTest, ModesDecideWhatPlaces) {
  absl::StatusOr<analysis::Topology> file = analysis::Topology::Parse(
      "gpu-07 leaf-file\n", analysis::Topology::Format::kNodeSwitchMap);
  ASSERT_TRUE(file.ok());
  auto topo = std::make_shared<const analysis::Topology>(*std::move(file));
  auto map = FourShards();

  // auto: the file when it knows the node, and then discovery changes nothing.
  ShardPlacement by_file(map, ShardPlacementMode::kAuto, "gpu-07", topo, "leaf-lldp");
  EXPECT_EQ(by_file.key(), "leaf:leaf-file");
  EXPECT_FALSE(by_file.UsesDiscovery());
  EXPECT_FALSE(by_file.Update("leaf-other").key_changed);
  // auto, a node the file does not know: LLDP.
  ShardPlacement unknown(map, ShardPlacementMode::kAuto, "gpu-99", topo, "leaf-lldp");
  EXPECT_EQ(unknown.key(), "leaf:leaf-lldp");
  EXPECT_TRUE(unknown.UsesDiscovery());
  // lldp: the file is not asked.
  ShardPlacement lldp(map, ShardPlacementMode::kLldp, "gpu-07", topo, "leaf-lldp");
  EXPECT_EQ(lldp.key(), "leaf:leaf-lldp");
  // topology: LLDP is not asked.
  ShardPlacement topology(map, ShardPlacementMode::kTopology, "gpu-99", topo, "leaf-lldp");
  EXPECT_EQ(topology.key(), "node:gpu-99");
  EXPECT_FALSE(topology.UsesDiscovery());
  // name: never moves.
  ShardPlacement name(map, ShardPlacementMode::kName, "gpu-07", topo, "leaf-lldp");
  EXPECT_EQ(name.key(), "node:gpu-07");
  EXPECT_FALSE(name.Update("leaf-x").key_changed);

  for (const char* m : {"auto", "topology", "lldp", "name"}) {
    absl::StatusOr<ShardPlacementMode> parsed = ParseShardPlacementMode(m);
    ASSERT_TRUE(parsed.ok()) << m;
    EXPECT_EQ(ShardPlacementModeName(*parsed), m);
  }
  EXPECT_FALSE(ParseShardPlacementMode("leaf").ok());
}

TEST(ShardPlacementTest, OnSnapshotReadsTheNetdevAndLldpTables) {
  auto netdev = std::make_shared<collectors::SeriesTable>();
  netdev->info = {Netdev("ens1f0", "mlx5_0")};
  auto lldp = std::make_shared<collectors::SeriesTable>();
  lldp->info = {collectors::LldpInfoRecord(Neighbor("ens1f0", "leaf-a", "0c:a", "Eth1"))};
  AgentSnapshot snap;
  snap.node = "gpu-07";
  snap.collectors.push_back({"netdev", netdev});
  snap.collectors.push_back({"lldp", lldp});
  EXPECT_EQ(LldpLeafOfSnapshot(snap), "leaf-a");

  ShardPlacement p(FourShards(), ShardPlacementMode::kLldp, "gpu-07", nullptr);
  EXPECT_EQ(p.OnSnapshot(snap).key, "leaf:leaf-a");
  EXPECT_EQ(p.key(), "leaf:leaf-a");
  // Recabled: the collector publishes a new table.
  auto recabled = std::make_shared<collectors::SeriesTable>();
  recabled->info = {collectors::LldpInfoRecord(Neighbor("ens1f0", "leaf-b", "0c:b", "Eth1"))};
  snap.collectors[1].table = recabled;
  EXPECT_EQ(p.OnSnapshot(snap).key, "leaf:leaf-b");
  EXPECT_EQ(p.key(), "leaf:leaf-b");
}

// A subnet with a spine, two leaf switches under it and gpu-07's two HCAs, one on each leaf (as a
// discovery pass finds it).
collectors::SubnetGraph TwoLeafSubnet() {
  collectors::SubnetGraph g;
  auto node = [&](uint64_t guid, uint8_t type, uint8_t ports, const std::string& desc, uint16_t lid) {
    collectors::DiscoveredNode& n = g.nodes[guid];
    n.info.node_type = type;
    n.info.num_ports = ports;
    n.info.node_guid = guid;
    n.info.port_guid = guid;
    n.info.system_image_guid = guid;
    n.info.vendor_id = 0x2c9;
    n.description = desc;
    n.lid = lid;
  };
  node(0x200, 2, 8, "MF0;leafA:MQM8700/U1", 2);
  node(0x300, 2, 8, "MF0;leafB:MQM8700/U1", 3);
  node(0x900, 2, 8, "MF0;spine1:MQM8700/U1", 9);
  node(0x700, 1, 1, "gpu-07 mlx5_0", 7);
  node(0x701, 1, 1, "gpu-07 mlx5_1", 8);
  auto cable = [&](uint64_t a, uint8_t a_port, uint64_t b, uint8_t b_port) {
    collectors::DiscoveredPort p;
    p.state = 4;
    p.phys_state = 5;
    p.width_active = 2;
    p.speed_active = 4;
    for (auto [guid, num] : {std::pair{a, a_port}, std::pair{b, b_port}}) {
      collectors::DiscoveredNode& n = g.nodes[guid];
      p.num = num;
      p.lid = n.lid;
      p.port_guid = n.info.node_type == 1 ? guid : 0;
      n.ports[num] = p;
    }
    g.links.push_back({a, a_port, b, b_port});
  };
  cable(0x200, 1, 0x900, 1);
  cable(0x300, 1, 0x900, 2);
  cable(0x200, 3, 0x700, 1);
  cable(0x300, 5, 0x701, 1);
  std::sort(g.links.begin(), g.links.end());
  g.start_guid = 0x700;
  g.complete = true;
  return g;
}

TEST(ShardPlacementTest, InfinibandLeafFromTheAgentsOwnDiscoveryIsTheIbnetdiscoverFilesLeaf) {
  const collectors::SubnetGraph g = TwoLeafSubnet();
  const std::vector<InfoRecord> records = collectors::GraphInfoRecords(g);
  const std::string leaf = IbLeafOfNode("gpu-07", records);
  EXPECT_EQ(leaf, "0x0000000000000200");
  EXPECT_EQ(IbLeafOfNode("gpu-99", records), "");
  EXPECT_EQ(IbLeafOfNode("gpu-07", {}), "");

  // ibnetdiscover's text of the same fabric, as an operator's --topology file.
  absl::StatusOr<analysis::Topology> file = analysis::Topology::Parse(
      collectors::IbnetdiscoverText(g), analysis::Topology::Format::kIbnetdiscover);
  ASSERT_TRUE(file.ok()) << file.status();
  const std::string key = PlacementKey(ShardPlacementMode::kAuto, "gpu-07", nullptr, leaf);
  EXPECT_EQ(key, analysis::ShardMap::NodePlacementKey("gpu-07", &*file));

  // From a cycle: in auto mode the discovery's leaf wins over LLDP's (as on the aggregator); in
  // lldp mode only LLDP counts.
  auto ib = std::make_shared<collectors::SeriesTable>();
  ib->info = records;
  auto netdev = std::make_shared<collectors::SeriesTable>();
  netdev->info = {Netdev("ens1f0", "mlx5_0")};
  auto lldp = std::make_shared<collectors::SeriesTable>();
  lldp->info = {collectors::LldpInfoRecord(Neighbor("ens1f0", "roce-leaf", "0c:a", "Eth1"))};
  AgentSnapshot snap;
  snap.node = "gpu-07";
  snap.collectors.push_back({"netdev", netdev});
  snap.collectors.push_back({"lldp", lldp});
  snap.collectors.push_back({"ibdisc", ib});
  auto map = FourShards();
  ShardPlacement placed(map, ShardPlacementMode::kAuto, "gpu-07", nullptr);
  placed.OnSnapshot(snap);
  EXPECT_EQ(placed.key(), key);
  EXPECT_EQ(placed.shard(), map->shards()[map->ShardOfNode("gpu-07", &*file)].name);
  ShardPlacement lldp_only(map, ShardPlacementMode::kLldp, "gpu-07", nullptr);
  lldp_only.OnSnapshot(snap);
  EXPECT_EQ(lldp_only.key(), "leaf:roce-leaf");

  // The next pass finds mlx5_0 gone (its cable pulled): the node's first leaf is now leafB.
  collectors::SubnetGraph g2 = g;
  g2.links.erase(std::find(g2.links.begin(), g2.links.end(),
                           collectors::DiscoveredLink{0x200, 3, 0x700, 1}));
  g2.nodes.erase(0x700);
  auto ib2 = std::make_shared<collectors::SeriesTable>();
  ib2->info = collectors::GraphInfoRecords(g2);
  snap.collectors[2].table = ib2;
  ShardPlacement::Change c = placed.OnSnapshot(snap);
  EXPECT_TRUE(c.key_changed);
  EXPECT_EQ(c.key, "leaf:0x0000000000000300");
}

TEST(ShardPlacementTest, WaitForLeafPollsUntilALeafOrTheWaitEnds) {
  std::atomic<int> calls{0};
  absl::StatusOr<std::string> leaf = WaitForLeaf(
      [&]() -> absl::StatusOr<std::string> {
        return ++calls >= 3 ? std::string("leaf-a") : std::string();
      },
      absl::Seconds(10), absl::Milliseconds(5));
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  EXPECT_EQ(*leaf, "leaf-a");
  EXPECT_EQ(calls.load(), 3);
  calls = 0;
  const absl::Time start = absl::Now();
  leaf = WaitForLeaf([&]() -> absl::StatusOr<std::string> { ++calls; return std::string(); },
                     absl::Milliseconds(60), absl::Milliseconds(10));
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  EXPECT_EQ(*leaf, "");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_GE(calls.load(), 2);
}

// No lldpd socket (or no liblldpctl), or a socket the agent may not read: waiting mends nothing,
// so the agent does not wait. lldpd restarting (the socket there, nobody answering) is waited out.
TEST(ShardPlacementTest, WaitForLeafGivesUpAtOnceWhenThereIsNoLldpd) {
  for (const absl::Status& error :
       {absl::NotFoundError("no lldpd socket at /run/lldpd.socket"),
        absl::PermissionDeniedError("cannot reach /run/lldpd.socket: Permission denied")}) {
    int calls = 0;
    const absl::Time start = absl::Now();
    absl::StatusOr<std::string> leaf = WaitForLeaf(
        [&]() -> absl::StatusOr<std::string> {
          ++calls;
          return error;
        },
        absl::Seconds(30), absl::Milliseconds(5));
    EXPECT_EQ(leaf.status(), error);
    EXPECT_EQ(calls, 1) << error;
    EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << error;
  }
  int calls = 0;
  absl::StatusOr<std::string> leaf = WaitForLeaf(
      [&]() -> absl::StatusOr<std::string> {
        if (++calls < 3) return absl::UnavailableError("connect /run/lldpd.socket: refused");
        return std::string("leaf-b");
      },
      absl::Seconds(30), absl::Milliseconds(5));
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  EXPECT_EQ(*leaf, "leaf-b");
  EXPECT_EQ(calls, 3);
}

}  // namespace
}  // namespace ringside::daemon
