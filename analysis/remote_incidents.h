// The incidents of other shards (issue #14, cross-shard cause attribution; docs/scale.md).
//
// Counters go to the shard of their node, collective records to the shard of their job, so a
// straggler's job can live on shard B while the pause storm that slows it was raised by shard A.
// Each aggregator watches every other shard's WatchIncidents stream (daemon/aggregator/
// shard_watch.h) and keeps what it hears here:
// - their fabric incidents (link_*, pause_storm, congestion), open or recently resolved, which the
//   correlator offers as causes of this shard's stragglers and job slowdowns (a CauseLink with the
//   remote incident's stable key and shard, incident_id 0);
// - their stragglers and job slowdowns whose causes name one of *this* shard's incidents by stable
//   key, which the correlator adds to that incident's blast radius ("A's incident lists the job").
// Nothing else is kept. Pure data; thread-compatible (the analysis thread owns it).
#ifndef RINGSIDE_ANALYSIS_REMOTE_INCIDENTS_H_
#define RINGSIDE_ANALYSIS_REMOTE_INCIDENTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "analysis/incidents.h"

namespace ringside::analysis {

class RemoteIncidents {
 public:
  // A resolved remote incident is kept this long after it resolved (the correlator's window: a
  // straggler seen after the storm ended may still be its victim).
  explicit RemoteIncidents(absl::Duration keep_resolved = absl::Minutes(10))
      : keep_resolved_(keep_resolved) {}

  // A watch of `shard` (re)connected: `incidents` is what it has open now and resolved recently.
  // Replaces everything known of that shard.
  void Replace(const std::string& shard, const std::vector<Incident>& incidents);
  // One change from that shard's stream. A change older than what is known (a lower revision of
  // the same incident from the same aggregator) is ignored.
  void Apply(const std::string& shard, const Incident& incident);
  // Forgets incidents resolved more than keep_resolved before `now`.
  void Expire(absl::Time now);

  struct Entry {
    std::string shard;
    std::string key;  // StableIncidentKey
    Incident incident;
  };
  // The remote fabric incidents, every shard.
  std::vector<const Entry*> Fabric() const;  // fabric and GPU kinds: candidate causes
  // The jobs (ranks, nodes) behind the incident with stable key `key`, by other shards' open (or
  // recently resolved) stragglers and job slowdowns that name it as a cause. Sorted by job.
  std::vector<AffectedJob> AffectedBy(const std::string& key) const;

  size_t size() const;
  size_t size(const std::string& shard) const;
  // Bumped on every change that may alter a cause or a blast radius.
  uint64_t version() const { return version_; }

 private:
  bool Keep(const Incident& incident) const;
  void Put(const std::string& shard, const Incident& incident);

  absl::Duration keep_resolved_;
  // shard → stable key → entry
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, Entry>> shards_;
  uint64_t version_ = 0;
};

// Merges `extra` into `into` job by job (ranks, nodes and pods unioned and sorted).
void MergeAffected(std::vector<AffectedJob>& into, const std::vector<AffectedJob>& extra);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_REMOTE_INCIDENTS_H_
