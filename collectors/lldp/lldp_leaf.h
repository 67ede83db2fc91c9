// How a switch seen over LLDP is named as a leaf (issue #16): one rule for the aggregator, which
// derives every node's leaves from the agents' info records (daemon/aggregator/topology/lldp_topology.h),
// and the agent, which places itself on an aggregator shard by its own leaf
// (daemon/agent/shard_placement.h). Both must agree to the byte, and agree with a `node switch`
// topology file naming the same switches, so that placement by LLDP equals placement by the file.
#ifndef RINGSIDE_COLLECTORS_LLDP_LLDP_LEAF_H_
#define RINGSIDE_COLLECTORS_LLDP_LLDP_LEAF_H_

#include <string>

#include "absl/strings/string_view.h"

namespace ringside::collectors {

// The switch an LLDP neighbour names: its system name, else its chassis id; "" when neither.
inline std::string LldpSwitchName(absl::string_view chassis_name, absl::string_view chassis_id) {
  return std::string(chassis_name.empty() ? chassis_id : chassis_name);
}

// The leaf id of a switch named `name`, usable as one column of a `node switch` line and so the id
// analysis::Topology gives that switch: blanks, '#' and line breaks become '_'.
inline std::string LldpLeafId(absl::string_view name) {
  std::string s(name);
  for (char& c : s) {
    if (c == ' ' || c == '\t' || c == '#' || c == '\r' || c == '\n') c = '_';
  }
  return s;
}

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_LLDP_LLDP_LEAF_H_
