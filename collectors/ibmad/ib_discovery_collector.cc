#include "collectors/ibmad/ib_discovery_collector.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "collectors/ibmad/subnet_graph.h"

namespace ringside::collectors {

std::unique_ptr<IbDiscoveryCollector> IbDiscoveryCollector::Create(IbDiscoveryOptions options) {
  absl::StatusOr<std::unique_ptr<LibibmadDrTransport>> t = LibibmadDrTransport::Open(options.port);
  if (!t.ok()) return std::make_unique<IbDiscoveryCollector>(std::move(options), nullptr, t.status());
  return std::make_unique<IbDiscoveryCollector>(std::move(options), *std::move(t));
}

std::unique_ptr<IbDiscoveryCollector> IbDiscoveryCollector::Create(
    IbDiscoveryOptions options, std::shared_ptr<SharedIbmadPort> port) {
  if (port == nullptr) return Create(std::move(options));
  return std::make_unique<IbDiscoveryCollector>(std::move(options),
                                                LibibmadDrTransport::OnPort(std::move(port)));
}

IbDiscoveryCollector::IbDiscoveryCollector(IbDiscoveryOptions options,
                                           std::unique_ptr<DrSmpTransport> transport,
                                           absl::Status availability)
    : options_(std::move(options)),
      transport_(std::move(transport)),
      availability_(std::move(availability)) {
  table_ = std::make_shared<SeriesTable>();
  if (transport_ == nullptr) {
    if (availability_.ok()) availability_ = absl::UnavailableError("no MAD transport");
    return;
  }
  thread_ = std::thread([this] { Run(); });
}

IbDiscoveryCollector::~IbDiscoveryCollector() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  stop_cv_.Notify();
  if (thread_.joinable()) thread_.join();
}

void IbDiscoveryCollector::Run() {
  // Sleeps of the pacing end early when the collector stops.
  DiscoveryOptions d = options_.discovery;
  // The pacing sleeps and the period are on the monotonic clock: a step back of the wall clock
  // must not hold the discovery for the step's length, nor a step forward start passes at once.
  auto stopping = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_; };
  d.sleep = [this, stopping](absl::Duration dur) {
    absl::MutexLock l(&mu_);
    stop_cv_.AwaitWithTimeout(mu_, stopping, dur);
  };
  d.cancelled = [this] {
    absl::MutexLock l(&mu_);
    return stop_;
  };
  absl::Time next = SteadyNow();
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      stop_cv_.AwaitWithTimeout(mu_, stopping, next - SteadyNow());
      if (stop_) return;
    }
    const absl::Time start = SteadyNow();
    DiscoveryStats stats;
    SubnetGraph graph = DiscoverSubnet(*transport_, d, stats);
    auto table = std::make_shared<SeriesTable>();
    if (graph.complete) table->info = GraphInfoRecords(graph);
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
      ++passes_;
      reported_errors_ += stats.errors;
      for (const std::string& m : stats.messages) {
        if (error_messages_.size() < CycleErrors::kMaxMessages) error_messages_.push_back(m);
      }
      if (graph.complete) {
        table_ = std::move(table);
        std::vector<ScanTarget> targets = SwitchScanTargets(graph);
        if (targets_version_ == 0 || ScanTargetsToString(targets) != ScanTargetsToString(switch_targets_)) {
          switch_targets_ = std::move(targets);
          ++targets_version_;
        }
      }
      last_stats_ = std::move(stats);
    }
    next = std::max(start + options_.period, SteadyNow());
  }
}

std::vector<ScanTarget> IbDiscoveryCollector::SwitchTargets(uint64_t* version) const {
  absl::MutexLock l(&mu_);
  *version = targets_version_;
  return switch_targets_;
}

void IbDiscoveryCollector::Collect(absl::Time /*now*/, CollectorSnapshot& out,
                                   CycleErrors& errors) {
  absl::MutexLock l(&mu_);
  out.collector = std::string(name());
  out.table = table_;
  out.values.clear();
  // Failed SMPs of passes that ended since the last cycle.
  for (uint64_t i = 0; i < reported_errors_; ++i) {
    if (i < error_messages_.size()) {
      errors.Add(absl::UnknownError(error_messages_[i]));
    } else {
      ++errors.count;
    }
  }
  reported_errors_ = 0;
  error_messages_.clear();
}

uint64_t IbDiscoveryCollector::passes() const {
  absl::MutexLock l(&mu_);
  return passes_;
}

DiscoveryStats IbDiscoveryCollector::last_stats() const {
  absl::MutexLock l(&mu_);
  return last_stats_;
}

}  // namespace ringside::collectors
