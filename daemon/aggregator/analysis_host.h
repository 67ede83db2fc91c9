// Runs the detectors inside the aggregator: an IngestObserver that feeds every accepted counter
// step, state sample, collective record and link event to analysis::FabricAnalysis, logs each
// incident opened, updated or resolved, and keeps the incidents in SQLite (incidents.db) under the
// state dir (memory only without one).
//
// Event-driven: a batch (samples, link events, collectives) that completes a finding turns it into
// an incident before OnSamples/OnLinkEvents/OnCollectives returns (FabricAnalysis::ApplyFindings:
// the findings and the incidents they touch, nothing else), and the change is handed to the
// listeners (store already written; Query API watchers, metrics, alerts) by the flush thread at
// once. The flush thread's tick (flush_interval, 1 s) is only for what time alone changes:
// resolutions after a quiet period, stale ports, restored incidents nobody confirmed, and the
// correlation of every open incident.
//
// Order: changes are queued under the analysis lock, in the order they were made (whichever
// ingest thread made them), and delivered from that queue in that order, one batch at a time
// (deliver_mu_), outside the analysis lock.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_ANALYSIS_HOST_H_
#define RINGSIDE_DAEMON_AGGREGATOR_ANALYSIS_HOST_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "analysis/fabric_analysis.h"
#include "analysis/incident_store.h"
#include "analysis/topology.h"
#include "analysis/topology_events.h"
#include "analysis/topology_merge.h"
#include "daemon/aggregator/ingest/ingest_core.h"
#include "daemon/aggregator/topology/discovered_fabric.h"
#include "daemon/aggregator/topology/lldp_topology.h"
#include "daemon/common/steady_time.h"

namespace ringside::daemon {

struct AnalysisHostOptions {
  analysis::FabricAnalysisOptions analysis;  // every detector threshold (aggregator flags)
  std::string state_dir;      // incidents.db lives here; empty: memory only
  std::string topology_file;  // ibnetdiscover output or "node switch" lines; empty: none
  absl::Duration flush_interval = absl::Seconds(1);
  // Leave out the steps a detector has said change nothing (analysis::RecordHint::quiet): a
  // series idle on an idle port goes through every few seconds instead of at every sample.
  bool skip_quiet_steps = true;
  std::function<absl::Time()> now = absl::Now;
  std::function<void(const std::string&)> log;
  // Incidents open on the other replicas of this shard, taken over at start (peer_incidents.h;
  // needs state_dir).
  std::vector<analysis::Incident> adopt;
};

// The topology the detectors use now (issue #16: the --topology file merged with the IB subnet
// discovery, else LLDP; analysis/topology_merge.h) and how it was made.
struct TopologyState {
  std::shared_ptr<const analysis::Topology> topology;  // null: none
  std::string source = "none";  // "file", "ib-discovery", "lldp" or "none" (topology_source())
  std::string discovery;        // what the fabric tells: "ib-discovery", "lldp" or ""
  std::vector<analysis::TopologyDisagreement> disagreements;  // of the file with the discovery
  std::shared_ptr<const std::vector<LldpPortPeer>> lldp_peers;  // every netdev's LLDP neighbour
  uint64_t events = 0;  // topology events ever recorded
};

// The switch end of a link the topology knows (LinkView's source, device, port), if any: an
// InfiniBand/RoCE port by device and port, a netdev by its LLDP neighbour, else the host's leaf
// when the topology knows the host only as a whole (a `node switch` line).
std::optional<analysis::LeafPort> PeerOfLink(const TopologyState& state, absl::string_view node,
                                             absl::string_view source, absl::string_view device,
                                             absl::string_view port);

class AnalysisHost final : public IngestObserver {
 public:
  static absl::StatusOr<std::unique_ptr<AnalysisHost>> Start(AnalysisHostOptions options);
  ~AnalysisHost() override;

