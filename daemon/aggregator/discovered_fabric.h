// The InfiniBand fabric as the agents' subnet discovery streams it (`ringside-agent
// --fabric-discover`, docs/fabric-scan.md): an ingest observer that takes each node's "ib_node" /
// "ib_link" info records, keeps the graph of the agent that reported last, builds the same
// analysis::Topology an ibnetdiscover file gives (TopologyFromInfoRecords), and logs what changed
// between two graphs (links down or new, nodes gone or new).
//
// The aggregator's main.cc keeps one to log the changes; AnalysisHost keeps its own (silent) one
// and, without a --topology file, gives the detectors current(). Thread-safe; OnInfo runs on the ingest threads and only
// parses when a node sends ib_* records (info records are sent only when they change).
#ifndef RINGSIDE_DAEMON_AGGREGATOR_DISCOVERED_FABRIC_H_
#define RINGSIDE_DAEMON_AGGREGATOR_DISCOVERED_FABRIC_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "analysis/topology.h"
#include "collectors/ibmad/subnet_discovery.h"
#include "daemon/aggregator/ingest_core.h"

namespace ringside::daemon {

class DiscoveredFabric final : public IngestObserver {
 public:
  explicit DiscoveredFabric(std::function<void(const std::string&)> log) : log_(std::move(log)) {}

  void OnInfo(absl::string_view node, const v1::SeriesDefs& defs) override;

  // The topology of the last graph received (null before any), and who sent it.
  std::shared_ptr<const analysis::Topology> current() const;
  std::string reporter() const;
  uint64_t updates() const;  // graphs taken in

 private:
  std::function<void(const std::string&)> log_;
  mutable absl::Mutex mu_;
  collectors::SubnetGraph graph_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const analysis::Topology> topology_ ABSL_GUARDED_BY(mu_);
  std::string reporter_ ABSL_GUARDED_BY(mu_);
  uint64_t updates_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_DISCOVERED_FABRIC_H_
