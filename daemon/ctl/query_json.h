// The Query API's messages as the JSON that `ringside -o json` prints: snake_case keys (sorted:
// nlohmann::json objects are ordered maps), times as RFC 3339 strings in UTC (null when unset),
// ids as numbers, NaN and infinities as null. This is a stable, documented output (docs/cli.md);
// fields are only added.
#ifndef RINGSIDE_DAEMON_CTL_QUERY_JSON_H_
#define RINGSIDE_DAEMON_CTL_QUERY_JSON_H_

#include <nlohmann/json.hpp>
#include <ostream>

#include "ringside/v1/query.pb.h"

namespace ringside::daemon::ctl {

nlohmann::json TimeJson(int64_t unix_nanos);
nlohmann::json IncidentJson(const v1::Incident& incident);
nlohmann::json CauseLinkJson(const v1::CauseLink& cause);
nlohmann::json LinkJson(const v1::LinkStatus& link);
nlohmann::json NodeJson(const v1::NodeStatus& node);
nlohmann::json RankScoreJson(const v1::RankScore& rank);
nlohmann::json StatusJson(const v1::ClusterStatus& status);
nlohmann::json ChangeJson(const v1::IncidentChange& change);
nlohmann::json TopologyJson(const v1::TopologyView& topology);

// Pretty-printed (2 spaces) with a final newline.
void WriteJson(const nlohmann::json& value, std::ostream& out);
// One line, for JSON Lines (`ringside watch -o json`).
void WriteJsonLine(const nlohmann::json& value, std::ostream& out);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_QUERY_JSON_H_
