// The analysis the aggregator hosts, in one object: the fabric detectors, the straggler detector,
// the incident lifecycle and the correlator, wired together. Pure logic; the caller's clock.
//
//   FabricAnalysis a(options, store, topology);   // store: SqliteIncidentStore under --state-dir
//   a.Start(now);                                 // open incidents back, detectors take them over
//   a.MapNetdev(node, "eth2", "mlx5_2", "1");     // from the agent's netdev info records
//   a.MapGpu(node, "3", "00000000:19:00.0");      // from the agent's gpu info records
//   per SampleBatch:  a.OnCounter(step) / a.OnState(sample) for each series (RouteOf once per
//                     SeriesDef tells which series matter; the others can be skipped)
//   per LinkEvents:   a.OnEvent(event)
//   per Collective:   a.OnCollective(observation)
//   after a batch that left findings (pending_findings() > 0):  a.ApplyFindings(now, &changes)
//   every second or so:  a.Flush(now, &changes)
//
// ApplyFindings turns the findings gathered so far into incidents at once and correlates only the
// incidents that changed (and the other side of what changed: the open stragglers and slowdowns
// a fabric incident may cause, the blast radius of the open fabric incidents when a straggler or
// slowdown came): the cheap path an observation that completes a finding takes, so an incident
// opens (or resolves) as soon as its evidence is in, not at the next flush. Flush does that too,
// and lets time pass (flapping quiet, restoration, stale ports, restored incidents nobody
// confirmed) and correlates every open incident. `changes` lists every incident opened, updated
// (evidence, causes, blast radius) or resolved — what alerts and WatchIncidents are made of.
// Thread-compatible: one analysis thread.
#ifndef RINGSIDE_ANALYSIS_FABRIC_ANALYSIS_H_
#define RINGSIDE_ANALYSIS_FABRIC_ANALYSIS_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "analysis/collective_observation.h"
#include "analysis/congestion_detector.h"
#include "analysis/correlator.h"
#include "analysis/fabric_inputs.h"
#include "analysis/fabric_views.h"
#include "analysis/gpu_detector.h"
#include "analysis/host_signals.h"
#include "analysis/incidents.h"
#include "analysis/link_detector.h"
#include "analysis/pause_storm_detector.h"
#include "analysis/remote_incidents.h"
#include "analysis/straggler_detector.h"
#include "analysis/topology.h"

namespace ringside::analysis {

struct FabricAnalysisOptions {
  LinkOptions link;
  PauseStormOptions pause_storm;
  CongestionOptions congestion;
  StragglerOptions straggler;
  CorrelatorOptions correlator;
  IncidentOptions incidents;
  GpuOptions gpu;
  HostOptions host;
};

// Which detector a series feeds (decide once per series definition).
enum class SeriesRoute { kNone, kLink, kPauseStorm, kCongestion, kGpu, kHost };
SeriesRoute RouteOf(absl::string_view source, absl::string_view counter);

// Everything about a series the detectors can decide from its definition alone: which detector it
// feeds, that detector's reading of its counter (CounterStep::prepared), and a number for its port
// (source, device, port) shared by every node. A caller that keeps one per series (the aggregator
// keeps one per series identity) fills `prepared` and `port_token` of each step from it, so a
// step costs no name parsing and, in a run of one port's series, no port lookup.
struct SeriesBinding {
  SeriesRoute route = SeriesRoute::kNone;
  int32_t prepared = -1;
  uint32_t port = 0;  // 0: not numbered (too many distinct ports); steps work from the names
};
// CounterStep::port_token / StateSample::port_token for a series of node number `node` (a
// nonzero number the caller gives each node name, stable for the analysis' lifetime).
inline uint64_t PortToken(uint32_t node, const SeriesBinding& b) {
  return node == 0 || b.port == 0 ? 0 : (uint64_t{node} << 32) | b.port;
}

class FabricAnalysis {
 public:
  // `store` may be null (nothing persisted); `topology` may be null. Both must outlive it.
  FabricAnalysis(FabricAnalysisOptions options, IncidentStore* store,
                 const Topology* topology = nullptr);

