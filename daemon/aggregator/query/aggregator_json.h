// JSON renderings of the aggregator's state for the debug endpoints (/api/v1/...) and of the
// journal for --dump-journal. One object per line where it is a stream (the journal dump).
#ifndef RINGSIDE_DAEMON_AGGREGATOR_QUERY_AGGREGATOR_JSON_H_
#define RINGSIDE_DAEMON_AGGREGATOR_QUERY_AGGREGATOR_JSON_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "analysis/series_state.h"
#include "daemon/aggregator/ingest/ingest_core.h"
#include "daemon/aggregator/journal/journal.h"

namespace ringside::daemon {

// {"node":..., "series":[{"id", "source", "device", "port", "counter", "priority", "unit", "kind",
//  "width", "saturates", "has_value", "last_raw", "last_time_unix_nanos", "last_step", "steps",
//  "first_raw", "first_time_unix_nanos" (the baseline), "total" (the increase since the baseline),
//  "rates":[oldest..newest, null when unknown]}, ...]}
std::string SeriesJson(const std::string& node, const std::vector<analysis::SeriesView>& series);

// {"nodes":[{"node", "last_seen_unix_nanos", "stale", "session_active", "current_epoch", "series",
//  "collective_records", "link_events", "epochs":[{"agent_epoch", "received_seq",
//  "acked_seq"}]}]}  (agent epochs as decimal strings: they are random 64-bit numbers)
std::string NodesJson(const std::vector<NodeStatus>& nodes);

// {"node":..., "records":[{"received_unix_nanos", "agent_epoch", "seq", "record":{proto JSON}}]}
std::string CollectivesJson(const std::string& node, const std::vector<ReceivedCollective>& recs);
// {"node":..., "events":[{"received_unix_nanos", "agent_epoch", "seq", "event":{proto JSON}}]}
std::string LinkEventsJson(const std::string& node, const std::vector<ReceivedLinkEvent>& events);

// The journal entry as JSON lines, one per collective record ("kind":"collective"), per link event
// ("kind":"link_event") and per batch with plugin drops ("kind":"plugin_drops"), each with "node",
// "agent_epoch", "seq" (of the message) and "received_unix_nanos".
void AppendJournalEntryJsonLines(const JournalEntry& entry, std::string* out);

// Prints the journal in `dir` as JSON lines (as above, then one "kind":"watermark" line per
// (node, agent_epoch)).
absl::Status DumpJournalJson(const std::string& dir, std::ostream& out,
                             JournalReadStats* stats = nullptr);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_QUERY_AGGREGATOR_JSON_H_
