// Incidents → alerts: owns one sender per configured Alertmanager and webhook, the delivery
// state (<state-dir>/alert_delivery_state) and the alert self-metrics. The analysis host's
// listener calls OnChanges (it only queues); Reconcile at start sends what the receivers missed
// while the aggregator was down, and nothing they already have.
//
//   auto d = AlertDispatcher::Start(options);              // validates URLs and the secret
//   host->AddListener([p = d->get()](const auto& c) { p->OnChanges(c); });
//   (*d)->Reconcile(host->OpenIncidents(), lookup);        // after AddListener: nothing missed
#ifndef RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERT_DISPATCHER_H_
#define RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERT_DISPATCHER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "analysis/incidents.h"
#include "daemon/aggregator/alerts/alert_sender.h"
#include "daemon/aggregator/alerts/delivery_state.h"
#include "prometheus/collectable.h"

namespace ringside::daemon {

// The path in this repository; sites set --runbook-base-url to where they publish it.
inline constexpr char kDefaultRunbookBaseUrl[] = "docs/runbook.md";

struct AlertOptions {
  std::vector<std::string> alertmanager_urls;  // base URLs (http[s]://host:9093)
  std::vector<std::string> webhook_urls;
  std::string webhook_secret;  // required with webhooks
  std::string runbook_base_url = kDefaultRunbookBaseUrl;
  absl::Duration resend_interval = absl::Seconds(60);
  absl::Duration max_age = absl::Hours(1);  // --webhook-max-age (also resolved alerts)
  size_t queue_size = 10000;                // per receiver
  absl::Duration http_timeout = absl::Seconds(10);
  HttpTlsOptions tls;  // --alert-ca, --alert-client-cert, --alert-client-key (every receiver)
  BackoffOptions backoff{absl::Seconds(1), absl::Seconds(30), 2.0, 0.2};
  absl::Duration batch_delay = kDefaultAlertBatchDelay;  // --alert-batch-delay
  // --alert-min-firing, --alert-min-firing-for (Alertmanager only; see SenderOptions).
  absl::Duration min_firing = kDefaultAlertMinFiring;
  std::map<analysis::IncidentKind, absl::Duration> min_firing_for;
  std::string state_dir;  // the delivery state file lives here; empty: memory only
  std::function<absl::Time()> now = absl::Now;
  std::function<void(const std::string&)> log;
};

// Reads a secret file, stripping one trailing newline (and a \r before it). An unreadable or
// empty file is an error naming the path.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// --alert-min-firing-for: "kind=duration" items, comma-separated ("link_down=60s,straggler=0s").
// An unknown kind, a malformed or negative duration, or a kind given twice is an error.
absl::StatusOr<std::map<analysis::IncidentKind, absl::Duration>> ParseMinFiringFor(
    absl::string_view list);

class AlertDispatcher {
 public:
  static absl::StatusOr<std::unique_ptr<AlertDispatcher>> Start(AlertOptions options);
  ~AlertDispatcher();

  // Queues every change on every receiver (the flush thread; never blocks on the network).
  void OnChanges(const std::vector<analysis::IncidentChange>& changes);
  void Reconcile(const std::vector<analysis::Incident>& open, const IncidentLookup& lookup);
  // Stops every sender. Idempotent.
  void Stop();

  const std::vector<std::unique_ptr<AlertSender>>& senders() const { return senders_; }
  // The alert families of /metrics (ringside_aggregator_alert_*).
  std::shared_ptr<prometheus::Collectable> metrics() const { return metrics_; }
  DeliveryState& state() { return *state_; }

 private:
  AlertDispatcher() = default;
  AlertOptions options_;
  std::unique_ptr<DeliveryState> state_;
  std::vector<std::unique_ptr<AlertSender>> senders_;
  std::shared_ptr<prometheus::Collectable> metrics_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERT_DISPATCHER_H_
