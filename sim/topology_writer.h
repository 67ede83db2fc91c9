// The simulated fabric's topology, written as `ibnetdiscover` prints it (the format the aggregator's
// --topology reads from a real fabric): one leaf switch per `nodes_per_leaf` nodes, every RoCE/IB
// rail of a node (mlx5_0 .. mlx5_<gpus-1>) cabled to its node's leaf, and each CA's node
// description "<node> mlx5_<i>" as rdma-ndd sets it, so the host and device of each port are known.
#ifndef RINGSIDE_SIM_TOPOLOGY_WRITER_H_
#define RINGSIDE_SIM_TOPOLOGY_WRITER_H_

#include <string>

#include "sim/scenario.h"

namespace ringside::sim {

// The leaf switch's node description of node `i` ("leaf-01", ...).
std::string LeafNameOf(const Scenario& scenario, int node);

// ibnetdiscover output for the scenario's cluster.
std::string IbnetdiscoverTopology(const Scenario& scenario);

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_TOPOLOGY_WRITER_H_
