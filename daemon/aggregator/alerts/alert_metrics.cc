#include "daemon/aggregator/alerts/alert_metrics.h"

#include <map>
#include <string>

#include "daemon/aggregator/metrics/aggregator_metrics.h"

namespace ringside::daemon {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

class Out {
 public:
  void Add(const std::string& name, std::vector<ClientMetric::Label> labels, double value) {
    auto it = index_.find(name);
    if (it == index_.end()) {
      const AggregatorMetricSpec* spec = nullptr;
      for (const AggregatorMetricSpec& s : AggregatorMetricCatalog()) {
        if (s.name == name) spec = &s;
      }
      if (spec == nullptr) return;  // not in the catalog: caught by the test
      MetricFamily f;
      f.name = name;
      f.help = std::string(spec->help);
      f.type = spec->type;
      it = index_.emplace(name, families_.size()).first;
      families_.push_back(std::move(f));
    }
    MetricFamily& f = families_[it->second];
    ClientMetric m;
    m.label = std::move(labels);
    if (f.type == MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    f.metric.push_back(std::move(m));
  }
  std::vector<MetricFamily> Take() { return std::move(families_); }

 private:
  std::map<std::string, size_t> index_;
  std::vector<MetricFamily> families_;
};

double Load(const std::atomic<uint64_t>& a) {
  return static_cast<double>(a.load(std::memory_order_relaxed));
}

}  // namespace

std::vector<MetricFamily> AlertMetrics::Collect() const {
  Out out;
  for (const std::unique_ptr<AlertSender>& s : *senders_) {
    const SenderStats& st = s->stats();
    const std::string& type = s->options().type;
    const std::string& name = s->options().name;
    auto labels = [&](std::vector<ClientMetric::Label> extra = {}) {
      std::vector<ClientMetric::Label> l = {{"receiver", name}, {"type", type}};
      for (auto& e : extra) l.push_back(std::move(e));
      return l;
    };
    out.Add("ringside_aggregator_alert_deliveries_total", labels({{"result", "ok"}}),
            Load(st.delivered));
    out.Add("ringside_aggregator_alert_deliveries_total", labels({{"result", "failed"}}),
            Load(st.failed));
    out.Add("ringside_aggregator_alert_retries_total", labels(), Load(st.retried));
    out.Add("ringside_aggregator_alert_dropped_total", labels({{"reason", "queue_full"}}),
            Load(st.dropped_queue_full));
    out.Add("ringside_aggregator_alert_dropped_total", labels({{"reason", "expired"}}),
            Load(st.dropped_expired));
    out.Add("ringside_aggregator_alert_dropped_total", labels({{"reason", "rejected"}}),
            Load(st.dropped_rejected));
    out.Add("ringside_aggregator_alert_duplicates_skipped_total", labels(),
            Load(st.duplicates_skipped));
    out.Add("ringside_aggregator_alert_queue_length", labels(),
            static_cast<double>(st.queue_length.load(std::memory_order_relaxed)));
    const int64_t last = st.last_delivery_unix_ms.load(std::memory_order_relaxed);
    if (last > 0) {
      out.Add("ringside_aggregator_alert_last_delivery_timestamp_seconds", labels(),
              static_cast<double>(last) / 1000.0);
    }
  }
  return out.Take();
}

}  // namespace ringside::daemon
