// Incidents and their parts in the words of the `ringside` CLI's tables and lines: an entity
// ("node-b mlx5_0 port 1 prio 3", "rank 5 (job j1) on node-a"), a headline ("pause_storm node-b
// mlx5_0 prio 3"), rank ranges ("0-3,5"), the incidents table and the one-line `watch` change.
#ifndef RINGSIDE_DAEMON_CTL_INCIDENT_TEXT_H_
#define RINGSIDE_DAEMON_CTL_INCIDENT_TEXT_H_

#include <string>

#include "absl/time/time.h"
#include "daemon/ctl/table.h"
#include "google/protobuf/map.h"
#include "google/protobuf/repeated_field.h"
#include "ringside/v1/query.pb.h"

namespace ringside::daemon::ctl {

using EntityMap = google::protobuf::Map<std::string, std::string>;

// The entity's labels in a fixed order: the rank part "rank R (job J, comm C)", then "on NODE"
// and "pod NAMESPACE/POD" (or NODE alone when there is no rank), device, "port P", netdev, "gpu G", "link L", "prio N",
// then any other labels as key=value, sorted, except "source" (the device names it; JSON keeps
// it). Empty map: "-".
std::string EntityText(const EntityMap& entity);

// A Kubernetes pod as the CLI shows it: "namespace/pod", or "-" when unknown.
std::string PodText(const std::string& pod_namespace, const std::string& pod);

// "KIND ENTITY", e.g. "pause_storm node-b mlx5_0 prio 3".
std::string Headline(const v1::Incident& incident);

// Sorted ranks as ranges: {0,1,2,3,5} → "0-3,5".
std::string RankRanges(const google::protobuf::RepeatedField<int64_t>& ranks);

// "open" or "resolved".
std::string StateText(const v1::Incident& incident);

// The table of `ringside incidents`: ID, KIND, SEVERITY, STATE, ENTITY, OPENED, UPDATED, SUMMARY;
// `with_key` adds KEY after ID (when several aggregators were asked, whose ids differ).
Table IncidentsTable(const google::protobuf::RepeatedPtrField<v1::Incident>& incidents,
                     absl::Time now, bool with_key = false);

// One `ringside watch` line for a change:
// "2026-11-22T08:10:00Z  OPENED    #12 critical pause_storm node-b mlx5_0 prio 3: summary".
// The time is when the change happened (opened, updated or resolved), else `now`.
std::string ChangeLine(const v1::IncidentChange& change, absl::Time now);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_INCIDENT_TEXT_H_
