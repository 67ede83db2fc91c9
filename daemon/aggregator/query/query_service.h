// ringside.v1.Query (proto/ringside/v1/query.proto): what the on-call CLI, the simulator's scorer
// and other tools read from the aggregator — incidents (open from the analysis in memory, history
// from the incident store), a live watch of incident changes, links, one node, the top stragglers
// and one screen of cluster status. Registered on the ingest gRPC server (same port, same TLS and
// client-certificate check) through AggregatorOptions::extra_services, on the server's
// completion-queue threads: the unary methods are answered on the service's own work queue, so a
// long read of the analysis or the store never holds the thread that reads the agents' sockets.
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
#include "daemon/aggregator/serving/async_grpc_service.h"
#include "daemon/aggregator/serving/work_queue.h"
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

class QueryService final : public v1::Query::AsyncService, public AsyncGrpcService {
 public:
  // `host` may be null (--detect=false: no incidents, links or stragglers); `core` must not be.
  // Both must outlive the service.
  QueryService(AnalysisHost* host, const IngestCore* core, QueryServiceOptions options = {});

  // Ends every WatchIncidents stream (OK) and refuses new ones; call before the server stops.
  void Shutdown() { watch_->Shutdown(); }
  IncidentWatchHub& watch_hub() { return *watch_; }

  // AsyncGrpcService: the unary methods answer on the service's work queue; WatchIncidents
  // streams are the hub's.
  grpc::Service* grpc_service() override { return this; }
  void Arm(grpc::ServerCompletionQueue* cq, LiveCalls* live) override;

  // The unary methods, as functions of the request.
  grpc::Status HandleListIncidents(const grpc::ServerContext& context,
                                   const v1::ListIncidentsRequest& request,
                                   v1::ListIncidentsResponse* response);
  grpc::Status HandleGetIncident(const grpc::ServerContext& context,
                                 const v1::GetIncidentRequest& request, v1::Incident* response);
  grpc::Status HandleListLinks(const grpc::ServerContext& context,
                               const v1::ListLinksRequest& request,
                               v1::ListLinksResponse* response);
  grpc::Status HandleGetNode(const grpc::ServerContext& context, const v1::GetNodeRequest& request,
                             v1::NodeStatus* response);
  grpc::Status HandleTopStragglers(const grpc::ServerContext& context,
                                   const v1::TopStragglersRequest& request,
                                   v1::TopStragglersResponse* response);
  grpc::Status HandleGetStatus(const grpc::ServerContext& context,
                               const v1::GetStatusRequest& request, v1::ClusterStatus* response);
  grpc::Status HandleGetTopology(const grpc::ServerContext& context,
                                 const v1::GetTopologyRequest& request, v1::TopologyView* response);

 private:
  template <class Req, class Resp>
  using RequestMethod = void (QueryService::*)(grpc::ServerContext*, Req*,
                                               grpc::ServerAsyncResponseWriter<Resp>*,
                                               grpc::CompletionQueue*, grpc::ServerCompletionQueue*,
                                               void*);
  template <class Req, class Resp>
  using HandleMethod = grpc::Status (QueryService::*)(const grpc::ServerContext&, const Req&,
                                                      Resp*);
  template <class Req, class Resp>
  void ArmUnary(grpc::ServerCompletionQueue* cq, LiveCalls* live, RequestMethod<Req, Resp> request,
                HandleMethod<Req, Resp> handle);

  // Every link with its open incidents (`node` empty: every node), in node, source, device, port
  // order. `unhealthy_only`: leaves out, without copying them, links that are up on nodes with no
  // open fabric incident (all healthy); the others come with `healthy` set as always.
  std::vector<v1::LinkStatus> Links(const std::string& node, bool unhealthy_only = false) const;
  // How many links there are, and how many are not up or have an open incident (what Links("")
  // would say of `healthy`), counted without copying them: at 625,000 links a copy of each held
  // the analysis lock most of a second for `ringside status`.
  struct LinkCounts {
    uint32_t links = 0;
    uint32_t unhealthy = 0;
  };
  LinkCounts CountLinks() const;
  // The reader-role check of every call (OK without roles).
  grpc::Status Denied(const grpc::ServerContextBase& context) const;

  AnalysisHost* const host_;
  const IngestCore* const core_;
  const QueryServiceOptions options_;
  const std::shared_ptr<IncidentWatchHub> watch_;
  WorkQueue work_;  // last: stopped (after running what is queued) before the rest goes
};

// Whether a fabric incident (link_*, pause_storm, congestion) is about this link: same node and
// the same port labels (device/port, netdev, or gpu/link).
bool IncidentIsAboutLink(const analysis::Incident& inc, const analysis::LinkView& link);
bool IncidentIsAboutLink(const analysis::Incident& inc, const analysis::LinkRef& link);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_QUERY_QUERY_SERVICE_H_
