#include "daemon/aggregator/alerts/alertmanager_sender.h"

#include <algorithm>

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
  cv_.Notify();
  if (worker_.joinable()) worker_.join();
}

void AlertmanagerSender::UpdateQueueLength() {
  int64_t waiting = 0;
  for (const auto& [id, a] : alerts_) waiting += (a.unsent || a.resolution.has_value()) ? 1 : 0;
  stats_.queue_length.store(waiting, std::memory_order_relaxed);
}

absl::Time AlertmanagerSender::ReleaseTime(const Alert& a) const {
  if (!a.resolution.has_value() || a.fired_at == absl::InfiniteFuture()) {
    return absl::InfiniteFuture();
  }
  return a.fired_at + MinFiring(options_, a.firing.kind);
}

void AlertmanagerSender::AddResolved(const Incident& inc, absl::Time now) {
  std::optional<DeliveryRecord> r = options_.state->Get(options_.key, inc.id);
  if (r.has_value() && r->type == IncidentChangeType::kResolved) {
    stats_.duplicates_skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto it = alerts_.find(inc.id);
  if (it == alerts_.end()) {
    size_t resolutions = 0;
    auto oldest = alerts_.end();
    for (auto a = alerts_.begin(); a != alerts_.end(); ++a) {
      if (!a->second.resolution.has_value()) continue;
      ++resolutions;
      if (oldest == alerts_.end() || a->second.queued < oldest->second.queued) oldest = a;
    }
    if (resolutions >= options_.queue_size && oldest != alerts_.end()) {
      // Drop the resolved alert queued longest ago (Alertmanager resolves it by its timeout).
      alerts_.erase(oldest);
      stats_.dropped_queue_full.fetch_add(1, std::memory_order_relaxed);
    }
    // Not seen open here: it is sent firing first all the same (never a resolution alone).
    Alert a;
    a.firing = FiringView(inc);
    a.type = IncidentChangeType::kOpened;
    if (r.has_value()) {  // Alertmanager had it firing (before a restart)
      a.fired_at = r->at;
      a.unsent = r->revision < a.firing.revision;
    }
    it = alerts_.emplace(inc.id, std::move(a)).first;
  }
  it->second.resolution = inc;
  it->second.queued = now;
}

void AlertmanagerSender::Enqueue(const analysis::IncidentChange& change) {
  const Incident& inc = change.incident;
  const absl::Time now = options_.now();
  absl::MutexLock l(&mu_);
  if (change.type == IncidentChangeType::kResolved) {
    AddResolved(inc, now);
  } else {
    auto it = alerts_.find(inc.id);
    if (it == alerts_.end()) {
      Alert a;
      a.firing = inc;
      a.type = change.type;
      a.queued = now;
      alerts_.emplace(inc.id, std::move(a));
    } else {
      Alert& a = it->second;
      if (a.resolution.has_value() || a.firing.revision >= inc.revision) return;
      // Alertmanager tells alerts apart by their labels: new labels are a new alert, so the old
      // one, if it may have gone out, is resolved now (and one the labels return to is not).
      const std::map<std::string, std::string> labels = AlertLabels(inc);
      std::erase_if(a.retired, [&](const Incident& r) { return AlertLabels(r) == labels; });
      const bool maybe_sent = !a.unsent || a.fired_at != absl::InfiniteFuture();
      if (maybe_sent && AlertLabels(a.firing) != labels) {
        Incident old = a.firing;
        old.resolved = now;
        a.retired.push_back(std::move(old));
      }
      a.firing = inc;
      a.type = change.type;
      a.queued = now;
      a.unsent = true;
    }
  }
  dirty_ = true;
  cv_.Notify();
  UpdateQueueLength();
}

void AlertmanagerSender::Reconcile(const std::vector<Incident>& open,
                                   const IncidentLookup& lookup) {
  const absl::Time now = options_.now();
  absl::MutexLock l(&mu_);
  for (const Incident& inc : open) {
    std::optional<DeliveryRecord> r = options_.state->Get(options_.key, inc.id);
    auto it = alerts_.find(inc.id);
    if (it != alerts_.end() &&
        (it->second.resolution.has_value() || it->second.firing.revision >= inc.revision)) {
      continue;
    }
    Alert& a = alerts_[inc.id];
    a.firing = inc;
    a.type = r.has_value() ? IncidentChangeType::kUpdated : IncidentChangeType::kOpened;
    a.queued = now;
    // Firing alerts are re-sent anyway; only a new revision counts as unsent.
    a.unsent = !r.has_value() || r->revision < inc.revision;
    if (r.has_value() && r->type != IncidentChangeType::kResolved &&
        a.fired_at == absl::InfiniteFuture()) {
      a.fired_at = r->at;
    }
  }
  for (const auto& [id, r] : options_.state->Entries(options_.key)) {
    if (r.type == IncidentChangeType::kResolved || alerts_.count(id)) continue;
    std::optional<Incident> inc = lookup ? lookup(id) : std::nullopt;
    if (inc.has_value() && inc->resolved.has_value()) {
      AddResolved(*inc, now);  // it fired here before: held until its minimum firing time
    } else if (!inc.has_value()) {
      (void)options_.state->Forget(options_.key, id);
    }
  }
  dirty_ = true;  // send the firing alerts now: Alertmanager expects them again
  cv_.Notify();
  UpdateQueueLength();
}

void AlertmanagerSender::Run() {
  // The next re-send or retry, on the monotonic clock: a step back of the wall clock must not hold
  // re-sends (Alertmanager resolves an alert not re-sent within its resolve_timeout) or retries.
  absl::Time next_send = absl::InfiniteFuture();
  bool retrying = false;
  while (true) {
    std::vector<Sent> batch;
    {
      absl::MutexLock l(&mu_);
      // A change sends at once, except while waiting to retry; otherwise the re-send time, or
      // the time a held resolution may go out.
      absl::Time deadline = next_send;
      if (!retrying) {
        const absl::Time now = options_.now();
        for (const auto& [id, a] : alerts_) {
          const absl::Time release = ReleaseTime(a);
          if (release != absl::InfiniteFuture()) {
            deadline =
                std::min(deadline, SteadyNow() + std::max(absl::ZeroDuration(), release - now));
          }
        }
      }
      auto wake = [this, retrying]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || (dirty_ && !retrying); };
      cv_.AwaitWithTimeout(mu_, wake, deadline - SteadyNow());
      if (stop_) return;
    }
    if (!retrying) absl::SleepFor(options_.batch_delay);  // gather a burst of changes
    const absl::Time now = options_.now();
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
      for (auto it = alerts_.begin(); it != alerts_.end();) {
        const Alert& a = it->second;
        if (a.resolution.has_value()) {
          const absl::Time release = ReleaseTime(a);
          const absl::Time since =
              release == absl::InfiniteFuture() ? a.queued : std::max(a.queued, release);
          if (now - since > options_.max_age) {
            stats_.dropped_expired.fetch_add(1, std::memory_order_relaxed);
            it = alerts_.erase(it);
            continue;
          }
        }
        ++it;
      }
      for (const auto& [id, a] : alerts_) {
        for (const Incident& r : a.retired) {
          batch.push_back(Sent{r, IncidentChangeType::kResolved, /*retired=*/true});
        }
        if (a.resolution.has_value() && ReleaseTime(a) <= now) {
          batch.push_back(Sent{*a.resolution, IncidentChangeType::kResolved});
        } else {
          batch.push_back(Sent{a.firing, a.type});
        }
      }
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
    for (const Sent& a : batch) incidents.push_back(&a.incident);
    HttpClientRequest req;
    req.method = "POST";
    req.url = post_url_;
    req.body = PostableAlertsJson(incidents, options_.runbook_base);
    req.headers = {{"Content-Type", "application/json"}, {"User-Agent", "ringside-aggregator"}};
    req.timeout = options_.http_timeout;
    req.tls = options_.tls;
    absl::StatusOr<HttpClientResponse> resp = SendHttp(req);
    if (resp.ok() && resp->status >= 200 && resp->status < 300) {
      NoteSuccess();
      const absl::Time accepted = options_.now();
      std::vector<std::pair<uint64_t, DeliveryRecord>> records;
      bool idle = false;
      {
        absl::MutexLock l(&mu_);
        for (const Sent& a : batch) {
          const Incident& inc = a.incident;
          auto it = alerts_.find(inc.id);
          if (a.retired) {  // delivered once: enough for Alertmanager to end that alert
            if (it != alerts_.end()) {
              const std::map<std::string, std::string> labels = AlertLabels(inc);
              std::erase_if(it->second.retired,
                            [&](const Incident& r) { return AlertLabels(r) == labels; });
            }
            continue;
          }
          if (a.type == IncidentChangeType::kResolved) {
            if (it != alerts_.end() && it->second.resolution.has_value() &&
                it->second.resolution->revision <= inc.revision) {
              alerts_.erase(it);
            }
          } else {
            if (it != alerts_.end()) {
              Alert& held = it->second;
              if (held.fired_at == absl::InfiniteFuture()) held.fired_at = accepted;
              if (held.firing.revision <= inc.revision) held.unsent = false;
            }
            if (options_.state->Delivered(options_.key, inc.id, inc.revision)) continue;
          }
          records.emplace_back(inc.id, DeliveryRecord{inc.revision, a.type, accepted});
        }
        UpdateQueueLength();
        idle = alerts_.empty();
      }
      // The file is written without mu_ held: Enqueue (the flush thread) never waits for a disk.
      if (absl::Status s = options_.state->RecordAll(options_.key, records); !s.ok()) {
        Log(absl::StrCat(options_.name, ": cannot save the delivery state: ", s.message()));
      }
      options_.state->Prune(now - options_.state_retention);
      backoff_.Reset();
      retrying = false;
      next_send = idle ? absl::InfiniteFuture() : SteadyNow() + options_.resend_interval;
      continue;
    }
    NoteFailure(resp.ok() ? absl::StrCat("HTTP ", resp->status, ": ", resp->body.substr(0, 200))
                          : std::string(resp.status().message()));
    retrying = true;
    next_send = SteadyNow() + backoff_.Next();
  }
}

}  // namespace ringside::daemon