  // Loads the open incidents and hands each to the detector that raises its kind.
  absl::Status Start(absl::Time now);
  // A reloaded --topology.
  void SetTopology(const Topology* topology);
  void MapNetdev(absl::string_view node, absl::string_view netdev, absl::string_view device,
                 absl::string_view port);
  // NVML index → PCI bus id (any spelling) of a node's GPU: the gpu info record's pci_bus_id.
  void MapGpu(absl::string_view node, absl::string_view index, absl::string_view pci_bus_id) {
    gpu_directory_.Map(node, index, pci_bus_id);
  }
  const GpuDirectory& gpu_directory() const { return gpu_directory_; }
  const HostSignals& host_signals() const { return host_; }

  // Binds a series once (see SeriesBinding).
  SeriesBinding Bind(absl::string_view source, absl::string_view device, absl::string_view port,
                     absl::string_view counter, int32_t priority);

  void OnCounter(const CounterStep& step);
  void OnCounter(const CounterStep& step, SeriesRoute route);  // route known: no lookup
  void OnState(const StateSample& sample);
  void OnEvent(const LinkEvent& event);
  void OnCollective(const CollectiveObservation& obs);
  // Another shard's incidents (remote_incidents.h): a watch's snapshot, then each change. The
  // next Flush correlates with them.
  void ReplaceRemote(const std::string& shard, const std::vector<Incident>& incidents) {
    remote_.Replace(shard, incidents);
  }
  void ApplyRemote(const std::string& shard, const Incident& incident) {
    remote_.Apply(shard, incident);
  }
  const RemoteIncidents& remote() const { return remote_; }

  absl::Status Flush(absl::Time now, std::vector<IncidentChange>* changes = nullptr);
  // The pending findings only, without letting time pass (see above). A no-op without findings.
  absl::Status ApplyFindings(absl::Time now, std::vector<IncidentChange>* changes = nullptr);

  IncidentManager& incidents() { return incidents_; }
  const IncidentManager& incidents() const { return incidents_; }
  const Correlator& correlator() const { return correlator_; }
  size_t pending_findings() const { return findings_.size(); }

  // Live views (analysis/fabric_views.h): every link seen, as of `now`; every judged rank of `job`
  // (empty: every job). Unordered.
  std::vector<LinkView> Links(absl::Time now) const;
  // Every link seen, as of `now`, shown to `fn` without a copy (LinkDetector::VisitLinks).
  void VisitLinks(absl::Time now, absl::FunctionRef<void(const LinkRef&)> fn) const;
  // The view of a link VisitLinks showed, while the analysis is unchanged since (LinkRef::record).
  LinkView LinkViewOf(const void* record, absl::Time now) const;
  std::vector<RankView> Stragglers(absl::string_view job) const;

 private:
  FabricAnalysisOptions options_;
  PortDirectory ports_;
  LinkDetector links_;
  PauseStormDetector pause_storms_;
  CongestionDetector congestion_;
  StragglerDetector stragglers_;
  GpuDirectory gpu_directory_;
  GpuDetector gpus_;
  HostSignals host_;
  Correlator correlator_;
  IncidentManager incidents_;
  RemoteIncidents remote_;
  std::vector<Finding> findings_;
  // Causes and blast radius of the incidents among `changed`, as Correlator::Correlate does for
  // all: also the causes of every open straggler and job_slowdown when a fabric incident is among
  // them, and the blast radius of every open fabric incident when a straggler or slowdown is.
  absl::Status CorrelateChanged(const std::vector<IncidentChange>& changed, absl::Time now,
                                std::vector<IncidentChange>* changes);
  // Bind's port numbers: source \x1f device \x1f port → number (from 1), up to kMaxPortNumbers.
  static constexpr size_t kMaxPortNumbers = size_t{1} << 22;
  absl::flat_hash_map<std::string, uint32_t> port_numbers_;
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_FABRIC_ANALYSIS_H_
