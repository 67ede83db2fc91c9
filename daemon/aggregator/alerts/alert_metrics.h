// The alert senders' self-metrics on the aggregator's /metrics: a Collectable reading each
// sender's counters at scrape time (deliveries ok/failed, retries, drops by reason, duplicates
// skipped, queue length, last delivery). Labels: type (alertmanager, webhook) and receiver
// ("<type>:<host:port>", bounded by the configured receivers). The families are listed in
// AggregatorMetricCatalog() and docs/metrics.md.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERT_METRICS_H_
#define RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERT_METRICS_H_

#include <memory>
#include <vector>

#include "daemon/aggregator/alerts/alert_sender.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace ringside::daemon {

class AlertMetrics final : public prometheus::Collectable {
 public:
  // `senders` must outlive it.
  explicit AlertMetrics(const std::vector<std::unique_ptr<AlertSender>>* senders)
      : senders_(senders) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::vector<std::unique_ptr<AlertSender>>* senders_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERT_METRICS_H_