  void OnSamples(absl::string_view node,
                 absl::Span<const analysis::ObservedSample> samples) override;
  void OnCollectives(absl::string_view node, uint64_t agent_epoch, uint64_t seq,
                     absl::Time received, const v1::CollectiveBatch& batch) override;
  void OnLinkEvents(absl::string_view node, uint64_t agent_epoch, uint64_t seq,
                    absl::Time received, const v1::LinkEvents& events) override;
  // The RoCE netdev ↔ RDMA port map from the agents' info records; and the topology the fabric
  // tells: the agents' InfiniBand subnet discovery (ib_node / ib_link records) when there is one,
  // else their LLDP neighbours (lldp records), merged with the --topology file (Remerge).
  void OnInfo(absl::string_view node, const v1::SeriesDefs& defs) override;
  // The node moved to another shard: its LLDP neighbours leave this shard's topology (with no
  // `gone` event: its cables did not go); it comes back with its next complete info set.
  void OnCountersElsewhere(absl::string_view node) override;
  // Where the detectors' topology comes from now: "file", "ib-discovery", "lldp" or "none".
  // With a file, the discovery still fills in the hosts the file does not name and is compared
  // with it (TopologyState::disagreements; a log line when they change). A discovered port that
  // changes (moved, port_changed, gone, new) is logged and kept as an event.
  std::string topology_source() const;
  TopologyState topology_state() const;
  // The latest `limit` topology events (0: every one kept, at most 1,000), oldest first.
  std::vector<analysis::TopologyEvent> topology_events(size_t limit = 0) const;
  // Another shard's incidents (shard_watch.h, cross-shard attribution): a watch's snapshot, then
  // each change. The next flush correlates with them.
  void ReplaceRemote(const std::string& shard, const std::vector<analysis::Incident>& incidents);
  void ApplyRemote(const std::string& shard, const analysis::Incident& incident);

  // Runs the detectors' clocks to `now` and reports what changed (the flush thread calls it on
  // its tick; tests call it). Returns after every change made so far reached the listeners.
  void Flush(absl::Time now);
  // Hands the queued changes to the listeners, in order (the flush thread does this as soon as
  // something is queued). Returns after every change queued so far reached them.
  void Deliver() ABSL_LOCKS_EXCLUDED(deliver_mu_, queue_mu_);
  // The incidents open now.
  std::vector<analysis::Incident> OpenIncidents() const;

  // Called on the flush thread (or a thread in Flush/Deliver), outside the analysis lock, with
  // every batch of incident changes (opened, updated, resolved) in order, one call at a time. Alerts and WatchIncidents are made of these. A listener
  // must not block for long (queue and return); it may call the const accessors above.
  using ChangeListener = std::function<void(const std::vector<analysis::IncidentChange>&)>;
  void AddListener(ChangeListener listener) ABSL_LOCKS_EXCLUDED(listeners_mu_);

  // Runs `fn` with the analysis under its lock (read-only views for the Query API and /metrics).
  void WithAnalysis(const std::function<void(const analysis::FabricAnalysis&)>& fn) const;
  // The incident store (may be null: memory only). Thread-safe.
  analysis::IncidentStore* store() const { return store_.get(); }

  // How the flushes went, for /metrics (ringside_analysis_*). Thread-safe.
  struct FlushStats {
    uint64_t flushes = 0;     // ticks (Flush)
    uint64_t applies = 0;     // batches whose findings were applied at once (ApplyFindings)
    uint64_t errors = 0;      // flushes and applies whose store writes failed
    double last_seconds = 0;  // wall time of the latest flush (lock held)
    double total_seconds = 0;
  };
  FlushStats flush_stats() const ABSL_LOCKS_EXCLUDED(stats_mu_);

