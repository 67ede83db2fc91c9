// A discovered subnet graph (collectors::SubnetGraph) of a two-level fat tree, as
// DiscoverSubnet would return it, for the tests of what the aggregator and the CLI make of one.
#ifndef RINGSIDE_TESTS_TESTING_FAT_TREE_GRAPH_H_
#define RINGSIDE_TESTS_TESTING_FAT_TREE_GRAPH_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collectors/ibmad/subnet_discovery.h"

namespace ringside::testing {

inline constexpr uint8_t kIbCa = 1;
inline constexpr uint8_t kIbSwitch = 2;

inline void AddIbNode(collectors::SubnetGraph& g, uint64_t guid, uint8_t type, uint8_t ports,
                      std::string desc, uint16_t lid) {
  collectors::DiscoveredNode& n = g.nodes[guid];
  n.info.node_guid = guid;
  n.info.port_guid = guid;
  n.info.node_type = type;
  n.info.num_ports = ports;
  n.info.vendor_id = 0x2c9;
  n.description = std::move(desc);
  n.lid = lid;
}

// An active 4x QDR cable; both nodes must be in the graph.
inline void AddIbCable(collectors::SubnetGraph& g, uint64_t a, uint8_t ap, uint64_t b,
                       uint8_t bp) {
  for (auto [guid, port] : {std::pair{a, ap}, std::pair{b, bp}}) {
    collectors::DiscoveredNode& n = g.nodes.at(guid);
    collectors::DiscoveredPort& p = n.ports[port];
    p.num = port;
    p.lid = n.lid;
    p.state = 4;
    p.phys_state = 5;
    p.width_active = 2;  // 4x
    p.speed_active = 4;  // QDR
  }
  collectors::DiscoveredLink l{a, ap, b, bp};
  if (std::pair{b, bp} < std::pair{a, ap}) l = {b, bp, a, ap};
  g.links.push_back(l);
  std::sort(g.links.begin(), g.links.end());
}

// `spines` spines, `leaves` leaves (8 ports each), 2 hosts per leaf ("host<k> mlx5_<plane>",
// cabled on leaf ports 1, 2; uplinks on leaf ports 3.. to spine port = leaf number). GUIDs start
// at (0x10 + plane) << 32, so two planes share none.
struct FatTreeGraph {
  static constexpr int kHostsPerLeaf = 2;
  int plane = 1;
  uint64_t Spine(int s) const { return (uint64_t{0x10} + plane) << 32 | (0x100 + s); }
  uint64_t Leaf(int l) const { return (uint64_t{0x10} + plane) << 32 | (0x200 + l); }
  uint64_t Hca(int h) const { return (uint64_t{0x10} + plane) << 32 | (0x1000 + h); }
  static std::string Host(int h) { return absl::StrCat("host", h); }

  collectors::SubnetGraph Build(int spines = 2, int leaves = 4) const {
    collectors::SubnetGraph g;
    g.complete = true;
    uint16_t lid = 1;
    for (int s = 1; s <= spines; ++s) {
      AddIbNode(g, Spine(s), kIbSwitch, 8, absl::StrCat("spine", s, "-p", plane), lid++);
    }
    for (int l = 1; l <= leaves; ++l) {
      AddIbNode(g, Leaf(l), kIbSwitch, 8, absl::StrCat("leaf", l, "-p", plane), lid++);
      for (int s = 1; s <= spines; ++s) {
        AddIbCable(g, Leaf(l), static_cast<uint8_t>(kHostsPerLeaf + s), Spine(s),
                   static_cast<uint8_t>(l));
      }
      for (int k = 1; k <= kHostsPerLeaf; ++k) {
        const int h = (l - 1) * kHostsPerLeaf + k;
        AddIbNode(g, Hca(h), kIbCa, 1, absl::StrCat(Host(h), " mlx5_", plane), lid++);
        AddIbCable(g, Leaf(l), static_cast<uint8_t>(k), Hca(h), 1);
      }
    }
    g.start_guid = Hca(1);
    return g;
  }
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_FAT_TREE_GRAPH_H_
