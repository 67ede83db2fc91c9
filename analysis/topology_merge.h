// One topology out of several (issue #16): the --topology file and what the fabric tells (the
// agents' InfiniBand subnet discovery, else their LLDP neighbours). The file wins for the hosts it
// names; the discovery fills in every host the file does not name. Where both name a host they
// are compared, port by port when both know the host's devices (ibnetdiscover, discovery, LLDP),
// else switch by switch (a `node switch` line), and each difference is a disagreement:
//   other_switch          the port (or host) is cabled to a different switch
//   other_switch_port     same switch, a different switch port
//   missing_in_discovery  the file has a link the discovery does not
//   missing_in_file       the discovery has a link of a host the file names but not this link
// missing_in_discovery is reported only when the discovery sees the whole fabric (InfiniBand
// subnet discovery: MergeOptions::discovery_complete): LLDP is only as wide as the agents that
// report it and the ports that speak it (a host's InfiniBand HCAs have no LLDP neighbour).
//
// Switches match by id or name on either side (a hand-written map names a switch that discovery
// knows by GUID and node description). Pure: no I/O, no logging.
#ifndef RINGSIDE_ANALYSIS_TOPOLOGY_MERGE_H_
#define RINGSIDE_ANALYSIS_TOPOLOGY_MERGE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "analysis/topology.h"

namespace ringside::analysis {

enum class DisagreementKind { kOtherSwitch, kOtherSwitchPort, kMissingInDiscovery, kMissingInFile };
absl::string_view DisagreementKindName(DisagreementKind k);

struct TopologyDisagreement {
  DisagreementKind kind = DisagreementKind::kOtherSwitch;
  std::string host;
  std::string device;  // "" for a host-level comparison
  int ca_port = 0;
  LeafPort file;        // id "" when the file has no such link
  LeafPort discovered;  // id "" when the discovery has no such link
  bool operator==(const TopologyDisagreement&) const = default;
  bool operator<(const TopologyDisagreement& o) const;
};
// "node-a mlx5_0/1: other_switch: file leaf-01 port 3, discovered leaf-02 port 7".
std::string DescribeDisagreement(const TopologyDisagreement& d);
// A switch end as people read it: "leaf-02 port 7", "leaf-02 Ethernet12", "leaf-02", "-".
std::string DescribeLeafPort(const LeafPort& p);

// Whether two switch ends name the same switch (by id or name on either side).
bool SameSwitch(const LeafPort& a, const LeafPort& b);

struct MergeOptions {
  bool discovery_complete = false;  // the discovery sees every host of the fabric
};

struct MergedTopology {
  Topology topology;
  std::vector<TopologyDisagreement> disagreements;  // sorted
};

// Either may be null; both null gives an empty topology.
MergedTopology MergeTopologies(const Topology* file, const Topology* discovered,
                               MergeOptions options = {});

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_TOPOLOGY_MERGE_H_
