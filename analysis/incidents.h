// Incidents: what the detectors' findings become. An incident has an id (never reused), a kind, a
// severity, an entity, opened/updated/resolved times, evidence (the counter deltas and scores that
// raised it), links to its causes (a straggler → the pause storm on its node) and, for a fabric
// incident, the jobs and ranks that run behind it.
//
// Findings map to incidents by FindingKey (kind + entity): an active finding opens an incident or
// updates the open one with that key; an inactive finding resolves it. A condition that comes back
// after its incident was resolved opens a new incident with a new id.
//
// Every change is written to an IncidentStore (incident_store.h; SQLite in production), so an
// aggregator restart loses nothing: Load() brings back the open incidents and the next id, and a
// finding for an incident that is still open updates it instead of raising a duplicate. Detectors
// lose their state in a restart: each fabric detector takes over the open incidents of its kinds
// (LinkDetector::Restore, ...; then call Confirm). An open incident that no detector took over and
// no finding re-asserted within `unconfirmed_timeout` is resolved, so nothing stays open forever.
//
// Thread-compatible: the aggregator's analysis thread owns it. Pointers it returns are valid until
// the next non-const call.
#ifndef RINGSIDE_ANALYSIS_INCIDENTS_H_
#define RINGSIDE_ANALYSIS_INCIDENTS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/finding.h"

namespace ringside::analysis {

class IncidentStore;

// A cause of an incident: another incident (a fabric incident behind a straggler), or none found.
struct CauseLink {
  uint64_t incident_id = 0;  // 0: no incident (kind "host")
  std::string kind;          // "pause_storm", "gpu_throttled", ..., "cpu_pressure",
                             // "cgroup_cpu_throttled" or "host"
  std::string scope;         // how it relates: "node", "leaf", or "host"
  std::map<std::string, std::string> entity;
  std::string summary;  // "pause_storm on node-17 mlx5_3 prio 3"
  // The cause's StableIncidentKey ("" for "host"): the same on every aggregator, so a cause on
  // another shard, or seen from the fleet-wide CLI, is named by it.
  std::string key;
  // The shard whose aggregators raised the cause, when it is not this one (cross-shard
  // attribution, remote_incidents.h); then incident_id is 0: ids are each aggregator's own.
  std::string shard;
  // What was checked to choose it (a GPU or host cause, or "host" with every signal found clean):
  // "cgroup_throttled_share", "cpu_pressure_some_share", "gpu_incidents", ... as apply.
  std::map<std::string, double> evidence;
  bool operator==(const CauseLink&) const = default;
};

// Ranks of one job that run behind a fabric incident (its blast radius).
struct AffectedJob {
  std::string job;
  std::vector<int64_t> ranks;      // sorted
  std::vector<std::string> nodes;  // sorted
  // Their Kubernetes pods, "namespace/pod", sorted; only those whose plugin knew its pod.
  std::vector<std::string> pods;
  bool operator==(const AffectedJob&) const = default;
};

struct Incident {
  uint64_t id = 0;
  IncidentKind kind = IncidentKind::kStraggler;
  Severity severity = Severity::kWarning;
  std::string key;  // FindingKey of its findings
  std::map<std::string, std::string> entity;
  absl::Time opened;
  absl::Time updated;
  std::optional<absl::Time> resolved;
  std::map<std::string, double> evidence;
  std::string summary;     // what was found (the latest active finding's summary)
  std::string resolution;  // why it was resolved
  std::vector<CauseLink> causes;
  std::vector<AffectedJob> affected;
  uint64_t revision = 0;  // bumped on every change

