// The answers of several aggregators (fleet.h) merged into one, as `ringside` prints them.
// Replicas of a shard answer with the same incidents under different local ids; an incident's
// identity is its stable key (query-api.md, "Incident id and key"), or, from an aggregator too old
// to send one, its kind, entity and opening time.
#ifndef RINGSIDE_DAEMON_CTL_FLEET_MERGE_H_
#define RINGSIDE_DAEMON_CTL_FLEET_MERGE_H_

#include <string>
#include <vector>

#include "google/protobuf/repeated_field.h"
#include "ringside/v1/query.pb.h"

namespace ringside::daemon::ctl {

using Incidents = google::protobuf::RepeatedPtrField<v1::Incident>;

// The key, or "kind|label=value|...|opened" when the key is empty.
std::string IncidentIdentity(const v1::Incident& incident);

// Every incident of every list once (the copy with the highest revision, then the latest
// update; on a tie the earlier list's), newest (updated) first, at most `limit` (0: all).
Incidents MergeIncidents(const std::vector<const Incidents*>& lists, size_t limit);

// Links once per (node, source, device, port), the most recently sampled copy, ordered by node,
// device, port.
google::protobuf::RepeatedPtrField<v1::LinkStatus> MergeLinks(
    const std::vector<const google::protobuf::RepeatedPtrField<v1::LinkStatus>*>& lists);

// Ranks once per (job, comm, rank), the highest score; highest score first, at most `limit`.
google::protobuf::RepeatedPtrField<v1::RankScore> MergeStragglers(
    const std::vector<const google::protobuf::RepeatedPtrField<v1::RankScore>*>& lists,
    size_t limit);

// One status from several. Node and link counts cannot be unioned without names, so answers
// that agree on (nodes, stale, links, unhealthy, jobs) are taken for replicas of one shard and
// counted once; the others are added. `open` is the merged open incidents (MergeIncidents of
// every aggregator's open ones): the counts by kind come from it, and the 20 most severe.
v1::ClusterStatus MergeStatus(const std::vector<const v1::ClusterStatus*>& statuses,
                              const Incidents& open);

// One topology from several aggregators' GetTopology answers (issue #16). Each shard learns the
// LLDP neighbours and subnet discovery of its own nodes only, so the fleet's topology is the union:
//   - ports once per (host, device, CA port, CA GUID), the first answer's copy (in --aggregator
//     order), ordered by host, device, port;
//   - switches once per id (the first answer's name); HOSTS and PORTS counted again over the
//     merged ports (an answer's own counts when no merged port is on the switch: a spine);
//   - switch-to-switch links, disagreements and events once each (events by time, oldest first; `max_events` > 0 keeps
//     the latest that many); events_total the largest any answer reported, at least the merged
//     count (replicas report the same events, shards different ones: their totals cannot be told
//     apart);
//   - source, discovery and format: the distinct values, in answer order, joined by ",".
v1::TopologyView MergeTopologies(const std::vector<const v1::TopologyView*>& views,
                                 size_t max_events);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_FLEET_MERGE_H_
