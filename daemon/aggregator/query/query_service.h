// ringside.v1.Query (proto/ringside/v1/query.proto): what the on-call CLI, the simulator's scorer
// and other tools read from the aggregator — incidents (open from the analysis in memory, history
// from the incident store), a live watch of incident changes, links, one node, the top stragglers
// and one screen of cluster status. Registered on the ingest gRPC server (same port, same TLS and
// client-certificate check) through AggregatorOptions::extra_services. Callback API: no handler
// blocks a gRPC thread for longer than one read of the analysis or the store.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_QUERY_QUERY_SERVICE_H_
#define RINGSIDE_DAEMON_AGGREGATOR_QUERY_QUERY_SERVICE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "analysis/fabric_views.h"
#include "analysis/incidents.h"
#include "daemon/aggregator/query/incident_watch.h"
#include "daemon/common/grpc_roles.h"
#include "ringside/v1/query.grpc.pb.h"

namespace ringside::daemon {

class AnalysisHost;
class IngestCore;

struct QueryServiceOptions {
  std::string aggregator_version = "dev";
  IncidentWatchOptions watch;
  std::function<absl::Time()> now = absl::Now;
  // Who may read (grpc_roles.h): every call needs the reader role. Null: everyone may.
  std::shared_ptr<RoleAuthorizer> roles;
};

class QueryService final : public v1::Query::CallbackService {
 public:
  // `host` may be null (--detect=false: no incidents, links or stragglers); `core` must not be.
  // Both must outlive the service.
  QueryService(AnalysisHost* host, const IngestCore* core, QueryServiceOptions options = {});

  // Ends every WatchIncidents stream (OK) and refuses new ones; call before the server stops.
  void Shutdown() { watch_->Shutdown(); }
  IncidentWatchHub& watch_hub() { return *watch_; }

  grpc::ServerUnaryReactor* ListIncidents(grpc::CallbackServerContext* context,
                                          const v1::ListIncidentsRequest* request,
                                          v1::ListIncidentsResponse* response) override;
  grpc::ServerUnaryReactor* GetIncident(grpc::CallbackServerContext* context,
                                        const v1::GetIncidentRequest* request,
                                        v1::Incident* response) override;
  grpc::ServerWriteReactor<v1::IncidentChange>* WatchIncidents(
      grpc::CallbackServerContext* context, const v1::WatchIncidentsRequest* request) override;
  grpc::ServerUnaryReactor* ListLinks(grpc::CallbackServerContext* context,
                                      const v1::ListLinksRequest* request,
                                      v1::ListLinksResponse* response) override;
  grpc::ServerUnaryReactor* GetNode(grpc::CallbackServerContext* context,
                                    const v1::GetNodeRequest* request,
                                    v1::NodeStatus* response) override;
  grpc::ServerUnaryReactor* TopStragglers(grpc::CallbackServerContext* context,
                                          const v1::TopStragglersRequest* request,
                                          v1::TopStragglersResponse* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::ClusterStatus* response) override;
  grpc::ServerUnaryReactor* GetTopology(grpc::CallbackServerContext* context,
                                        const v1::GetTopologyRequest* request,
                                        v1::TopologyView* response) override;

 private:
  // Every link with its open incidents (`node` empty: every node), in node, source, device, port
  // order.
  std::vector<v1::LinkStatus> Links(const std::string& node) const;
  // The reader-role check of every call (OK without roles).
  grpc::Status Denied(const grpc::CallbackServerContext& context) const;

  AnalysisHost* const host_;
  const IngestCore* const core_;
  const QueryServiceOptions options_;
  const std::shared_ptr<IncidentWatchHub> watch_;
};

// Whether a fabric incident (link_*, pause_storm, congestion) is about this link: same node and
// the same port labels (device/port, netdev, or gpu/link).
bool IncidentIsAboutLink(const analysis::Incident& inc, const analysis::LinkView& link);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_QUERY_QUERY_SERVICE_H_
