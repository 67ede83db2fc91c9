// Which aggregator shard this node's counters and link events go to, and when that changes
// (issue #16, docs/scale.md). analysis::ShardMap places a node by "leaf:<id>" when a topology
// knows its leaf switch, else by "node:<name>"; this file finds the agent's own leaf without a
// topology file, from what the agent discovers itself:
//
// - LLDP: the switch its lldpd sees at the other end of each RoCE netdev (a netdev the netdev
//   collector maps to an RDMA device), named as the aggregator names it from the same records
//   (collectors/lldp/lldp_leaf.h): so the key equals the one a `node switch` file naming those
//   switches gives, and placement by LLDP equals placement by that file. Of several leaves the
//   first in sorted order, as ShardMap::NodePlacementKey takes. Management NICs (no RDMA device)
//   are left out. Unlike the aggregator, the agent cannot tell a cable to another host from one to
//   a switch unless the peer is itself, so a RoCE port cabled straight to another host counts here.
// - InfiniBand: an agent running subnet discovery (--fabric-discover) has the whole subnet graph
//   ("ib_node" / "ib_link" records); turned into the analysis::Topology an ibnetdiscover file of
//   the same fabric gives (collectors/ibmad/subnet_topology.h), it names the leaves of the node's
//   HCAs (found by their node description, as in the file). In auto mode it comes before LLDP, as
//   on the aggregator.
//
// Pure logic and a small thread-safe state: no flags, no processes, no sockets.
#ifndef RINGSIDE_DAEMON_AGENT_SHARD_PLACEMENT_H_
#define RINGSIDE_DAEMON_AGENT_SHARD_PLACEMENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "analysis/shard_map.h"
#include "analysis/topology.h"
#include "collectors/common/series.h"
#include "collectors/lldp/lldp_client.h"
#include "collectors/netdev/netdev_collector.h"
#include "daemon/agent/sampler.h"
#include "prometheus/metric_family.h"

namespace ringside::daemon {

// --shard-placement.
enum class ShardPlacementMode {
  kAuto,      // the --topology file when it knows the node, else InfiniBand discovery, else
              // LLDP, else the node name
  kTopology,  // the --topology file only (else the name)
  kLldp,      // LLDP only (else the name)
  kName,      // the node name: never moves
};
absl::StatusOr<ShardPlacementMode> ParseShardPlacementMode(absl::string_view text);
absl::string_view ShardPlacementModeName(ShardPlacementMode mode);

// The leaf of `node` from its own info records: source "netdev" (device = netdev, label
// rdma_device) and source "lldp" (device = netdev, labels chassis_name, chassis_id). "" when no
// RoCE netdev has a switch neighbour.
std::string LldpLeafOfNode(absl::string_view node,
                           const std::vector<const collectors::InfoRecord*>& records);
// The same from a sampling cycle's tables (the netdev and lldp collectors').
std::string LldpLeafOfSnapshot(const AgentSnapshot& snap);
// The same from lldpd's neighbours read directly and the netdev → RDMA map (the wait at start,
// before the first cycle); the first neighbour of a netdev counts, as in the LLDP collector.
std::string LldpLeafFromNeighbors(absl::string_view node,
                                  const std::vector<collectors::LldpNeighbor>& neighbors,
                                  const std::map<std::string, collectors::RdmaPortRef>& rdma);

// The first leaf of `node` in the subnet graph of "ib_node" / "ib_link" records (others are
// ignored): the leaf ShardMap::NodePlacementKey takes from an ibnetdiscover file of that fabric.
// "" when the graph does not name the node's HCAs.
std::string IbLeafOfNode(absl::string_view node, const std::vector<collectors::InfoRecord>& records);

// Asks `leaf_now` every `poll` until it names a leaf ("" : none yet) or `wait` has passed; ""
// when none did. An error that waiting cannot mend ends the wait at once and is returned: NotFound
// (no lldpd socket, liblldpctl not installed), PermissionDenied (the socket is not ours to read).
// Any other error (lldpd restarting: the socket is there, nobody answers) is waited through.
absl::StatusOr<std::string> WaitForLeaf(
    const std::function<absl::StatusOr<std::string>()>& leaf_now, absl::Duration wait,
    absl::Duration poll);

// The key the node is placed by: "leaf:<id>" or "node:<name>" (analysis::ShardMap).
std::string PlacementKey(ShardPlacementMode mode, absl::string_view node,
                         const analysis::Topology* file, absl::string_view discovered_leaf);

// The node's current shard; Update() is called by the sampling thread, the rest by any thread.
class ShardPlacement {
 public:
  struct Change {
    bool key_changed = false;  // placed by another key (the shard may be the same)
    bool moved = false;        // another shard: the node's uploads must follow
    std::string from;          // shard names
    std::string to;
    std::string key;
    std::vector<std::string> replicas;  // of `to`
  };

  // `file` (the --topology file) may be null; `leaf`: what discovery named at start ("": nothing
  // yet). Places at once.
  ShardPlacement(std::shared_ptr<const analysis::ShardMap> map, ShardPlacementMode mode,
                 std::string node, std::shared_ptr<const analysis::Topology> file,
                 std::string leaf = "");

  // Whether a discovered leaf can change the placement: mode lldp, or auto without a file that
  // places the node.
  bool UsesDiscovery() const { return uses_discovery_; }

  // Places by `leaf` ("": nothing discovered now, the last discovered leaf stays: a port whose
  // neighbour timed out keeps the node where it is).
  Change Update(absl::string_view leaf) ABSL_LOCKS_EXCLUDED(mu_);
  // Update() with the leaf of a cycle's tables when they changed since the last call: in auto mode
  // the InfiniBand discovery's ("ibdisc") when it names one, else LLDP's (netdev and lldp); in
  // lldp mode LLDP's.
  Change OnSnapshot(const AgentSnapshot& snap) ABSL_LOCKS_EXCLUDED(mu_);

  std::string shard() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::string> replicas() const ABSL_LOCKS_EXCLUDED(mu_);
  std::string key() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t moves() const ABSL_LOCKS_EXCLUDED(mu_);

  // ringside_agent_shard_info{shard, placed_by} 1 and ringside_agent_shard_moves_total.
  std::vector<prometheus::MetricFamily> MetricFamilies() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::shared_ptr<const analysis::ShardMap> map_;
  const ShardPlacementMode mode_;
  const std::string node_;
  const std::shared_ptr<const analysis::Topology> file_;
  const bool uses_discovery_;

  mutable absl::Mutex mu_;
  std::string leaf_ ABSL_GUARDED_BY(mu_);  // the last discovered one
  size_t shard_ ABSL_GUARDED_BY(mu_) = 0;
  std::string key_ ABSL_GUARDED_BY(mu_);
  uint64_t moves_ ABSL_GUARDED_BY(mu_) = 0;
  // Sampling thread only: the tables last read (held, so that a new table never takes a freed
  // one's address unnoticed) and the leaves found in them.
  std::vector<std::shared_ptr<const collectors::SeriesTable>> lldp_tables_seen_;
  std::shared_ptr<const collectors::SeriesTable> ib_table_seen_;
  std::string lldp_leaf_;
  std::string ib_leaf_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_SHARD_PLACEMENT_H_
