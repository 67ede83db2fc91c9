#include "daemon/aggregator/query/query_api.h"

#include <utility>

#include "daemon/aggregator/metrics/aggregator_metrics.h"
#include "daemon/aggregator/query/incident_queries.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace ringside::daemon {
namespace {

// ringside_aggregator_query_* (listed in AggregatorMetricCatalog() and docs/metrics.md), read
// from the watch hub at scrape time.
class QueryCollectable final : public prometheus::Collectable {
 public:
  explicit QueryCollectable(std::shared_ptr<QueryApi> api) : api_(std::move(api)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out;
    QueryService* service = api_->service();
    if (service == nullptr) return out;
    Add(out, "ringside_aggregator_query_watchers",
        static_cast<double>(service->watch_hub().watchers()));
    Add(out, "ringside_aggregator_query_watchers_cut_off_total",
        static_cast<double>(service->watch_hub().cut_off()));
    return out;
  }

 private:
  static void Add(std::vector<prometheus::MetricFamily>& out, const std::string& name,
                  double value) {
    for (const AggregatorMetricSpec& spec : AggregatorMetricCatalog()) {
      if (spec.name != name) continue;
      prometheus::MetricFamily f;
      f.name = name;
      f.help = std::string(spec.help);
      f.type = spec.type;
      prometheus::ClientMetric m;
      if (f.type == prometheus::MetricType::Counter) {
        m.counter.value = value;
      } else {
        m.gauge.value = value;
      }
      f.metric.push_back(std::move(m));
      out.push_back(std::move(f));
    }
  }

  std::shared_ptr<QueryApi> api_;
};

}  // namespace

std::shared_ptr<QueryApi> InstallQueryApi(AggregatorOptions& options, AnalysisHost* host,
                                          QueryServiceOptions query_options) {
  auto api = std::make_shared<QueryApi>();
  if (query_options.aggregator_version == "dev") query_options.aggregator_version = options.version;
  auto previous = std::move(options.extra_services);
  options.extra_services = [api, host, query_options, previous](IngestCore* core) {
    std::vector<std::shared_ptr<AsyncGrpcService>> services;
    if (previous) services = previous(core);
    api->service_ = std::make_shared<QueryService>(host, core, query_options);
    services.push_back(api->service_);
    return services;
  };
  options.on_shutdown.push_back([api] {
    if (api->service_) api->service_->Shutdown();
  });
  options.http_handlers.emplace_back("/api/v1/incidents", [host](const HttpRequest& request) {
    return IncidentsHttp(host, request);
  });
  options.collectables.push_back(std::make_shared<QueryCollectable>(api));
  return api;
}

}  // namespace ringside::daemon
