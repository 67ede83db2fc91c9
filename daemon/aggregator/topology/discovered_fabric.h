// The InfiniBand fabric as the agents' subnet discovery streams it (`ringside-agent
// --fabric-discover`, docs/fabric-scan.md): an ingest observer that takes each node's "ib_node" /
// "ib_link" info records, keeps the latest graph of every discovering node, merges them, builds
// the same analysis::Topology an ibnetdiscover file gives (TopologyFromGraph), and logs what
// changed in the merged graph (links down or new, nodes gone or new) and whose report brought it.
//
// The merge. The records carry no subnet id (a discoverer walks the one subnet of its CA port),
// so graphs are kept per reporting node, the latest received of each. They are merged node by
// node: the most recently *received* graph that contains a node is authoritative for that node and
// for every link at it (a discoverer sees all the links of every node it reaches). So
//  - graphs with no GUID in common (separate rail planes, one subnet each) are unioned;
//  - graphs of the same subnet: the newest wins; a link that went down, reported gone by the
//    discoverer that reported last, is not kept alive by an older graph of another discoverer
//    (both its ends belong to the newer graph, which lacks it);
//  - a partial graph (a discoverer behind a down cable sees only itself) decides only the nodes it
//    contains: it cuts its own cable and erases nothing else another discoverer sees.
// A link is in the merged graph when the graph authoritative for both of its ends has it.
//
// A reporter stops counting when it has been silent (no sample batch, no info set carrying its
// graph) for `stale_after` (15 minutes by default: many sampling intervals, three periods of
// `--fabric-discover=5m`), so a decommissioned discoverer's graph does not linger; an info set of
// that node without ib_* records (discovery turned off, or a restart before the first complete
// pass) no longer refreshes the graph, which then lasts `stale_after` from that set. The observer
// does not see sessions end (IngestObserver has no such callback), hence the silence bound.
//
// The aggregator's main.cc keeps one to log the changes; AnalysisHost keeps its own (silent) one
// and gives the detectors current(). Thread-safe; OnInfo runs on the ingest threads and only
// parses when a node sends ib_* records (info records are sent only when they change, and in a
// session's first message); OnSamples only marks a reporter alive and, at most every few seconds,
// drops the stale ones.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_TOPOLOGY_DISCOVERED_FABRIC_H_
#define RINGSIDE_DAEMON_AGGREGATOR_TOPOLOGY_DISCOVERED_FABRIC_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "analysis/topology.h"
#include "collectors/ibmad/subnet_discovery.h"
#include "daemon/aggregator/ingest/ingest_core.h"

namespace ringside::daemon {

struct DiscoveredFabricOptions {
  absl::Duration stale_after = absl::Minutes(15);
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

class DiscoveredFabric final : public IngestObserver {
 public:
  explicit DiscoveredFabric(std::function<void(const std::string&)> log,
                            DiscoveredFabricOptions options = {});

  void OnInfo(absl::string_view node, const v1::SeriesDefs& defs) override;
  // Keeps a reporter alive; drops the stale ones (checked at most every kExpireCheck).
  void OnSamples(absl::string_view node,
                 absl::Span<const analysis::ObservedSample> samples) override;
  // Drops the graphs of reporters silent for stale_after now; true when the merged graph changed.
  bool Expire();

  // The topology of the merged graph (null before any graph, and once every reporter is stale).
  std::shared_ptr<const analysis::Topology> current() const;
  // The reporters whose graphs count, sorted, ", "-joined; and as a list.
  std::string reporter() const;
  std::vector<std::string> reporters() const;
  // Changes of the merged graph so far (the first graph included; a report equal to what is
  // merged already is not one).
  uint64_t updates() const { return updates_.load(std::memory_order_acquire); }

 private:
  struct Reporter {
    collectors::SubnetGraph graph;
    uint64_t received = 0;               // order of arrival: the larger, the newer
    std::atomic<int64_t> seen_ns{0};     // last sign of life while it holds the graph
    std::atomic<bool> holds{true};       // its latest info set carried the graph
  };
  static constexpr absl::Duration kExpireCheck = absl::Seconds(5);

  // Rebuilds merged_ from reporters_ (the merge rule above) and, when it changed, topology_ and
  // updates_; returns the log lines of the change, each starting with `prefix`.
  std::vector<std::string> Remerge(const std::string& prefix) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::function<void(const std::string&)> log_;
  DiscoveredFabricOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Reporter>, std::less<>> reporters_ ABSL_GUARDED_BY(mu_);
  uint64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  collectors::SubnetGraph merged_ ABSL_GUARDED_BY(mu_);
  std::string merged_text_ ABSL_GUARDED_BY(mu_);  // its ibnetdiscover text: what "changed" means
  std::shared_ptr<const analysis::Topology> topology_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> updates_{0};
  std::atomic<int64_t> next_check_ns_{0};
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_TOPOLOGY_DISCOVERED_FABRIC_H_
