// An Alertmanager (v2 API): POST <url>/api/v2/alerts with every firing alert (one per open
// incident, endsAt omitted) and every resolved alert not yet delivered (endsAt = resolved time).
// Sent soon after a change (batch_delay) and re-sent every resend_interval while anything fires,
// as Alertmanager expects (it resolves an alert that is not re-sent within its resolve_timeout).
// A failed POST is retried with jittered exponential backoff; a resolved alert is given up after
// max_age. Alertmanager deduplicates firing alerts by their labels, so re-sending them after a
// restart raises nothing new; resolved alerts it acknowledged are recorded and never sent again.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERTMANAGER_SENDER_H_
#define RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERTMANAGER_SENDER_H_

#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/aggregator/alerts/alert_sender.h"

namespace ringside::daemon {

class AlertmanagerSender final : public AlertSender {
 public:
  // `options.url` is the Alertmanager's base URL; /api/v2/alerts is appended to its path.
  explicit AlertmanagerSender(SenderOptions options);
  ~AlertmanagerSender() override;

  void Enqueue(const analysis::IncidentChange& change) override ABSL_LOCKS_EXCLUDED(mu_);
  void Reconcile(const std::vector<analysis::Incident>& open, const IncidentLookup& lookup) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Alert {
    analysis::Incident incident;
    analysis::IncidentChangeType type;  // the last change seen
    absl::Time queued;
  };
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  void UpdateQueueLength() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddResolved(const analysis::Incident& inc, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  HttpUrl post_url_;
  absl::Mutex mu_;
  std::map<uint64_t, Alert> firing_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> unsent_ ABSL_GUARDED_BY(mu_);  // firing ids changed since the last send
  std::map<uint64_t, Alert> resolved_ ABSL_GUARDED_BY(mu_);
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Backoff backoff_;
  std::thread worker_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERTMANAGER_SENDER_H_
