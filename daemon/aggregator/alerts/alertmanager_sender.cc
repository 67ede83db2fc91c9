#include "daemon/aggregator/alerts/alertmanager_sender.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/aggregator/alerts/alert_format.h"

namespace ringside::daemon {

using analysis::Incident;
using analysis::IncidentChangeType;

AlertmanagerSender::AlertmanagerSender(SenderOptions options)
    : AlertSender(std::move(options)), backoff_(options_.backoff) {
  post_url_ = options_.url;
  std::string path = post_url_.path;
  std::string query;
  if (size_t q = path.find('?'); q != std::string::npos) {
    query = path.substr(q);
    path.resize(q);
  }
  post_url_.path = absl::StrCat(absl::StripSuffix(path, "/"), "/api/v2/alerts", query);
  worker_ = std::thread([this] { Run(); });
}

AlertmanagerSender::~AlertmanagerSender() { Stop(); }

void AlertmanagerSender::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (worker_.joinable()) worker_.join();
}

void AlertmanagerSender::UpdateQueueLength() {
  stats_.queue_length.store(static_cast<int64_t>(unsent_.size() + resolved_.size()),
                            std::memory_order_relaxed);
}

void AlertmanagerSender::AddResolved(const Incident& inc, absl::Time now) {
  std::optional<DeliveryRecord> r = options_.state->Get(options_.key, inc.id);
  if (r.has_value() && r->type == IncidentChangeType::kResolved) {
    stats_.duplicates_skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (resolved_.size() >= options_.queue_size && !resolved_.count(inc.id)) {
    // Drop the resolved alert queued longest ago (Alertmanager resolves it by its timeout).
    auto oldest = resolved_.begin();
    for (auto it = resolved_.begin(); it != resolved_.end(); ++it) {
      if (it->second.queued < oldest->second.queued) oldest = it;
    }
    resolved_.erase(oldest);
    stats_.dropped_queue_full.fetch_add(1, std::memory_order_relaxed);
  }
  resolved_[inc.id] = Alert{inc, IncidentChangeType::kResolved, now};
}

void AlertmanagerSender::Enqueue(const analysis::IncidentChange& change) {
  const Incident& inc = change.incident;
  absl::MutexLock l(&mu_);
  if (change.type == IncidentChangeType::kResolved) {
    firing_.erase(inc.id);
    unsent_.erase(inc.id);
    AddResolved(inc, options_.now());
  } else {
    auto it = firing_.find(inc.id);
    if (it != firing_.end() && it->second.incident.revision >= inc.revision) return;
    firing_[inc.id] = Alert{inc, change.type, options_.now()};
    unsent_.insert(inc.id);
  }
  dirty_ = true;
  UpdateQueueLength();
}

void AlertmanagerSender::Reconcile(const std::vector<Incident>& open,
                                   const IncidentLookup& lookup) {
  const absl::Time now = options_.now();
  absl::MutexLock l(&mu_);
  for (const Incident& inc : open) {
    std::optional<DeliveryRecord> r = options_.state->Get(options_.key, inc.id);
    auto it = firing_.find(inc.id);
    if (it != firing_.end() && it->second.incident.revision >= inc.revision) continue;
    firing_[inc.id] =
        Alert{inc, r.has_value() ? IncidentChangeType::kUpdated : IncidentChangeType::kOpened, now};
    // Firing alerts are re-sent anyway; only a new revision counts as unsent.
    if (!r.has_value() || r->revision < inc.revision) unsent_.insert(inc.id);
  }
  for (const auto& [id, r] : options_.state->Entries(options_.key)) {
    if (r.type == IncidentChangeType::kResolved || firing_.count(id)) continue;
    std::optional<Incident> inc = lookup ? lookup(id) : std::nullopt;
    if (inc.has_value() && inc->resolved.has_value()) {
      AddResolved(*inc, now);
    } else if (!inc.has_value()) {
      (void)options_.state->Forget(options_.key, id);
    }
  }
  dirty_ = true;  // send the firing alerts now: Alertmanager expects them again
  UpdateQueueLength();
}

void AlertmanagerSender::Run() {
  absl::Time next_send = absl::InfiniteFuture();  // the next re-send or retry
  bool retrying = false;
  while (true) {
    std::vector<Alert> batch;
    {
      absl::MutexLock l(&mu_);
      // A change sends at once, except while waiting to retry; otherwise the re-send time.
      auto wake = [this, retrying]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || (dirty_ && !retrying); };
      mu_.AwaitWithDeadline(absl::Condition(&wake), next_send);
      if (stop_) return;
    }
    if (!retrying) absl::SleepFor(options_.batch_delay);  // gather a burst of changes
    const absl::Time now = options_.now();
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
      for (auto it = resolved_.begin(); it != resolved_.end();) {
        if (now - it->second.queued > options_.max_age) {
          stats_.dropped_expired.fetch_add(1, std::memory_order_relaxed);
          it = resolved_.erase(it);
        } else {
          ++it;
        }
      }
      for (const auto& [id, a] : firing_) batch.push_back(a);
      for (const auto& [id, a] : resolved_) batch.push_back(a);
      dirty_ = false;
      UpdateQueueLength();
    }
    if (batch.empty()) {
      next_send = absl::InfiniteFuture();
      retrying = false;
      continue;
    }
    if (retrying) stats_.retried.fetch_add(1, std::memory_order_relaxed);
    std::vector<const Incident*> incidents;
    incidents.reserve(batch.size());
    for (const Alert& a : batch) incidents.push_back(&a.incident);
    HttpClientRequest req;
    req.method = "POST";
    req.url = post_url_;
    req.body = PostableAlertsJson(incidents, options_.runbook_base);
    req.headers = {{"Content-Type", "application/json"}, {"User-Agent", "ringside-aggregator"}};
    req.timeout = options_.http_timeout;
    absl::StatusOr<HttpClientResponse> resp = SendHttp(req);
    if (resp.ok() && resp->status >= 200 && resp->status < 300) {
      NoteSuccess();
      std::vector<std::pair<uint64_t, DeliveryRecord>> records;
      bool idle = false;
      {
        absl::MutexLock l(&mu_);
        for (const Alert& a : batch) {
          const Incident& inc = a.incident;
          if (a.type == IncidentChangeType::kResolved) {
            auto it = resolved_.find(inc.id);
            if (it != resolved_.end() && it->second.incident.revision <= inc.revision) {
              resolved_.erase(it);
            }
          } else {
            auto it = firing_.find(inc.id);
            if (it != firing_.end() && it->second.incident.revision <= inc.revision) {
              unsent_.erase(inc.id);
            }
            if (options_.state->Delivered(options_.key, inc.id, inc.revision)) continue;
          }
          records.emplace_back(inc.id, DeliveryRecord{inc.revision, a.type, now});
        }
        UpdateQueueLength();
        idle = firing_.empty() && resolved_.empty();
      }
      // The file is written without mu_ held: Enqueue (the flush thread) never waits for a disk.
      if (absl::Status s = options_.state->RecordAll(options_.key, records); !s.ok()) {
        Log(absl::StrCat(options_.name, ": cannot save the delivery state: ", s.message()));
      }
      options_.state->Prune(now - options_.state_retention);
      backoff_.Reset();
      retrying = false;
      next_send = idle ? absl::InfiniteFuture() : absl::Now() + options_.resend_interval;
      continue;
    }
    NoteFailure(resp.ok() ? absl::StrCat("HTTP ", resp->status, ": ", resp->body.substr(0, 200))
                          : std::string(resp.status().message()));
    retrying = true;
    next_send = absl::Now() + backoff_.Next();
  }
}

}  // namespace ringside::daemon
