// CollectiveStream: the agent's collective-socket decoding (daemon/agent/collective_listener.cc
// ProcessFrames) on arbitrary bytes, with the format's promises checked.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/record_proto.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"

namespace ringside::fuzz {

namespace rc = ringside::collectors;

bool CollectiveStream(const uint8_t* data, size_t size) {
  // The whole input as one frame, through the agent's proto adapter.
  absl::StatusOr<v1::CollectiveBatch> whole = rc::DecodeFrameToProto(absl::MakeConstSpan(data, size));
  if (!whole.ok()) FUZZ_CHECK(whole.status().code() == absl::StatusCode::kDataLoss);

  // The input as a stream of frames, cut as the listener cuts them.
  auto records = std::make_unique<rc::CollectiveRecordFields[]>(rc::kMaxRecordsPerBatch);
  size_t off = 0;
  int frames = 0;
  while (off < size) {
    const uint8_t* p = data + off;
    const size_t avail = size - off;
    rc::BatchHeaderFields header;
    size_t frame_size = 0;
    rc::DecodeStatus s = rc::DecodeBatchHeader(p, avail, &header, &frame_size);
    if (s.error == rc::DecodeError::kTruncated) {
      FUZZ_CHECK(avail < rc::kMaxBatchHeaderSize);
      return false;  // the listener waits for more; at the end of input: rejected (truncated)
    }
    if (!s.ok()) return false;
    // What the listener relies on before it decodes header.record_count records into a buffer of
    // kMaxRecordsPerBatch.
    FUZZ_CHECK(header.header_size() != 0);
    FUZZ_CHECK(header.record_count <= rc::kMaxRecordsPerBatch);
    FUZZ_CHECK(frame_size == header.header_size() + header.record_count * rc::kRecordSize);
    FUZZ_CHECK(frame_size <= rc::kMaxFrameSize);
    if (avail < frame_size) return false;
    for (uint32_t i = 0; i < header.record_count; ++i) {
      s = rc::DecodeRecord(p + header.header_size() + i * rc::kRecordSize, rc::kRecordSize,
                           &records[i], header.version);
      if (!s.ok()) return false;
      FUZZ_CHECK(rc::ValidateRecord(records[i]).ok());
    }
    // The whole-frame decoder agrees, and the frame is canonical: it re-encodes to its bytes.
    rc::BatchHeaderFields h2;
    std::vector<rc::CollectiveRecordFields> again(rc::kMaxRecordsPerBatch);
    FUZZ_CHECK(rc::DecodeFrame(p, frame_size, &h2, again.data(), again.size()).ok());
    FUZZ_CHECK(h2 == header);
    again.resize(h2.record_count);
    for (uint32_t i = 0; i < header.record_count; ++i) FUZZ_CHECK(again[i] == records[i]);
    absl::StatusOr<std::string> encoded = rc::EncodeFrame(h2, again);
    FUZZ_CHECK(encoded.ok());
    FUZZ_CHECK(encoded->size() == frame_size);
    FUZZ_CHECK(std::memcmp(encoded->data(), p, frame_size) == 0);
    absl::StatusOr<v1::CollectiveBatch> proto =
        rc::DecodeFrameToProto(absl::MakeConstSpan(p, frame_size));
    FUZZ_CHECK(proto.ok());
    FUZZ_CHECK(proto->records_size() == static_cast<int>(header.record_count));
    if (off == 0 && frame_size == size) FUZZ_CHECK(whole.ok());
    ++frames;
    off += frame_size;
  }
  return frames > 0;
}

}  // namespace ringside::fuzz
