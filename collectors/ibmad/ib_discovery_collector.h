// Subnet discovery as an agent collector (`ringside-agent --fabric-discover=PERIOD`): a thread of
// its own runs a discovery pass (subnet_discovery.h) at once and then every `period`, and each
// cycle publishes the graph of the last finished pass as info records ("ib_node", "ib_link";
// see subnet_graph.h). It has no series. The uploader sends info records only when they change,
// so a stable fabric costs the aggregator nothing after the first pass; a link that goes down is
// gone from the records of the next pass.
//
// The pass runs off the sampling thread because a large fabric, paced by the MAD rate limit,
// takes seconds to walk. A pass stopped by max_duration (incomplete) does not replace the last
// complete graph.
#ifndef RINGSIDE_COLLECTORS_IBMAD_IB_DISCOVERY_COLLECTOR_H_
#define RINGSIDE_COLLECTORS_IBMAD_IB_DISCOVERY_COLLECTOR_H_

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectors/common/collector.h"
#include "collectors/common/steady_wait.h"
#include "collectors/ibmad/dr_transport.h"
#include "collectors/ibmad/subnet_discovery.h"

namespace ringside::collectors {

struct IbDiscoveryOptions {
  MadPortOptions port;
  DiscoveryOptions discovery;
  absl::Duration period = absl::Minutes(5);
};

class IbDiscoveryCollector final : public Collector {
 public:
  // Opens the local port; when that fails the collector is unavailable and publishes nothing.
  static std::unique_ptr<IbDiscoveryCollector> Create(IbDiscoveryOptions options);
  // On a port shared with the fabric scan (null: opens its own, as above).
  static std::unique_ptr<IbDiscoveryCollector> Create(IbDiscoveryOptions options,
                                                      std::shared_ptr<SharedIbmadPort> port);
  // With a given transport (tests); null: unavailable with `availability`.
  IbDiscoveryCollector(IbDiscoveryOptions options, std::unique_ptr<DrSmpTransport> transport,
                       absl::Status availability = absl::OkStatus());
  ~IbDiscoveryCollector() override;

  absl::string_view name() const override { return "ibdisc"; }
  void Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) override;
  absl::Status Availability() const override { return availability_; }

  // The switches of the last complete pass as fabric-scan targets (SwitchScanTargets), and a
  // version that changes when they do (0: no complete pass yet). Thread-safe.
  std::vector<ScanTarget> SwitchTargets(uint64_t* version) const;

  // Passes finished (complete or not), and the stats of the last one.
  uint64_t passes() const;
  DiscoveryStats last_stats() const;

 private:
  void Run();

  IbDiscoveryOptions options_;
  std::unique_ptr<DrSmpTransport> transport_;
  absl::Status availability_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  SteadyCondVar stop_cv_;  // wakes the pacing and period waits when stop_ is set
  std::shared_ptr<const SeriesTable> table_ ABSL_GUARDED_BY(mu_);
  uint64_t passes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reported_errors_ ABSL_GUARDED_BY(mu_) = 0;  // failed SMPs not yet told to a cycle
  std::vector<std::string> error_messages_ ABSL_GUARDED_BY(mu_);
  DiscoveryStats last_stats_ ABSL_GUARDED_BY(mu_);
  std::vector<ScanTarget> switch_targets_ ABSL_GUARDED_BY(mu_);
  uint64_t targets_version_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_IB_DISCOVERY_COLLECTOR_H_