 private:
  explicit AnalysisHost(AnalysisHostOptions options) : options_(std::move(options)) {}
  // After a batch: applies the findings it completed and queues the changes (the event path).
  void ApplyPending() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues one batch of changes (under mu_, so the queue holds them in the order they were made).
  void Queue(std::vector<analysis::IncidentChange> changes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
      ABSL_LOCKS_EXCLUDED(queue_mu_);
  void RunFlushThread() ABSL_LOCKS_EXCLUDED(queue_mu_);
  // After a round of incident store writes (an application of findings, a flush) that left
  // `unsaved` incidents unwritten: logs the first failure, then at most one line a minute while
  // they go on, and the recovery.
  void ReportStore(const absl::Status& s, size_t unsaved) ABSL_LOCKS_EXCLUDED(stats_mu_);

  AnalysisHostOptions options_;
  // Rebuilds the merged topology from the file and the current discovery, records the events
  // and disagreements, and hands the result to the detectors.
  // `reporter_moved_away`: the change is `reporter` leaving for another shard, not an event.
  void Remerge(absl::string_view reporter, bool reporter_moved_away = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The LLDP part of OnInfo: `defs` is the node's complete info set (empty when it moved away).
  void ApplyLldp(absl::string_view node, const v1::SeriesDefs& defs, bool moved_away)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes discovered_'s new merged graph (or its end) and remerges.
  void TakeDiscovered(absl::string_view reporter) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<analysis::IncidentStore> store_;
  std::shared_ptr<const analysis::Topology> file_topology_;  // --topology; null: none
  mutable absl::Mutex mu_;
  std::unique_ptr<analysis::FabricAnalysis> analysis_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex listeners_mu_;
  std::vector<ChangeListener> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  mutable absl::Mutex stats_mu_;
  FlushStats flush_stats_ ABSL_GUARDED_BY(stats_mu_);
  bool store_failing_ ABSL_GUARDED_BY(stats_mu_) = false;
  absl::Time store_logged_ ABSL_GUARDED_BY(stats_mu_) = absl::InfinitePast();
  // Per series identity (ObservedSample::identity), its binding: decided once, then a step
  // costs an index. Node numbers for the port tokens. Both under mu_.
  struct CachedBinding {
    uint32_t generation = 0;  // 0: empty
    analysis::SeriesBinding binding;
  };
  const analysis::SeriesBinding& BindingOf(const analysis::ObservedSample& s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Per node and series slot (ObservedSample::slot), the detector record the series' last step
  // went to (analysis::RecordHint): the next step skips the port lookup, and OnSamples prefetches
  // the record a few samples ahead. Kept while the node's samples carry the same table layout
  // (NodeSeries::layout: each slot names the same series), dropped whole when it changes: 16
  // bytes a series (it was 24 with the identity and generation checked slot by slot, 32 with the
  // time of the last step delivered).
  // A quiet series' normal Δ 0 steps are left out (RecordHint::quiet), but one still goes through
  // each time the series' samples cross a quiet_heartbeat_ boundary (CrossesHeartbeat), so that
  // its port is seen at least once a beat and a sampling interval. Nothing is kept per slot for
  // it.
  struct NodeHints {
    uint64_t layout = 0;  // of the samples the hints were made from
    std::vector<analysis::RecordHint> slots;
  };
  static_assert(sizeof(analysis::RecordHint) == 16);
  // Whether the step from s.prev_time_ns to s.time_ns crosses a boundary of the beat (at the
  // series' own phase); true without a beat or a previous time.
  bool CrossesHeartbeat(const analysis::ObservedSample& s) const;
  analysis::RecordHint* HintOf(NodeHints& hints, const analysis::ObservedSample& s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint32_t NodeNumber(absl::string_view node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<CachedBinding> bindings_ ABSL_GUARDED_BY(mu_);
  analysis::SeriesBinding scratch_binding_ ABSL_GUARDED_BY(mu_);
  std::vector<NodeHints> hints_ ABSL_GUARDED_BY(mu_);  // by node number
  int64_t quiet_heartbeat_ns_ = 0;  // 0: every step is delivered
  absl::flat_hash_map<std::string, uint32_t> node_numbers_ ABSL_GUARDED_BY(mu_);
  // The discovered topology: IB discovery wins over LLDP; merged with the file (Remerge).
  // main.cc's logs the changes; on the detectors' clock (options_ is initialised before it).
  DiscoveredFabric discovered_{[](const std::string&) {}, {.now = options_.now}};
  uint64_t discovered_seen_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const analysis::Topology> discovered_topology_ ABSL_GUARDED_BY(mu_);
  LldpTopologyFeed lldp_feed_ ABSL_GUARDED_BY(mu_);
  // LLDP port by port (device, port, switch port name): what is merged and diffed.
  std::shared_ptr<const analysis::Topology> lldp_ports_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const std::vector<LldpPortPeer>> lldp_peers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> lldp_nodes_ ABSL_GUARDED_BY(mu_);  // that report a neighbour
  // The detectors' topology (kept alive here while they use it), the discovery it was last
  // diffed against, and what came of the merge.
  std::shared_ptr<const analysis::Topology> merged_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const analysis::Topology> last_discovery_ ABSL_GUARDED_BY(mu_);
  std::string last_discovery_source_ ABSL_GUARDED_BY(mu_);
  std::vector<analysis::TopologyDisagreement> disagreements_ ABSL_GUARDED_BY(mu_);
  analysis::TopologyEventLog topology_events_ ABSL_GUARDED_BY(mu_){1000};

  // Changes waiting for the listeners, oldest first. Lock order: mu_, then queue_mu_;
  // deliver_mu_ is taken before queue_mu_ and never with mu_ held.
  absl::Mutex queue_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::deque<std::vector<analysis::IncidentChange>> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stop_ ABSL_GUARDED_BY(queue_mu_) = false;
  // Wakes the flush thread (a new entry in queue_, stop_); its tick timeout is monotonic.
  SteadyCondVar queue_cv_;
  absl::Mutex deliver_mu_ ABSL_ACQUIRED_BEFORE(queue_mu_);  // one delivery at a time
  std::thread flusher_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_ANALYSIS_HOST_H_
