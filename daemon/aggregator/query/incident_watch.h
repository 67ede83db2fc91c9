// WatchIncidents (ringside.v1.Query): each watcher first gets the incidents open now (OPENED,
// initial = true), then every change the analysis host reports that passes its filter. Changes
// are queued per watcher, bounded: a watcher that falls `queue_limit` changes behind is ended with
// RESOURCE_EXHAUSTED instead of slowing the analysis (the host's flush thread only queues).
// Shutdown() ends every watch with OK and refuses new ones (UNAVAILABLE).
#ifndef RINGSIDE_DAEMON_AGGREGATOR_QUERY_INCIDENT_WATCH_H_
#define RINGSIDE_DAEMON_AGGREGATOR_QUERY_INCIDENT_WATCH_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "analysis/incidents.h"
#include "daemon/aggregator/query/incident_queries.h"
#include "daemon/aggregator/serving/async_op.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/server_context.h"
#include "ringside/v1/query.grpc.pb.h"

namespace ringside::daemon {

class AnalysisHost;

struct IncidentWatchOptions {
  size_t queue_limit = 1024;  // live changes queued per watcher before it is cut off
  // A cut-off watcher whose client still has not taken the write in flight after this is
  // cancelled (checked when changes are published and when a watcher starts).
  absl::Duration parked_grace = absl::Seconds(5);
  size_t max_watchers = 256;  // more at once: RESOURCE_EXHAUSTED
};

class IncidentWatchHub : public std::enable_shared_from_this<IncidentWatchHub> {
 public:
  // Subscribes to `host`'s incident changes (host may be null: only Shutdown ends a watch). The
  // host keeps a reference to the hub, so the hub lives as long as the host does.
  static std::shared_ptr<IncidentWatchHub> Create(AnalysisHost* host,
                                                  IncidentWatchOptions options = {});

  // Requests WatchIncidents calls of `service` on `cq`, one at a time; `admit` says whether a
  // call may watch (the reader role), or the status to refuse it with.
  void Arm(v1::Query::AsyncService* service, grpc::ServerCompletionQueue* cq, LiveCalls* live,
           std::function<grpc::Status(const grpc::ServerContextBase&)> admit);
  // Queues `changes` to every watcher (the host's flush thread). Never blocks on a watcher.
  void Publish(const std::vector<analysis::IncidentChange>& changes) ABSL_LOCKS_EXCLUDED(mu_);
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  size_t watchers() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t cut_off() const ABSL_LOCKS_EXCLUDED(mu_);  // watchers ended for falling behind

 private:
  class Watcher;
  struct Arming {
    v1::Query::AsyncService* service = nullptr;
    grpc::ServerCompletionQueue* cq = nullptr;
    LiveCalls* live = nullptr;
    std::function<grpc::Status(const grpc::ServerContextBase&)> admit;
  };
  IncidentWatchHub(AnalysisHost* host, IncidentWatchOptions options)
      : host_(host), options_(options) {}
  void Arm(std::shared_ptr<const Arming> arming);
  // A call has arrived: registered, then refused or begun.
  void Start(Watcher* w, const v1::WatchIncidentsRequest& request, const grpc::Status& admitted)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Remove(Watcher* w) ABSL_LOCKS_EXCLUDED(mu_);

  AnalysisHost* const host_;
  const IncidentWatchOptions options_;
  mutable absl::Mutex mu_;
  std::set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t cut_off_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_QUERY_INCIDENT_WATCH_H_
