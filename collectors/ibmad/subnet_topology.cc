#include "collectors/ibmad/subnet_topology.h"

#include "collectors/ibmad/subnet_graph.h"

namespace ringside::collectors {

absl::StatusOr<analysis::Topology> TopologyFromGraph(const SubnetGraph& graph) {
  return analysis::Topology::Parse(IbnetdiscoverText(graph),
                                   analysis::Topology::Format::kIbnetdiscover);
}

absl::StatusOr<analysis::Topology> TopologyFromInfoRecords(
    const std::vector<InfoRecord>& records) {
  absl::StatusOr<SubnetGraph> g = GraphFromInfoRecords(records);
  if (!g.ok()) return g.status();
  return TopologyFromGraph(*g);
}

}  // namespace ringside::collectors
