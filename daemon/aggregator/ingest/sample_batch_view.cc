#include "daemon/aggregator/ingest/sample_batch_view.h"

#include "daemon/aggregator/ingest/wire_reader.h"

namespace ringside::daemon {
namespace {

using wire::kLen;
using wire::kVarint;
using wire::ReadLen;
using wire::ReadTag;
using wire::ReadVarint;
using wire::Tag;

// A packed run of varints, each as protobuf reads it into a `T` (the low bits kept).
template <typename T>
bool ReadPacked(absl::string_view run, std::vector<T>* out) {
  const char* p = run.data();
  const char* const end = p + run.size();
  // One varint per byte without the continuation bit: the exact count, to size once.
  size_t count = 0;
  for (const char c : run) count += static_cast<uint8_t>(c) < 0x80 ? 1 : 0;
  out->resize(count);
  T* w = out->data();
  while (p < end) {
    // The commonest case, a one-byte varint (small ids, idle values), without the loop.
    const uint8_t b0 = static_cast<uint8_t>(*p);
    if (b0 < 0x80) {
      *w++ = static_cast<T>(b0);
      ++p;
      continue;
    }
    uint64_t v;
    if (!ReadVarint(p, end, &v)) return false;
    *w++ = static_cast<T>(v);
  }
  return w == out->data() + out->size();
}

bool ReadBatch(absl::string_view bytes, SampleBatchView* out) {
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  bool timestamp = false;
  bool ids = false;
  bool values = false;
  out->timestamp_unix_nanos = 0;
  out->ids.clear();
  out->values.clear();
  while (p < end) {
    uint64_t tag;
    if (!ReadTag(p, end, &tag)) return false;
    uint64_t v;
    absl::string_view run;
    switch (tag) {
      case Tag(1, kVarint):
        if (timestamp || !ReadVarint(p, end, &v)) return false;
        timestamp = true;
        out->timestamp_unix_nanos = static_cast<int64_t>(v);
        break;
      case Tag(2, kLen):
        if (ids || !ReadLen(p, end, &run) || !ReadPacked(run, &out->ids)) return false;
        ids = true;
        break;
      case Tag(3, kLen):
        if (values || !ReadLen(p, end, &run) || !ReadPacked(run, &out->values)) return false;
        values = true;
        break;
      default:
        return false;  // an unknown field, an unpacked element: protobuf's to judge
    }
  }
  return true;
}

}  // namespace

bool ParseSampleBatchMessage(absl::string_view bytes, SampleBatchView* out) {
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  bool seq = false;
  bool samples = false;
  out->seq = 0;
  while (p < end) {
    uint64_t tag;
    if (!ReadTag(p, end, &tag)) return false;
    uint64_t v;
    absl::string_view body;
    switch (tag) {
      case Tag(1, kVarint):
        if (seq || !ReadVarint(p, end, &v)) return false;
        seq = true;
        out->seq = v;
        break;
      case Tag(12, kLen):
        if (samples || !ReadLen(p, end, &body) || !ReadBatch(body, out)) return false;
        samples = true;
        break;
      default:
        return false;  // another body, or an unknown field
    }
  }
  return samples;
}

bool MayBeSampleBatchMessage(absl::string_view first_bytes) {
  const char* p = first_bytes.data();
  const char* const end = p + first_bytes.size();
  if (p == end) return true;
  if (static_cast<uint8_t>(*p) == Tag(1, kVarint)) {
    ++p;
    uint64_t seq;
    if (!ReadVarint(p, end, &seq)) return true;  // the seq runs past these bytes
    if (p == end) return true;
  }
  return static_cast<uint8_t>(*p) == Tag(12, kLen);
}

}  // namespace ringside::daemon
