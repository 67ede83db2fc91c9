// Wires the Query API into an aggregator before Aggregator::Start: QueryService on the ingest gRPC
// server (same port, TLS and client-certificate check), its watches ended first at Shutdown(), and
// GET /api/v1/incidents on the HTTP server.
//
//   AggregatorOptions o;  ...
//   std::shared_ptr<QueryApi> q = InstallQueryApi(o, analysis_host, {});
//   auto agg = Aggregator::Start(o);      // q->service() is set from here on
#ifndef RINGSIDE_DAEMON_AGGREGATOR_QUERY_QUERY_API_H_
#define RINGSIDE_DAEMON_AGGREGATOR_QUERY_QUERY_API_H_

#include <memory>

#include "daemon/aggregator/aggregator.h"
#include "daemon/aggregator/query/query_service.h"

namespace ringside::daemon {

class AnalysisHost;

class QueryApi {
 public:
  // Null before Aggregator::Start built it.
  QueryService* service() const { return service_.get(); }

 private:
  friend std::shared_ptr<QueryApi> InstallQueryApi(AggregatorOptions&, AnalysisHost*,
                                                   QueryServiceOptions);
  std::shared_ptr<QueryService> service_;
};

// `host` may be null (no detectors: incidents, links and stragglers are empty); it must outlive
// the aggregator.
std::shared_ptr<QueryApi> InstallQueryApi(AggregatorOptions& options, AnalysisHost* host,
                                          QueryServiceOptions query_options = {});

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_QUERY_QUERY_API_H_
