// The aggregator's /metrics: a prometheus-cpp Collectable that reads the ingest counters, the
// node table and the journal at scrape time (no double bookkeeping; counters are raw cumulative
// values). Collect() does no I/O and never throws. Per-node families carry only `node` and are
// bounded by --max-nodes; every other label is a fixed enum.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_METRICS_AGGREGATOR_METRICS_H_
#define RINGSIDE_DAEMON_AGGREGATOR_METRICS_AGGREGATOR_METRICS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "daemon/aggregator/ingest/ingest_core.h"
#include "daemon/aggregator/ingest/ingest_stats.h"
#include "daemon/aggregator/journal/journal.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"

namespace ringside::daemon {

struct AggregatorMetricSpec {
  absl::string_view name;
  prometheus::MetricType type;  // Counter or Gauge
  absl::string_view labels;     // comma-separated, as in docs/metrics.md
  absl::string_view help;
};

// Every family the aggregator exports (docs/metrics.md "## Aggregator" lists the same).
const std::vector<AggregatorMetricSpec>& AggregatorMetricCatalog();

class AggregatorCollectable final : public prometheus::Collectable {
 public:
  // `journal` may be null (memory only).
  AggregatorCollectable(const IngestCore* core, const IngestStats* stats, const Journal* journal,
                        std::string version)
      : core_(core), stats_(stats), journal_(journal), version_(std::move(version)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const IngestCore* core_;
  const IngestStats* stats_;
  const Journal* journal_;
  std::string version_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_METRICS_AGGREGATOR_METRICS_H_
