// What a simulated node is made of, shared by the cluster of real processes (sim/cluster.cc) and
// the virtual-clock soak (sim/soak_node.cc), so both build the same node from a scenario.
#ifndef RINGSIDE_SIM_NODE_BUILD_H_
#define RINGSIDE_SIM_NODE_BUILD_H_

#include <vector>

#include "absl/status/statusor.h"
#include "sim/node_animator.h"
#include "sim/scenario.h"
#include "sim/sysfs_tree.h"

namespace ringside::sim {

// Faults applied through a node's ports (its sysfs tree and ethtool dumps).
bool IsPortFault(FaultKind k);

// The port faults of node `i` as its animator takes them: the faulty port itself, a driver
// reload's reset of every port, and the victims of a pause storm elsewhere on its leaf, paused a
// second later.
std::vector<PortFault> PortFaultsOfNode(const Scenario& s, int i);

// Writes node `i`'s tree (one RoCE rail per GPU, mlx5_<k> with its netdev) and returns the
// animated ports.
absl::StatusOr<std::vector<AnimatedPort>> BuildNodeTree(const Scenario& s, int i,
                                                        SysfsTreeWriter* tree);

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_NODE_BUILD_H_
