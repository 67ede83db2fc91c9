// An in-process fake of the aggregator's Query API (ringside.v1.Query) on 127.0.0.1:<free port>,
// for the `ringside` CLI's tests: canned incidents, links, nodes, stragglers and status
// (CannedCluster), the request filters applied as query.proto documents them, the last request
// of each kind recorded, and a WatchIncidents stream the test drives: Publish() a change, End
// every open stream, refuse new ones, or delay the unary answers past the CLI's deadline.
#ifndef RINGSIDE_TESTS_DAEMON_CTL_FAKE_QUERY_SERVICE_H_
#define RINGSIDE_TESTS_DAEMON_CTL_FAKE_QUERY_SERVICE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "ringside/v1/query.grpc.pb.h"

namespace ringside::testing {

struct FakeQueryData {
  std::vector<v1::Incident> incidents;  // any order; listed newest (updated) first
  std::vector<v1::LinkStatus> links;
  std::map<std::string, v1::NodeStatus> nodes;
  std::vector<v1::RankScore> stragglers;  // highest score first
  v1::ClusterStatus status;               // now_unix_nanos is filled in per call
  v1::TopologyView topology;              // answered as is (events_only drops the rest)
};

// A small cluster at `now`:
//   #12 pause_storm  critical open      node-b mlx5_0 prio 3, blast radius job j1 ranks 4-7
//   #15 straggler    warning  open      rank 5 (job j1) on node-b, caused by #12
//   #3  link_flapping warning resolved  node-a mlx5_1 port 1
//   #20 job_slowdown info     open      job j2, caused by #21 and by #99 (never existed)
//   #21 congestion   warning  resolved  node-c mlx5_0, caused by #20 (a cycle)
// links of node-a and node-b (two unhealthy, one flapping), nodes node-a, node-b, node-c (stale),
// straggler scores for jobs j1 (rank 5 flagged by #15) and j2.
FakeQueryData CannedCluster(absl::Time now);

class FakeQueryService final : public v1::Query::Service {
 public:
  explicit FakeQueryService(FakeQueryData data) : data_(std::move(data)) {}

  grpc::Status ListIncidents(grpc::ServerContext*, const v1::ListIncidentsRequest* req,
                             v1::ListIncidentsResponse* resp) override;
  grpc::Status GetIncident(grpc::ServerContext*, const v1::GetIncidentRequest* req,
                           v1::Incident* resp) override;
  grpc::Status WatchIncidents(grpc::ServerContext* ctx, const v1::WatchIncidentsRequest* req,
                              grpc::ServerWriter<v1::IncidentChange>* writer) override;
  grpc::Status ListLinks(grpc::ServerContext*, const v1::ListLinksRequest* req,
                         v1::ListLinksResponse* resp) override;
  grpc::Status GetNode(grpc::ServerContext*, const v1::GetNodeRequest* req,
                       v1::NodeStatus* resp) override;
  grpc::Status TopStragglers(grpc::ServerContext*, const v1::TopStragglersRequest* req,
                             v1::TopStragglersResponse* resp) override;
  grpc::Status GetStatus(grpc::ServerContext*, const v1::GetStatusRequest* req,
                         v1::ClusterStatus* resp) override;
  grpc::Status GetTopology(grpc::ServerContext*, const v1::GetTopologyRequest* req,
                           v1::TopologyView* resp) override;

  // Applies `change` to the stored incidents (the incident replaces the one with its id) and, when
  // `to_watchers`, sends it to every open watch stream whose filters it matches.
  void Publish(const v1::IncidentChange& change, bool to_watchers = true) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends every open watch stream with OK (a restarting aggregator).
  void EndStreams() ABSL_LOCKS_EXCLUDED(mu_);
  // While set, WatchIncidents fails at once with UNAVAILABLE.
  void RefuseWatches(bool refuse) ABSL_LOCKS_EXCLUDED(mu_);
  // Every unary call waits this long before answering (a hung aggregator).
  void SetDelay(absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_);

  int open_watches() const ABSL_LOCKS_EXCLUDED(mu_);
  int watch_calls() const ABSL_LOCKS_EXCLUDED(mu_);
  v1::ListIncidentsRequest last_list_incidents() const ABSL_LOCKS_EXCLUDED(mu_);
  v1::ListLinksRequest last_list_links() const ABSL_LOCKS_EXCLUDED(mu_);
  v1::TopStragglersRequest last_top_stragglers() const ABSL_LOCKS_EXCLUDED(mu_);
  v1::WatchIncidentsRequest last_watch() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Delay() ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  FakeQueryData data_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::IncidentChange> log_ ABSL_GUARDED_BY(mu_);  // published changes, in order
  int generation_ ABSL_GUARDED_BY(mu_) = 0;                   // EndStreams() increments it
  bool refuse_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration delay_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  int open_watches_ ABSL_GUARDED_BY(mu_) = 0;
  int watch_calls_ ABSL_GUARDED_BY(mu_) = 0;
  v1::ListIncidentsRequest last_list_incidents_ ABSL_GUARDED_BY(mu_);
  v1::ListLinksRequest last_list_links_ ABSL_GUARDED_BY(mu_);
  v1::TopStragglersRequest last_top_stragglers_ ABSL_GUARDED_BY(mu_);
  v1::WatchIncidentsRequest last_watch_ ABSL_GUARDED_BY(mu_);
};

// The service served on 127.0.0.1:<free port>.
class FakeQueryServer {
 public:
  explicit FakeQueryServer(FakeQueryData data,
                           std::shared_ptr<grpc::ServerCredentials> creds = nullptr);
  ~FakeQueryServer();
  FakeQueryService& service() { return service_; }
  int port() const { return port_; }
  std::string address() const;  // "127.0.0.1:<port>"
  // Stops serving (ends open streams first).
  void Shutdown();

 private:
  FakeQueryService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_DAEMON_CTL_FAKE_QUERY_SERVICE_H_
