// Changes of the fabric's cabling as events (issue #16): what changed between two topologies the
// same source told (the InfiniBand subnet discovery, LLDP), port by port, and a bounded log of
// them for the Query API (`ringside topology --events`).
//   moved         the port is cabled to another switch (recabling, a port moved to another leaf)
//   port_changed  same switch, another switch port
//   gone          the link vanished
//   new           a link that was not there
// Ports are keyed by host, device and CA port; CAs without a host name are left out.
#ifndef RINGSIDE_ANALYSIS_TOPOLOGY_EVENTS_H_
#define RINGSIDE_ANALYSIS_TOPOLOGY_EVENTS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/topology.h"

namespace ringside::analysis {

enum class TopologyEventKind { kMoved, kPortChanged, kGone, kNew };
absl::string_view TopologyEventKindName(TopologyEventKind k);

struct TopologyEvent {
  absl::Time time = absl::InfinitePast();
  TopologyEventKind kind = TopologyEventKind::kMoved;
  std::string source;    // "ib-discovery", "lldp"
  std::string reporter;  // the node whose report showed it
  std::string host;
  std::string device;  // "" for a host-level entry (a `node switch` map)
  int ca_port = 0;
  LeafPort before;  // id "" for kNew
  LeafPort after;   // id "" for kGone
  bool operator==(const TopologyEvent&) const = default;
};
// "node-a mlx5_0/1 moved: leaf-01 Ethernet1 → leaf-02 Ethernet1".
std::string DescribeTopologyEvent(const TopologyEvent& e);

// What changed from `before` to `after`, sorted by host, device, port (time, source and reporter
// left for the caller).
std::vector<TopologyEvent> DiffTopologies(const Topology& before, const Topology& after);

// The latest `capacity` events, oldest first. Not thread-safe (AnalysisHost holds it under its
// lock).
class TopologyEventLog {
 public:
  explicit TopologyEventLog(size_t capacity = 1000) : capacity_(capacity) {}
  void Add(const TopologyEvent& e);
  // The latest `limit` (0: all kept), oldest first.
  std::vector<TopologyEvent> Recent(size_t limit = 0) const;
  uint64_t total() const { return total_; }  // ever added
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  std::deque<TopologyEvent> events_;
  uint64_t total_ = 0;
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_TOPOLOGY_EVENTS_H_
