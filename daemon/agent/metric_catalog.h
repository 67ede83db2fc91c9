// Every metric name the agent exports, in one table: which series feeds it, its Prometheus type,
// the scale to base units, and its help text. docs/metrics.md lists the same names; a test checks
// the two against each other.
#ifndef RINGSIDE_DAEMON_AGENT_METRIC_CATALOG_H_
#define RINGSIDE_DAEMON_AGENT_METRIC_CATALOG_H_

#include <span>
#include "absl/strings/string_view.h"
#include "prometheus/metric_family.h"

namespace ringside::daemon {

enum class MetricType { kCounter, kGauge };

struct MetricSpec {
  absl::string_view source;   // SeriesDef::source; "self" and "info" for the agent's own families
  absl::string_view counter;  // SeriesDef::counter; "*": any other counter of the source, with a
                             // `counter` label
  absl::string_view name;
  MetricType type;
  double scale;              // raw value × scale = exported value (4-byte words → bytes: 4)
  absl::string_view help;
};

std::span<const MetricSpec> MetricCatalog();

// The spec for a series: the exact (source, counter) entry, else the source's "*" entry, else
// nullptr.
const MetricSpec* FindMetricSpec(absl::string_view source, absl::string_view counter);

// A family the agent emits that is not fed by one series (info and self-metrics), by name.
const MetricSpec& AgentFamily(absl::string_view name);
// An empty family (name, help, type) for AgentFamily(name), to fill with metrics.
prometheus::MetricFamily AgentMetricFamily(absl::string_view name);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_METRIC_CATALOG_H_
