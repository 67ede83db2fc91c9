// The agent's /metrics: a prometheus-cpp Collectable that turns the sampler's latest snapshot into
// metric families at scrape time. Counters are exported as counters with their raw cumulative
// values (scaled to base units only), so Prometheus' rate() works and nothing is counted twice.
// Collect() does no I/O and never throws.
#ifndef RINGSIDE_DAEMON_AGENT_EXPOSITION_H_
#define RINGSIDE_DAEMON_AGENT_EXPOSITION_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/agent/link_events.h"
#include "daemon/agent/sampler.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace ringside::daemon {

struct ExpositionOptions {
  std::string version;
  // Adds the link-transition counters when set.
  const LinkEventLog* links = nullptr;
  // Adds the event sources' own health (netlink overflows and receive buffer, verbs removals).
  const LinkEventReader* link_reader = nullptr;
  // Export every ethtool statistic (mlx5 has thousands, mostly per ring) instead of the catalog's.
  bool ethtool_all = false;
  // More families appended at scrape time (the uploader's self-metrics); must not block or throw.
  std::function<std::vector<prometheus::MetricFamily>()> extra_families = nullptr;
};

class SnapshotCollectable final : public prometheus::Collectable {
 public:
  SnapshotCollectable(const Sampler* sampler, ExpositionOptions options)
      : sampler_(sampler), options_(std::move(options)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const Sampler* sampler_;
  ExpositionOptions options_;
};

// The same families for a given snapshot (what Collect() returns for the latest one).
std::vector<prometheus::MetricFamily> SnapshotToFamilies(const AgentSnapshot& snap,
                                                         const ExpositionOptions& options);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_EXPOSITION_H_
