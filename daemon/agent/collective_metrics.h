// /metrics families of the collective-record listener: records and plugin-reported drops per job,
// rate-limited records, connections and rejections by reason. A Collectable of its own, so the
// agent registers it beside SnapshotCollectable; Collect() copies the listener's counters under its
// lock and does no I/O.
#ifndef RINGSIDE_DAEMON_AGENT_COLLECTIVE_METRICS_H_
#define RINGSIDE_DAEMON_AGENT_COLLECTIVE_METRICS_H_

#include <string>
#include <vector>

#include "daemon/agent/collective_listener.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace ringside::daemon {

// ringside_agent_collective_records_total{node,job},
// ringside_agent_collective_drops_total{node,job},
// ringside_agent_collective_rate_limited_records_total{node,job},
// ringside_agent_collective_connections_total{node}, ringside_agent_collective_connections{node},
// ringside_agent_collective_rejections_total{node,reason}.
std::vector<prometheus::MetricFamily> CollectiveStatsToFamilies(
    const CollectiveListenerStats& stats, const std::string& node);

class CollectiveListenerCollectable final : public prometheus::Collectable {
 public:
  CollectiveListenerCollectable(const CollectiveListener* listener, std::string node)
      : listener_(listener), node_(std::move(node)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    return CollectiveStatsToFamilies(listener_->Stats(), node_);
  }

 private:
  const CollectiveListener* listener_;
  std::string node_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_COLLECTIVE_METRICS_H_
