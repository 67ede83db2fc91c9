#include "daemon/agent/collective_metrics.h"

#include "daemon/agent/metric_catalog.h"
#include "prometheus/client_metric.h"

namespace ringside::daemon {
namespace {

void Add(prometheus::MetricFamily& f, std::vector<prometheus::ClientMetric::Label> labels,
         double value) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  if (f.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
}

}  // namespace

std::vector<prometheus::MetricFamily> CollectiveStatsToFamilies(
    const CollectiveListenerStats& stats, const std::string& node) {
  prometheus::MetricFamily records = AgentMetricFamily("ringside_agent_collective_records_total");
  prometheus::MetricFamily drops = AgentMetricFamily("ringside_agent_collective_drops_total");
  prometheus::MetricFamily limited = AgentMetricFamily("ringside_agent_collective_rate_limited_records_total");
  for (const auto& [job, j] : stats.jobs) {
    Add(records, {{"node", node}, {"job", job}}, static_cast<double>(j.records));
    Add(drops, {{"node", node}, {"job", job}}, static_cast<double>(j.drops));
    Add(limited, {{"node", node}, {"job", job}}, static_cast<double>(j.rate_limited));
  }
  prometheus::MetricFamily accepted = AgentMetricFamily("ringside_agent_collective_connections_total");
  Add(accepted, {{"node", node}}, static_cast<double>(stats.connections_accepted));
  prometheus::MetricFamily open = AgentMetricFamily("ringside_agent_collective_connections");
  Add(open, {{"node", node}}, static_cast<double>(stats.connections_open));
  prometheus::MetricFamily rejections = AgentMetricFamily("ringside_agent_collective_rejections_total");
  for (const auto& [reason, n] : stats.rejections) {
    Add(rejections, {{"node", node}, {"reason", reason}}, static_cast<double>(n));
  }
  std::vector<prometheus::MetricFamily> out;
  for (auto* f : {&records, &drops, &limited, &accepted, &open, &rejections}) {
    out.push_back(std::move(*f));
  }
  return out;
}

}  // namespace ringside::daemon
