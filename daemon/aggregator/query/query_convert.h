// Conversions between the analysis types (analysis::Incident, LinkView, RankView) and the Query
// API's messages (proto/ringside/v1/query.proto). Times: absl::Time ↔ Unix nanoseconds, 0 = unset.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_QUERY_QUERY_CONVERT_H_
#define RINGSIDE_DAEMON_AGGREGATOR_QUERY_QUERY_CONVERT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "analysis/fabric_views.h"
#include "analysis/incidents.h"
#include "analysis/topology.h"
#include "analysis/topology_events.h"
#include "analysis/topology_merge.h"
#include "ringside/v1/query.pb.h"

namespace ringside::daemon {

// absl::Time → Unix nanoseconds; 0 for an infinite time (unset).
int64_t ToUnixNanosOrZero(absl::Time t);

void ToProto(const analysis::Incident& in, v1::Incident* out);
v1::Incident ToProto(const analysis::Incident& in);
// InvalidArgument for an unknown kind or severity.
absl::StatusOr<analysis::Incident> FromProto(const v1::Incident& in);

v1::IncidentChange::Type ToProto(analysis::IncidentChangeType type);
v1::IncidentChange ToProto(const analysis::IncidentChange& change, bool initial);

// The link's own state; the open incidents about it and `healthy` are filled in by the caller.
void ToProto(const analysis::LinkView& in, v1::LinkStatus* out);
// Without `flagged` and `incident_id` (the caller matches them to open incidents).
void ToProto(const analysis::RankView& in, v1::RankScore* out);

// Topology (GetTopology).
void ToProto(const analysis::LeafPort& in, v1::SwitchEnd* out);
void ToProto(const analysis::HcaAttachment& in, v1::TopologyPort* out);
void ToProto(const analysis::TopologyDisagreement& in, v1::TopologyDisagreement* out);
void ToProto(const analysis::TopologyEvent& in, v1::TopologyEvent* out);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_QUERY_QUERY_CONVERT_H_
