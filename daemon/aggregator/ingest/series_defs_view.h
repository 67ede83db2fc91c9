// A SeriesDefs as the ingest core takes it in: each definition's names as views, never copied.
// Two sources: a parsed ringside.v1 message (FromProto), or, on the admission path, the bytes of
// an AgentMessage that carries only a SeriesDefs (ParseSeriesDefsMessage): a session's first
// message after its Hello, 1,500 definitions of a node, read in place without building the
// protobuf message (7,500 strings allocated, copied, then copied again into the definitions).
//
// The wire reader takes the canonical encoding only: seq absent or 0 and one series_defs field at
// the top; in SeriesDefs only defs, info, has_info and complete_digest; in each SeriesDef only its eleven fields,
// each with its own wire type, strings valid UTF-8. Anything else (unknown fields, a repeated
// body, a sequenced SeriesDefs, any malformation) it declines, and the caller parses the message
// with protobuf as before, so every odd message is judged exactly as it always was.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_INGEST_SERIES_DEFS_VIEW_H_
#define RINGSIDE_DAEMON_AGGREGATOR_INGEST_SERIES_DEFS_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "analysis/series_state.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::daemon {

struct SeriesDefsView {
  // The definitions before the first malformed one (unknown kind, width over 64), in order.
  std::vector<analysis::SeriesDefinitionRef> defs;
  absl::Status malformed;    // that definition's error; OK when every definition is well formed
  size_t defs_received = 0;  // every definition in the message
  size_t info_received = 0;  // info records in the message
  // The info records with has_info (what IngestObserver::OnInfo gets) when the message says they
  // are the complete set; null otherwise.
  const v1::SeriesDefs* info = nullptr;
  v1::SeriesDefs info_storage;  // ParseSeriesDefsMessage: the info records, parsed
  // SeriesDefs.complete_digest: the agent says `defs` are its complete set, with this digest
  // (definition_catalog.h). Empty when not said.
  absl::string_view complete_digest;
};

// The ingest checks of one definition beyond NodeSeries::Define's: its kind and width.
absl::Status CheckWireDefinition(uint32_t id, int32_t kind, uint32_t width);

// Views of `defs` (which must outlive `out`'s use).
void SeriesDefsFromProto(const v1::SeriesDefs& defs, SeriesDefsView* out);

// Reads an AgentMessage's bytes that carry a SeriesDefs with seq 0. True: `out` holds it, its
// views into `bytes`. False: not such a message, or not in the canonical encoding; parse it with
// protobuf.
bool ParseSeriesDefsMessage(absl::string_view bytes, SeriesDefsView* out);

// Whether the bytes look like such a message (its first tag is series_defs): cheap, for choosing
// the path.
inline bool MayBeSeriesDefsMessage(absl::string_view first_bytes) {
  return !first_bytes.empty() && static_cast<uint8_t>(first_bytes[0]) == ((11 << 3) | 2);
}

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_INGEST_SERIES_DEFS_VIEW_H_
