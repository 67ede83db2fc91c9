// A Topology written back as `ibnetdiscover` prints it (`ringside topology --format=ibnetdiscover`):
// one Switch record per switch with a port line for every connected port — the CAs cabled to it
// and the other switches (Topology::switch_links) —, its header giving the switch's port count
// when the topology knows it; one Ca record per CA with its port lines back. Topology::Parse
// reads it back to the same graph (attachments: host, device, node description, CA GUID and port,
// switch id, name and port; switch names; switch-to-switch links) when the topology came from
// InfiniBand (ibnetdiscover, subnet discovery). Not written, because a Topology does not keep
// them: CAs and switches with no cable, routers, LIDs, rates (port lines say "lid 0", no rate).
// Entries without a CA GUID (a `node switch` map, LLDP: no GUIDs, no switch links) are written
// with their description as the CA's node id, and those without a port number on port 0.
#ifndef RINGSIDE_ANALYSIS_TOPOLOGY_TEXT_H_
#define RINGSIDE_ANALYSIS_TOPOLOGY_TEXT_H_

#include <string>

#include "analysis/topology.h"

namespace ringside::analysis {

std::string FormatIbnetdiscover(const Topology& topology);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_TOPOLOGY_TEXT_H_
