// A Topology written back as `ibnetdiscover` prints it (`ringside topology --format=ibnetdiscover`):
// one Switch record per switch with a port line for each CA cabled to it, one Ca record per CA with
// its port lines back. Topology::Parse reads it back to the same attachments (host, device, node
// description, CA GUID and port, switch id, name and port) when the topology came from
// InfiniBand (ibnetdiscover, subnet discovery). Switch-to-switch links are not in a Topology and
// so not in the text. Entries without a CA GUID (a `node switch` map, LLDP) are written with
// their description as the CA's node id, and those without a port number on port 0.
#ifndef RINGSIDE_ANALYSIS_TOPOLOGY_TEXT_H_
#define RINGSIDE_ANALYSIS_TOPOLOGY_TEXT_H_

#include <string>

#include "analysis/topology.h"

namespace ringside::analysis {

std::string FormatIbnetdiscover(const Topology& topology);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_TOPOLOGY_TEXT_H_