  bool open() const { return !resolved.has_value(); }
  // The finding it stands for (for a detector's Restore).
  Finding AsFinding() const;
};

bool operator==(const Incident& a, const Incident& b);

// The incident's identity across aggregators: 16 lowercase hex digits of FNV-1a (64-bit) over
// "ringside-incident-v1", the kind, each entity label as "name=value" (sorted by name) and the
// opening time in Unix nanoseconds, separated by '\n'. The opening time is on the data's clock (the
// sample, event or collective record that completed the finding), never the arrival time, so two
// replicas fed the same data raise the same key, whatever order it arrived in: the alert label
// `ringside_incident_key` that lets Alertmanager deduplicate them. (`id` stays a local counter for
// the CLI; `key` below is the FindingKey that matches findings to the open incident.)
std::string StableIncidentKey(IncidentKind kind, const std::map<std::string, std::string>& entity,
                              absl::Time opened);
std::string StableIncidentKey(const Incident& incident);

std::optional<IncidentKind> ParseIncidentKind(absl::string_view name);
std::optional<Severity> ParseSeverity(absl::string_view name);
bool IsFabricKind(IncidentKind kind);  // link_*, pause_storm, congestion
bool IsGpuKind(IncidentKind kind);     // gpu_* (analysis/gpu_detector.h)

// JSON (the store's columns, the CLI's -o json): objects with sorted keys; times RFC 3339 (UTC).
std::string JsonQuote(absl::string_view s);
std::string LabelsJson(const std::map<std::string, std::string>& labels);
std::string EvidenceJson(const std::map<std::string, double>& evidence);  // NaN/inf → null
std::string CausesJson(const std::vector<CauseLink>& causes);
std::string AffectedJson(const std::vector<AffectedJob>& affected);
std::string IncidentJson(const Incident& incident);

enum class IncidentChangeType { kOpened, kUpdated, kResolved };
absl::string_view IncidentChangeTypeName(IncidentChangeType t);

struct IncidentChange {
  IncidentChangeType type;
  Incident incident;  // after the change
};

struct IncidentOptions {
  // A restored open incident that nothing took over or re-asserted within this time after Load is
  // resolved ("not confirmed after restart"). Long enough for a straggler to be detected again
  // (tens of collectives) and a link to be sampled; short enough that an alert does not hang.
  absl::Duration unconfirmed_timeout = absl::Minutes(15);
  // Resolved incidents kept in memory (Get, Recent); the store keeps them all.
  size_t keep_resolved = 1000;
};

class IncidentManager {
 public:
  // `store` may be null (nothing persisted); it must outlive the manager.
  explicit IncidentManager(IncidentStore* store, IncidentOptions options = {});

  // Loads the open incidents and the next id from the store (at start, before any Apply).
  absl::Status Load(absl::Time now);

  // Findings → incidents. Changes are appended to `changes` when given. On a store error the
  // change stays in memory and is written again by the next call; the first error is returned.
  absl::Status Apply(const std::vector<Finding>& findings,
                     std::vector<IncidentChange>* changes = nullptr);
  absl::Status Apply(const Finding& finding, std::vector<IncidentChange>* changes = nullptr);

  // Replaces an incident's cause links or blast radius (the correlator); a no-op when unchanged.
  absl::Status SetCauses(uint64_t id, std::vector<CauseLink> causes, absl::Time at,
                         std::vector<IncidentChange>* changes = nullptr);
  absl::Status SetAffected(uint64_t id, std::vector<AffectedJob> affected, absl::Time at,
                           std::vector<IncidentChange>* changes = nullptr);

  // A detector took over this restored incident: it will resolve it.
  void Confirm(uint64_t id);

  // Resolves restored incidents nobody confirmed in time; retries unsaved writes.
  absl::Status Advance(absl::Time now, std::vector<IncidentChange>* changes = nullptr);
  absl::Status Flush();

  std::vector<const Incident*> Open() const;  // by id
  const Incident* FindOpen(absl::string_view key) const;
  const Incident* Get(uint64_t id) const;                 // open or resolved and still in memory
  std::vector<const Incident*> RecentlyResolved() const;  // newest first
  uint64_t next_id() const { return next_id_; }
  size_t unsaved() const { return unsaved_.size(); }

 private:
  absl::Status ApplyOne(const Finding& finding, std::vector<IncidentChange>* changes);
  Incident* Mutable(uint64_t id);
  absl::Status Save(const Incident& incident);
  void Resolve(Incident& inc, absl::Time at, std::string resolution,
               std::vector<IncidentChange>* changes, absl::Status& status);

  IncidentStore* store_;
  IncidentOptions options_;
  std::map<uint64_t, Incident> open_;
  absl::flat_hash_map<std::string, uint64_t> by_key_;
  std::deque<Incident> resolved_;  // newest last
  std::set<uint64_t> unconfirmed_;
  absl::Time loaded_at_ = absl::InfinitePast();
  std::map<uint64_t, Incident> unsaved_;
  uint64_t next_id_ = 1;
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_INCIDENTS_H_
