#include "daemon/aggregator/query/incident_watch.h"

#include <deque>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/aggregator/analysis_host.h"
#include "daemon/aggregator/query/query_convert.h"
#include "daemon/aggregator/serving/async_writer.h"
#include "daemon/common/steady_time.h"

namespace ringside::daemon {

// One WatchIncidents stream: requested on a completion queue, and once it has arrived (the next
// one is requested then) registered with the hub. Deletes itself in OnDone. Every method takes
// mu_; StartWrite and Finish never run a reaction inline, so calling them under the lock is safe.
class IncidentWatchHub::Watcher final
    : public AsyncWriter<v1::WatchIncidentsRequest, v1::IncidentChange> {
 public:
  Watcher(std::shared_ptr<IncidentWatchHub> hub, std::shared_ptr<const Arming> arming)
      : AsyncWriter(arming->live),
        hub_(std::move(hub)),
        arming_(std::move(arming)),
        queue_limit_(hub_->options_.queue_limit) {}

  // Requests the call on `cq`.
  void Request() {
    arming_->service->RequestWatchIncidents(context(), request(), stream(), arming_->cq,
                                            arming_->cq, arrival());
  }

  void OnArrived(bool ok) override {
    if (!ok) {  // the server is shutting down
      delete this;
      return;
    }
    hub_->Arm(arming_);  // the next one
    hub_->Start(this, *request(), arming_->admit(*context()));
  }

  void SetFilter(IncidentFilter filter) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    filter_ = std::move(filter);
  }

  // The snapshot of open incidents goes first; changes queued before it and already reflected in
  // it (same or older revision) are dropped.
  void Begin(const std::vector<analysis::Incident>& open) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    std::deque<v1::IncidentChange> queue;
    for (const analysis::Incident& inc : open) {
      if (!IncidentMatches(filter_, inc)) continue;
      snapshot_revision_[inc.id] = inc.revision;
      queue.push_back(
          ToProto(analysis::IncidentChange{analysis::IncidentChangeType::kOpened, inc}, true));
    }
    for (v1::IncidentChange& c : queue_) {
      if (Covered(c.incident())) continue;
      queue.push_back(std::move(c));
    }
    queue_ = std::move(queue);
    live_queued_ = queue_.size() - snapshot_revision_.size();
    begun_ = true;
    MaybeWriteLocked();
  }

  // Returns false when the watcher was cut off for falling behind.
  bool Push(const analysis::IncidentChange& change) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (finished_) return true;
    if (!IncidentMatches(filter_, change.incident)) return true;
    if (begun_ && Covered(change.incident)) return true;
    if (live_queued_ >= queue_limit_) {
      FinishLocked(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("watcher too slow: more than ", queue_limit_, " incident changes queued")));
      return false;
    }
    queue_.push_back(ToProto(change, false));
    ++live_queued_;
    if (begun_) MaybeWriteLocked();
    return true;
  }

  // A watcher cut off while a write is in flight finishes when that write completes. A client
  // that does not read at all (its flow-control window stays shut) never lets it complete: past
  // `grace` the call is cancelled, which fails the write and ends the stream (the client sees
  // CANCELLED instead of RESOURCE_EXHAUSTED), so it does not hold a watcher slot for ever. Called
  // under the hub's lock, so OnDone (which takes it to remove the watcher) has not run.
  void CancelIfParked(absl::Time steady_now, absl::Duration grace) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!finished_ || !writing_ || cancelled_ || steady_now - finished_at_ < grace) return;
    cancelled_ = true;
    context()->TryCancel();
  }

  void End(grpc::Status status) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    FinishLocked(std::move(status));
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (finished_) return;  // a Finish waiting for this write is sent now (AsyncStreamCall)
    if (!ok) {  // the stream broke (client gone)
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    MaybeWriteLocked();
  }

  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    hub_->Remove(this);
    delete this;
  }

 private:
  bool Covered(const v1::Incident& inc) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = snapshot_revision_.find(inc.id());
    return it != snapshot_revision_.end() && inc.revision() <= it->second;
  }
  bool Covered(const analysis::Incident& inc) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = snapshot_revision_.find(inc.id);
    return it != snapshot_revision_.end() && inc.revision <= it->second;
  }

  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_ || queue_.empty()) return;
    current_ = std::move(queue_.front());
    queue_.pop_front();
    if (!current_.initial() && live_queued_ > 0) --live_queued_;
    writing_ = true;
    StartWrite(&current_);
  }

  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    finished_at_ = SteadyNow();
    queue_.clear();
    Finish(status);  // sent once the write in flight, if any, completes
  }

  const std::shared_ptr<IncidentWatchHub> hub_;
  const std::shared_ptr<const Arming> arming_;
  const size_t queue_limit_;
  absl::Mutex mu_;
  IncidentFilter filter_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::IncidentChange> queue_ ABSL_GUARDED_BY(mu_);
  size_t live_queued_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, uint64_t> snapshot_revision_ ABSL_GUARDED_BY(mu_);  // id → revision sent
  v1::IncidentChange current_ ABSL_GUARDED_BY(mu_);                      // being written
  bool begun_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time finished_at_ ABSL_GUARDED_BY(mu_);  // SteadyNow()
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

