// A generic webhook receiver: each incident change is POSTed as JSON (alert_format.h
// WebhookBody), signed with X-Ringside-Signature: sha256=<HMAC-SHA256 hex of the body>, with
// X-Ringside-Delivery (stable id) and X-Ringside-Timestamp (the event's Unix seconds). Events go
// out one at a time, in order; a failed one is retried with jittered exponential backoff (the
// ones behind it wait) until delivered or older than max_age. The queue is bounded: when full,
// the oldest waiting event is dropped and counted. Never a resolution alone: a `resolved` event
// for an incident the receiver has no event of (its `opened` was dropped, or never queued here)
// goes out after an `opened` event made from it (FiringView), and is dropped if that fails.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_ALERTS_WEBHOOK_SENDER_H_
#define RINGSIDE_DAEMON_AGGREGATOR_ALERTS_WEBHOOK_SENDER_H_

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/aggregator/alerts/alert_sender.h"
#include "daemon/common/steady_time.h"

namespace ringside::daemon {

// The headers of one webhook request for `body` (Content-Type, the signature, delivery id and
// timestamp).
std::vector<std::pair<std::string, std::string>> WebhookHeaders(absl::string_view body,
                                                                absl::string_view secret,
                                                                absl::string_view delivery_id,
                                                                absl::Time event_time);

class WebhookSender final : public AlertSender {
 public:
  explicit WebhookSender(SenderOptions options);
  ~WebhookSender() override;

  void Enqueue(const analysis::IncidentChange& change) override ABSL_LOCKS_EXCLUDED(mu_);
  void Reconcile(const std::vector<analysis::Incident>& open, const IncidentLookup& lookup) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Event {
    analysis::IncidentChangeType type;
    analysis::Incident incident;
    absl::Time queued;
    bool opened_first = false;  // a resolution behind the `opened` event made for it
  };
  void Push(Event e) ABSL_LOCKS_EXCLUDED(mu_);
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  void PopFront() ABSL_LOCKS_EXCLUDED(mu_);
  // Sleeps `d` unless stopped; false when stopped.
  bool Sleep(absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::deque<Event> queue_ ABSL_GUARDED_BY(mu_);
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;  // the front is being sent
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  SteadyCondVar stop_cv_;  // wakes the retry backoff when stop_ is set
  Backoff backoff_;
  std::thread worker_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_ALERTS_WEBHOOK_SENDER_H_
