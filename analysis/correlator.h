// Why a rank is slow, and who a fabric fault slows down.
//
// rank → node (the collective records: each names its host) → the node's open fabric incidents
// (link_down, link_flapping, link_degraded, pause_storm, congestion; their entity names the node)
// → the node's leaf switches (the topology: ibnetdiscover output or a node→switch map) → the open
// switch-side incidents (pause_storm, congestion) of other nodes on those leaves.
//
// Attribution: a straggler (entity job, rank, node) or a job_slowdown (entity job: all the job's
// nodes) is caused by the fabric incidents that were open in the same window — opened no later than
// `window` after it and not resolved more than `window` before it opened — on its node (scope
// "node") or, for a switch-side kind, on one of its leaves (scope "leaf") or with a port of its
// node in its spread (scope "spread": a pause storm's "spread/<node>/<port>" evidence, inferred
// when there is no topology). Node before leaf and spread, then
// critical before warning, then the earliest; at most `max_causes`. With none, a straggler's cause
// is chosen by analysis/straggler_cause.h (a GPU incident on its own GPU, host evidence, else the
// host with what was checked), a job_slowdown's is the host itself (kind "host": compute, input
// pipeline, workload), so every straggler says where to look.
// A link fault on another node of the same leaf is not a cause: it slows that node's own ranks,
// which the straggler detector then names.
//
// Blast radius: the ranks seen within `rank_ttl` on the fabric incident's node — and, for a
// switch-side kind, on every node of its leaf and every port it reached (pause_storm's "spread/"
// evidence) — grouped by job.
//
// Time: collective records carry the rank's own clock (kernel stop); incidents the detectors'
// times. Thread-compatible.
#ifndef RINGSIDE_ANALYSIS_CORRELATOR_H_
#define RINGSIDE_ANALYSIS_CORRELATOR_H_

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "analysis/collective_observation.h"
#include "analysis/incidents.h"
#include "analysis/remote_incidents.h"
#include "analysis/straggler_cause.h"
#include "analysis/topology.h"

namespace ringside::analysis {

struct CorrelatorOptions {
  // A fabric incident explains a straggler when their times overlap within this slack: the
  // straggler detector needs tens of collectives, the fabric detectors three samples, so either may
  // be seen first.
  absl::Duration window = absl::Minutes(5);
  // A rank not seen in a collective for this long is no longer running behind a node.
  absl::Duration rank_ttl = absl::Minutes(10);
  size_t max_causes = 3;
};

class Correlator {
 public:
  // `topology` may be null (then only same-node causes are found); it must outlive the correlator.
  explicit Correlator(const Topology* topology = nullptr, CorrelatorOptions options = {});

  void SetTopology(const Topology* topology) { topology_ = topology; }
  // The GPU directory and host signals a straggler's non-fabric cause is looked up in (either may
  // be null); they must outlive the correlator.
  void SetCauseContext(const GpuDirectory* gpus, const HostSignals* host,
                       const GpuDetector* detector = nullptr) {
    gpus_ = gpus;
    host_ = host;
    detector_ = detector;
  }

  // Learns rank → node from one record (the job's global rank when known, else the communicator
  // rank, as the straggler detector names it).
  void ObserveCollective(const CollectiveObservation& obs);
  // Forgets ranks not seen since `now - rank_ttl`.
  void Expire(absl::Time now);

  // The causes of a straggler or job_slowdown among `fabric` (fabric kinds first; the GPU kinds
  // in it are a straggler's next candidates, other kinds are skipped). A fabric
  // incident `remote_shard` maps to a shard name is another shard's (RemoteIncidents): its link
  // names that shard and carries no local id.
  std::vector<CauseLink> CausesOf(
      const Incident& symptom, const std::vector<const Incident*>& fabric,
      const absl::flat_hash_map<const Incident*, std::string>* remote_shard = nullptr) const;
  // The jobs and ranks behind a fabric incident.
  std::vector<AffectedJob> BlastRadius(const Incident& fabric, absl::Time now) const;

  // Applies both to the manager's incidents: causes of every open straggler/job_slowdown, blast
  // radius of every open fabric incident. With `remote` (other shards' incidents), their fabric
  // incidents are candidate causes too, and the jobs their stragglers attribute to one of ours
  // join its blast radius. Returns the first store error.
  absl::Status Correlate(IncidentManager& incidents, absl::Time now,
                         std::vector<IncidentChange>* changes = nullptr,
                         const RemoteIncidents* remote = nullptr) const;

  // "pause_storm on node-17 mlx5_3 prio 3"
  std::string Describe(const Incident& incident) const;

  std::string NodeOf(const std::string& job, int64_t rank) const;
  // Where a rank runs: node, GPU bus id and cgroup from its latest collective record.
  RankPlacement PlacementOf(const std::string& job, int64_t rank) const;
  std::vector<std::string> NodesOf(const std::string& job) const;
  size_t ranks() const { return ranks_; }

  // Keeps `current` when `fresh` names the same causes (kinds, incidents, entities): the numbers
  // in a cause's evidence are as when it was chosen, so a straggler's causes are not rewritten (and
  // re-alerted) at every flush because a share moved.
  static void KeepSameChoice(const std::vector<CauseLink>& current, std::vector<CauseLink>& fresh);

 private:
  struct Rank {
    std::string node;
    absl::Time seen;
    std::string pod;  // "namespace/pod", when its plugin knew it
    std::string gpu_pci_bus_id;
    std::string cgroup;
  };
  using JobRank = std::pair<std::string, int64_t>;
  std::set<std::string> LeavesOf(const Incident& fabric) const;
  // Where a fabric incident is, as a host: its node; for a switch port read by the fabric scan,
  // the host whose HCA is cabled to it ("" for an uplink or a port the topology does not show).
  std::string HostOf(const Incident& fabric) const;
  // Whether it reaches every host of its leaf: a pause storm or congestion, or a switch port
  // with no host of its own (an uplink).
  bool LeafWide(const Incident& fabric) const;
  std::set<std::string> LeavesOfNode(const std::string& node) const;
  void Index(const std::string& node, const JobRank& jr, bool add);

  const Topology* topology_;
  CorrelatorOptions options_;
  const GpuDirectory* gpus_ = nullptr;
  const HostSignals* host_ = nullptr;
  const GpuDetector* detector_ = nullptr;
  absl::flat_hash_map<std::string, absl::flat_hash_map<int64_t, Rank>> jobs_;
  absl::flat_hash_map<std::string, std::set<JobRank>> by_node_;
  absl::flat_hash_map<std::string, std::set<std::string>> by_short_node_;  // short → full names
  size_t ranks_ = 0;
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_CORRELATOR_H_
