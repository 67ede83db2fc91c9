// What the aggregator's analysis shows on /metrics, for Prometheus and Grafana: incidents open by
// kind and severity, each link's health, PFC paused ratios and RoCE congestion rates per port,
// straggler scores per rank, collective duration histograms per job and function, and the
// analysis' own health. Families and labels: docs/metrics.md "## Aggregator" (checked by
// tests/aggregator/metrics/analysis_metrics_test.cc against AnalysisMetricCatalog()).
//
//   AnalysisMetrics m(options, host);   // host: the AnalysisHost, or null without --detect
//   ObserverFanout fan({host, &m});     // m sees every sample and collective batch
//   aggregator options: observer = &fan, collectables = {m as a Collectable}
//
// Scrapes never hold the analysis lock long: the views (the worst links, ranks, open incidents)
// are taken under it at most once per `refresh_interval` — of the links only those /metrics will
// show are copied (link_snapshot.h) — then sorted, bounded and rendered outside it. Each
// per-entity family is bounded by a --metrics-max-* flag: over the bound the worst entities are
// kept (highest state code, score or ratio) and ringside_metrics_series_dropped{family} says how
// many were left out.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_METRICS_ANALYSIS_METRICS_H_
#define RINGSIDE_DAEMON_AGGREGATOR_METRICS_ANALYSIS_METRICS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "analysis/fabric_views.h"
#include "daemon/aggregator/analysis_host.h"
#include "daemon/aggregator/ingest/ingest_core.h"
#include "daemon/aggregator/metrics/collective_histograms.h"
#include "daemon/aggregator/metrics/link_snapshot.h"
#include "daemon/aggregator/metrics/port_rate_tracker.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"

namespace ringside::daemon {

struct AnalysisMetricSpec {
  absl::string_view name;
  prometheus::MetricType type;  // Counter, Gauge or Histogram
  absl::string_view labels;     // comma-separated, as in docs/metrics.md
  absl::string_view help;
};

// Every family AnalysisMetrics exports (docs/metrics.md "## Aggregator" lists the same).
const std::vector<AnalysisMetricSpec>& AnalysisMetricCatalog();

// ringside_link_health values.
enum class LinkHealth { kHealthy = 0, kDegraded = 1, kFlapping = 2, kDown = 3 };

struct AnalysisMetricsOptions {
  size_t max_links = 20000;               // ringside_link_health / _flaps_in_window series
  size_t max_ports = 20000;               // series of each PFC / RoCE congestion family
  size_t max_ranks = 20000;               // ringside_straggler_* series
  CollectiveHistogramOptions histograms;  // max_jobs, max_functions
  // A port signal not updated for this long is dropped.
  absl::Duration port_stale_after = absl::Minutes(2);
  // Scrapes within this long of the last reuse its copy of the analysis views.
  absl::Duration refresh_interval = absl::Seconds(1);
  std::function<absl::Time()> now = absl::Now;
};

class AnalysisMetrics final : public IngestObserver, public prometheus::Collectable {
 public:
  // `host` may be null (no detectors: the link, straggler and incident families are absent); it
  // must outlive this object.
  AnalysisMetrics(AnalysisMetricsOptions options, AnalysisHost* host);

  void OnSamples(absl::string_view node,
                 absl::Span<const analysis::ObservedSample> samples) override;
  void OnCollectives(absl::string_view node, uint64_t agent_epoch, uint64_t seq,
                     absl::Time received, const v1::CollectiveBatch& batch) override;

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  // What the scrape copies out of the analysis under its lock.
  struct OpenIncident {
    int kind = 0;
    int severity = 0;
  };
  struct Views {
    absl::Time taken = absl::InfinitePast();
    double lock_seconds = 0;
    size_t pending_findings = 0;
    size_t unsaved_incidents = 0;  // changed in memory, not yet in the incident store
    std::vector<OpenIncident> incidents;
    // The worst --metrics-max-links links, worst first, of `links_total` (link_snapshot.h).
    std::vector<LinkHealthView> links;
    size_t links_total = 0;
    std::vector<analysis::RankView> ranks;
    TopologyState topology;
    size_t ports_without_peer = 0;  // InfiniBand ports and netdevs
  };
  // Incident changes seen by the listener, by kind and type (shared with it: the host may call it
  // after this object is gone).
  struct ChangeCounts;

  std::shared_ptr<const Views> CurrentViews() const ABSL_LOCKS_EXCLUDED(views_mu_);

  const AnalysisMetricsOptions options_;
  AnalysisHost* const host_;
  std::shared_ptr<ChangeCounts> changes_;
  mutable PortRateTracker ports_;
  CollectiveHistograms histograms_;
  mutable absl::Mutex views_mu_;
  mutable std::shared_ptr<const Views> views_ ABSL_GUARDED_BY(views_mu_);
};

// The link a LinkView or an incident entity is about, as one string ("" if it names none).
std::string LinkKeyOf(const analysis::LinkView& link);
std::string LinkKeyOf(const std::map<std::string, std::string>& entity);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_METRICS_ANALYSIS_METRICS_H_
