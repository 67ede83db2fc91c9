// A discovered subnet graph as analysis::Topology: the same structure Topology::Parse builds
// from `ibnetdiscover` output, built from the ibnetdiscover text of the graph (subnet_graph.h),
// so a discovered fabric and a file of the same fabric give equal topologies. In its own library
// (ringside::subnet_topology) because the collectors do not depend on analysis.
#ifndef RINGSIDE_COLLECTORS_IBMAD_SUBNET_TOPOLOGY_H_
#define RINGSIDE_COLLECTORS_IBMAD_SUBNET_TOPOLOGY_H_

#include <vector>

#include "absl/status/statusor.h"
#include "analysis/topology.h"
#include "collectors/common/series.h"
#include "collectors/ibmad/subnet_discovery.h"

namespace ringside::collectors {

absl::StatusOr<analysis::Topology> TopologyFromGraph(const SubnetGraph& graph);

// From the "ib_node" / "ib_link" info records an agent streams (what an aggregator receives).
absl::StatusOr<analysis::Topology> TopologyFromInfoRecords(const std::vector<InfoRecord>& records);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_IBMAD_SUBNET_TOPOLOGY_H_