std::shared_ptr<IncidentWatchHub> IncidentWatchHub::Create(AnalysisHost* host,
                                                           IncidentWatchOptions options) {
  std::shared_ptr<IncidentWatchHub> hub(new IncidentWatchHub(host, options));
  if (host != nullptr) {
    host->AddListener(
        [hub](const std::vector<analysis::IncidentChange>& changes) { hub->Publish(changes); });
  }
  return hub;
}

void IncidentWatchHub::Arm(v1::Query::AsyncService* service, grpc::ServerCompletionQueue* cq,
                           LiveCalls* live,
                           std::function<grpc::Status(const grpc::ServerContextBase&)> admit) {
  auto arming = std::make_shared<Arming>();
  arming->service = service;
  arming->cq = cq;
  arming->live = live;
  arming->admit = std::move(admit);
  Arm(std::move(arming));
}

void IncidentWatchHub::Arm(std::shared_ptr<const Arming> arming) {
  (new Watcher(shared_from_this(), std::move(arming)))->Request();
}

void IncidentWatchHub::Start(Watcher* w, const v1::WatchIncidentsRequest& request,
                             const grpc::Status& admitted) {
  IncidentFilter filter;
  absl::StatusOr<std::optional<analysis::IncidentKind>> kind = ParseKindFilter(request.kind());
  if (kind.ok()) filter.kind = *kind;
  filter.node = request.node();
  filter.job = request.job();
  w->SetFilter(std::move(filter));
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = SteadyNow();
    for (Watcher* other : watchers_) other->CancelIfParked(now, options_.parked_grace);
    watchers_.insert(w);  // every watcher is registered: OnDone removes it
    if (!admitted.ok()) {
      w->End(admitted);
      return;
    }
    if (!kind.ok()) {
      w->End(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(kind.status().message())));
      return;
    }
    if (shut_down_) {
      w->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "aggregator shutting down"));
      return;
    }
    if (watchers_.size() > options_.max_watchers) {
      w->End(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("too many watchers (", options_.max_watchers, ")")));
      return;
    }
  }
  // Subscribed first, then the snapshot: nothing falls between the two.
  w->Begin(host_ != nullptr ? host_->OpenIncidents() : std::vector<analysis::Incident>{});
}

void IncidentWatchHub::Publish(const std::vector<analysis::IncidentChange>& changes) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = SteadyNow();
  for (Watcher* w : watchers_) w->CancelIfParked(now, options_.parked_grace);
  for (Watcher* w : watchers_) {
    for (const analysis::IncidentChange& c : changes) {
      if (!w->Push(c)) {
        ++cut_off_;
        break;
      }
    }
  }
}

void IncidentWatchHub::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  for (Watcher* w : watchers_) w->End(grpc::Status::OK);
}

void IncidentWatchHub::Remove(Watcher* w) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(w);
}

size_t IncidentWatchHub::watchers() const {
  absl::MutexLock lock(&mu_);
  return watchers_.size();
}

uint64_t IncidentWatchHub::cut_off() const {
  absl::MutexLock lock(&mu_);
  return cut_off_;
}

}  // namespace ringside::daemon
