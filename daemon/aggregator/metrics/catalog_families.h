// The metric families of one scrape, built from a catalog of specs (name, help, type): values are
// added by family name, a name not in the catalog is ignored (the catalog tests catch that bug),
// and Take() returns the non-empty families in catalog order. Used by the aggregator's ingest
// metrics (aggregator_metrics.cc) and its analysis metrics (analysis_metrics.cc).
#ifndef RINGSIDE_DAEMON_AGGREGATOR_METRICS_CATALOG_FAMILIES_H_
#define RINGSIDE_DAEMON_AGGREGATOR_METRICS_CATALOG_FAMILIES_H_

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_family.h"

namespace ringside::daemon {

class CatalogFamilies {
 public:
  // `specs`: any range of structs with `name`, `help` (string views) and `type`; the names must
  // outlive this object (the catalogs are static).
  template <typename Specs>
  explicit CatalogFamilies(const Specs& specs) {
    for (const auto& spec : specs) {
      index_[spec.name] = families_.size();
      prometheus::MetricFamily f;
      f.name = std::string(spec.name);
      f.help = std::string(spec.help);
      f.type = spec.type;
      families_.push_back(std::move(f));
    }
  }

  // A counter or gauge value, by the family's type.
  void Add(absl::string_view name, std::vector<prometheus::ClientMetric::Label> labels,
           double value) {
    prometheus::MetricFamily* f = Find(name);
    if (f == nullptr) return;
    prometheus::ClientMetric m;
    m.label = std::move(labels);
    if (f->type == prometheus::MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    f->metric.push_back(std::move(m));
  }

  // A metric built by the caller (histograms).
  void AddMetric(absl::string_view name, prometheus::ClientMetric m) {
    if (prometheus::MetricFamily* f = Find(name)) f->metric.push_back(std::move(m));
  }

  std::vector<prometheus::MetricFamily> Take() {
    std::vector<prometheus::MetricFamily> out;
    for (prometheus::MetricFamily& f : families_) {
      if (!f.metric.empty()) out.push_back(std::move(f));
    }
    return out;
  }

 private:
  prometheus::MetricFamily* Find(absl::string_view name) {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &families_[it->second];
  }

  std::map<absl::string_view, size_t> index_;
  std::vector<prometheus::MetricFamily> families_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_METRICS_CATALOG_FAMILIES_H_
