// Leaf switches from LLDP (issue #16): each node's RoCE netdev mapped to the switch and switch
// port its agent's lldpd sees at the other end of the cable, from the agents' info records
// (source "netdev": netdev → RDMA device and port; source "lldp": netdev → chassis and port; see
// collectors/lldp). A switch that is the LLDP neighbour of a host's RoCE port is that host's leaf;
// the result is a `node switch` map that analysis::Topology parses (Format::kNodeSwitchMap).
//
// Only RoCE ports (netdevs with an RDMA device) count for leaves: a management NIC's switch is not
// a leaf of the training fabric. A neighbour whose system name is one of the nodes is a cable
// between two hosts, not a switch. The `node switch` format has no device column, so in a
// rail-optimised fabric a node with ports on several leaves gets one line per leaf and
// Topology::LeafOf(host, device) cannot tell which device is on which; Peers() keeps that detail.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_TOPOLOGY_LLDP_TOPOLOGY_H_
#define RINGSIDE_DAEMON_AGGREGATOR_TOPOLOGY_LLDP_TOPOLOGY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/fabric_analysis.h"
#include "analysis/topology.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::daemon {

// One netdev's LLDP peer.
struct LldpPortPeer {
  std::string node;
  std::string netdev;
  std::string rdma_device;  // empty: not a RoCE port
  std::string rdma_port;
  std::string switch_name;  // the neighbour's system name, else its chassis id
  std::string switch_id;    // chassis id
  std::string switch_port;  // the neighbour's port id (its interface name on most switches)
  std::string switch_port_descr;
  std::string mgmt_addr;
  bool operator==(const LldpPortPeer&) const = default;
};

// One node's info records as they matter here.
struct NodeInfoRecords {
  std::vector<v1::InfoRecord> records;
};

// Every netdev of every node with an LLDP neighbour, sorted by (node, netdev).
std::vector<LldpPortPeer> LldpPeers(const std::map<std::string, NodeInfoRecords>& nodes);

// `node switch` lines (sorted, unique) of the RoCE ports among `peers`, excluding host-to-host
// cables (a peer whose switch_name is a node in `peers`).
std::string LldpNodeSwitchLines(const std::vector<LldpPortPeer>& peers);

// The leaves (switch names) and their hosts, from the same rule.
std::map<std::string, std::vector<std::string>> LldpLeaves(const std::vector<LldpPortPeer>& peers);

// The RoCE ports among `peers` (host-to-host cables excluded) as host-level attachments that
// keep the detail: host, RDMA device and port, the switch (id and name: its name) and the switch
// port's name. Format kNodeSwitchMap; no attachments when there are none.
analysis::Topology LldpPortTopology(const std::vector<LldpPortPeer>& peers);

// Keeps each node's latest complete info set and derives the topology from all of them.
class LldpTopology {
 public:
  // `defs` with has_info: the node's complete set (replaces what it sent before). True when the
  // node→switch lines changed (a node gained, lost or changed a leaf).
  bool OnInfo(absl::string_view node, const v1::SeriesDefs& defs);
  bool ForgetNode(absl::string_view node);
  std::vector<LldpPortPeer> Peers() const { return LldpPeers(nodes_); }
  const std::string& NodeSwitchLines() const { return lines_; }
  // NotFound when no node has a RoCE port with a switch neighbour yet.
  absl::StatusOr<analysis::Topology> ToTopology() const;

 private:
  bool Relines();

  std::map<std::string, NodeInfoRecords> nodes_;
  std::string lines_;
};

// AnalysisHost holds one and feeds it from OnInfo, under its mutex, while no InfiniBand subnet
// discovery arrived (docs/lldp.md); it hands the detectors LldpPortTopology merged with the
// --topology file, not this feed's topology (it passes a null `analysis`).
class LldpTopologyFeed {
 public:
  // Applies the node's info set. When a node's leaves changed, builds the new Topology, hands it
  // to `analysis` (FabricAnalysis::SetTopology), then frees the previous one, and returns a line
  // for the log; otherwise returns "". `analysis` may be null (nothing is handed over).
  std::string OnInfo(absl::string_view node, const v1::SeriesDefs& defs,
                     analysis::FabricAnalysis* analysis);
  // The topology last handed over; null before the first.
  const analysis::Topology* current() const { return topology_.get(); }
  const LldpTopology& lldp() const { return lldp_; }

 private:
  LldpTopology lldp_;
  std::unique_ptr<analysis::Topology> topology_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_TOPOLOGY_LLDP_TOPOLOGY_H_
