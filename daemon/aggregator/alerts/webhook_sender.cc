#include "daemon/aggregator/alerts/webhook_sender.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "daemon/aggregator/alerts/alert_format.h"
#include "daemon/aggregator/alerts/hmac.h"

namespace ringside::daemon {

using analysis::Incident;
using analysis::IncidentChangeType;

std::vector<std::pair<std::string, std::string>> WebhookHeaders(absl::string_view body,
                                                                absl::string_view secret,
                                                                absl::string_view delivery_id,
                                                                absl::Time event_time) {
  return {{"Content-Type", "application/json"},
          {"User-Agent", "ringside-aggregator"},
          {"X-Ringside-Signature", absl::StrCat("sha256=", HmacSha256Hex(secret, body))},
          {"X-Ringside-Delivery", std::string(delivery_id)},
          {"X-Ringside-Timestamp", absl::StrCat(absl::ToUnixSeconds(event_time))}};
}

WebhookSender::WebhookSender(SenderOptions options)
    : AlertSender(std::move(options)), backoff_(options_.backoff) {
  worker_ = std::thread([this] { Run(); });
}

WebhookSender::~WebhookSender() { Stop(); }

void WebhookSender::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  stop_cv_.Notify();
  if (worker_.joinable()) worker_.join();
}

void WebhookSender::Push(Event e) {
  if (options_.state->Delivered(options_.key, e.incident.id, e.incident.revision)) {
    stats_.duplicates_skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  absl::MutexLock l(&mu_);
  if (queue_.size() >= options_.queue_size) {
    // Drop the oldest event that is not being sent right now.
    const size_t victim = in_flight_ ? 1 : 0;
    if (victim < queue_.size()) {
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(victim));
    } else {
      stats_.dropped_queue_full.fetch_add(1, std::memory_order_relaxed);
      return;  // queue_size 1 with the only slot in flight: drop the new one
    }
    stats_.dropped_queue_full.fetch_add(1, std::memory_order_relaxed);
  }
  queue_.push_back(std::move(e));
  stats_.queue_length.store(static_cast<int64_t>(queue_.size()), std::memory_order_relaxed);
}

void WebhookSender::Enqueue(const analysis::IncidentChange& change) {
  Push(Event{change.type, change.incident, options_.now()});
}

void WebhookSender::Reconcile(const std::vector<Incident>& open, const IncidentLookup& lookup) {
  const absl::Time now = options_.now();
  std::set<uint64_t> open_ids;
  for (const Incident& inc : open) {
    open_ids.insert(inc.id);
    std::optional<DeliveryRecord> r = options_.state->Get(options_.key, inc.id);
    if (r.has_value() && r->revision >= inc.revision) continue;
    Push(Event{r.has_value() ? IncidentChangeType::kUpdated : IncidentChangeType::kOpened, inc,
               now});
  }
  for (const auto& [id, r] : options_.state->Entries(options_.key)) {
    if (r.type == IncidentChangeType::kResolved || open_ids.count(id)) continue;
    std::optional<Incident> inc = lookup ? lookup(id) : std::nullopt;
    if (inc.has_value() && inc->resolved.has_value()) {
      if (inc->revision > r.revision) Push(Event{IncidentChangeType::kResolved, *inc, now});
    } else if (!inc.has_value()) {
      (void)options_.state->Forget(options_.key, id);  // unknown to the store: nothing to send
    }
  }
}

void WebhookSender::PopFront() {
  absl::MutexLock l(&mu_);
  if (!queue_.empty()) queue_.pop_front();
  in_flight_ = false;
  stats_.queue_length.store(static_cast<int64_t>(queue_.size()), std::memory_order_relaxed);
}

bool WebhookSender::Sleep(absl::Duration d) {
  absl::MutexLock l(&mu_);
  // The retry backoff on the monotonic clock: a step back of the wall clock must not hold a page.
  stop_cv_.AwaitWithTimeout(mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_; }, d);
  return !stop_;
}

void WebhookSender::Run() {
  bool retrying = false;
  while (true) {
    Event ev;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      ev = queue_.front();
      in_flight_ = true;
    }
    const Incident& inc = ev.incident;
    if (options_.state->Delivered(options_.key, inc.id, inc.revision)) {
      stats_.duplicates_skipped.fetch_add(1, std::memory_order_relaxed);
      PopFront();
      retrying = false;
      continue;
    }
    if (ev.type == IncidentChangeType::kResolved &&
        !options_.state->Get(options_.key, inc.id).has_value()) {
      // The receiver has nothing of this incident: its `opened` first, never a resolution alone.
      absl::MutexLock l(&mu_);
      if (queue_.empty()) continue;  // only Stop empties it
      if (ev.opened_first) {  // the `opened` made for it was dropped: drop the resolution too
        Log(absl::StrCat(options_.name, ": dropped ", DeliveryId(inc, ev.type),
                         ": its incident never reached the receiver"));
        queue_.pop_front();
        in_flight_ = false;
        stats_.queue_length.store(static_cast<int64_t>(queue_.size()), std::memory_order_relaxed);
        continue;
      }
      queue_.front().opened_first = true;
      queue_.push_front(Event{IncidentChangeType::kOpened, FiringView(inc), ev.queued});
      in_flight_ = false;
      stats_.queue_length.store(static_cast<int64_t>(queue_.size()), std::memory_order_relaxed);
      continue;
    }
    const absl::Time now = options_.now();
    if (now - ev.queued > options_.max_age) {
      stats_.dropped_expired.fetch_add(1, std::memory_order_relaxed);
      Log(absl::StrCat(options_.name, ": gave up on ", DeliveryId(inc, ev.type), " after ",
                       absl::FormatDuration(options_.max_age)));
      PopFront();
      retrying = false;
      continue;
    }
    if (retrying) stats_.retried.fetch_add(1, std::memory_order_relaxed);
    HttpClientRequest req;
    req.method = "POST";
    req.url = options_.url;
    req.body = WebhookBody(inc, ev.type);
    req.headers = WebhookHeaders(req.body, options_.secret, DeliveryId(inc, ev.type),
                                 EventTime(inc, ev.type));
    req.timeout = options_.http_timeout;
    req.tls = options_.tls;
    absl::StatusOr<HttpClientResponse> resp = SendHttp(req);
    if (resp.ok() && resp->status >= 200 && resp->status < 300) {
      NoteSuccess();
      absl::Status s =
          options_.state->Record(options_.key, inc.id, DeliveryRecord{inc.revision, ev.type, now});
      if (!s.ok())
        Log(absl::StrCat(options_.name, ": cannot save the delivery state: ", s.message()));
      options_.state->Prune(now - options_.state_retention);
      backoff_.Reset();
      retrying = false;
      PopFront();
      continue;
    }
    if (resp.ok() && !RetryableHttpStatus(resp->status)) {
      NoteFailure(
          absl::StrCat("HTTP ", resp->status, " (not retried): ", resp->body.substr(0, 200)));
      stats_.dropped_rejected.fetch_add(1, std::memory_order_relaxed);
      retrying = false;
      PopFront();
      continue;
    }
    NoteFailure(resp.ok() ? absl::StrCat("HTTP ", resp->status, ": ", resp->body.substr(0, 200))
                          : std::string(resp.status().message()));
    retrying = true;
    if (!Sleep(backoff_.Next())) return;
  }
}

}  // namespace ringside::daemon
