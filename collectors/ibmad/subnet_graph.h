// The discovered subnet graph (subnet_discovery.h) in the forms it leaves the agent in:
//  - ibnetdiscover's default text (what `ibnetdiscover` prints for the same fabric, node records
//    with their port lines), so analysis::Topology::Parse and every tool that reads that format
//    take it as is;
//  - info records, the agent's way of streaming facts to the aggregator:
//      source "ib_node", device = node GUID ("0x" + 16 hex), port "", labels node_type (switch /
//        ca / router), node_desc, num_ports, lid, system_image_guid, vendor_id, device_id;
//      source "ib_link", device = the GUID of one end, port = its port, labels peer_guid,
//        peer_port, lid, peer_lid, width ("4x"), speed ("QDR"), one record per cable (the end
//        with the lower GUID, then port, is the device).
//    GraphFromInfoRecords reads them back (the aggregator's side), so both forms carry the same
//    graph.
#ifndef RINGSIDE_COLLECTORS_IBMAD_SUBNET_GRAPH_H_
#define RINGSIDE_COLLECTORS_IBMAD_SUBNET_GRAPH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collectors/common/series.h"
#include "collectors/ibmad/subnet_discovery.h"

namespace ringside::collectors {

std::string IbnetdiscoverText(const SubnetGraph& graph);

std::vector<InfoRecord> GraphInfoRecords(const SubnetGraph& graph);

// The graph of "ib_node" / "ib_link" records (others are ignored). Ports carry what the records
// say (LID, width and speed of linked ports; state ACTIVE). InvalidArgument for a malformed GUID
// or number; a link to a node without a record gets a node with only its GUID.
absl::StatusOr<SubnetGraph> GraphFromInfoRecords(const std::vector<InfoRecord>& records);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_IBMAD_SUBNET_GRAPH_H_
