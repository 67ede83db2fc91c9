// A discovered subnet graph as the agent streams it (ib_node / ib_link info records in a
// SeriesDefs), for the tests of what the aggregator makes of it.
#ifndef RINGSIDE_TESTS_TESTING_GRAPH_INFO_DEFS_H_
#define RINGSIDE_TESTS_TESTING_GRAPH_INFO_DEFS_H_

#include "collectors/ibmad/subnet_discovery.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::testing {

// What an agent with --fabric-discover sends for `g`: its ib_node / ib_link info records, appended
// to `defs` (which then carries an info set).
inline void AddGraphInfo(const collectors::SubnetGraph& g, v1::SeriesDefs* defs) {
  defs->set_has_info(true);
  for (const collectors::InfoRecord& r : collectors::GraphInfoRecords(g)) {
    v1::InfoRecord* p = defs->add_info();
    p->set_source(r.source);
    p->set_device(r.device);
    p->set_port(r.port);
    for (const auto& [k, v] : r.labels) (*p->mutable_labels())[k] = v;
  }
}

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_GRAPH_INFO_DEFS_H_
