// A SampleBatch as the ingest core takes it in, decoded straight from an AgentMessage's bytes:
// the sampling interval's message of every node (1,500 ids and values), read without building
// the protobuf message. Parsing it with protobuf (the message, its repeated fields, gRPC's stream
// over the slices) was 8 % of the aggregator's CPU at 12,500 nodes.
//
// The reader takes the canonical encoding only: at the top, seq (at most once) and one samples
// field; in SampleBatch, timestamp_unix_nanos, ids and values each at most once, ids and values
// packed. Anything else (unknown fields, another body, unpacked or repeated fields, any
// malformation) it declines, and the caller parses the message with protobuf as before, so every
// odd message is judged exactly as it always was. Varints are read as protobuf reads them (ids
// keep their low 32 bits).
#ifndef RINGSIDE_DAEMON_AGGREGATOR_INGEST_SAMPLE_BATCH_VIEW_H_
#define RINGSIDE_DAEMON_AGGREGATOR_INGEST_SAMPLE_BATCH_VIEW_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"

namespace ringside::daemon {

struct SampleBatchView {
  uint64_t seq = 0;
  int64_t timestamp_unix_nanos = 0;
  // Decoded; their storage is kept between messages. Their sizes may differ (the core refuses
  // such a batch, as it refuses the parsed one).
  std::vector<uint32_t> ids;
  std::vector<uint64_t> values;
};

// Reads an AgentMessage's bytes whose body is a SampleBatch. True: `out` holds it. False: not such
// a message, or not in the canonical encoding (`out` is then unspecified); parse it with protobuf.
bool ParseSampleBatchMessage(absl::string_view bytes, SampleBatchView* out);

// Whether a message whose first bytes are these may be one (its seq, if any, then the samples
// tag): cheap, so that other messages (a node's definitions, 112 KB) are not gathered from their
// slices for nothing. True when the bytes are too few to tell.
bool MayBeSampleBatchMessage(absl::string_view first_bytes);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_INGEST_SAMPLE_BATCH_VIEW_H_
