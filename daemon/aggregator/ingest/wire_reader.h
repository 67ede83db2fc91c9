// Reading protobuf's wire format in place, for the ingest paths that take a message's bytes
// without building the message (series_defs_view.h, sample_batch_view.h). Each reader takes what
// protobuf takes and refuses what it refuses, so a message the in-place path declines is judged by
// protobuf exactly as before.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_INGEST_WIRE_READER_H_
#define RINGSIDE_DAEMON_AGGREGATOR_INGEST_WIRE_READER_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace ringside::daemon::wire {

// Wire types and the tags read (field << 3 | wire type).
inline constexpr uint32_t kVarint = 0;
inline constexpr uint32_t kLen = 2;
constexpr uint32_t Tag(uint32_t field, uint32_t wire) { return field << 3 | wire; }

// A varint of at most 10 bytes (the bits past 64 dropped, as protobuf does).
inline bool ReadVarint(const char*& p, const char* end, uint64_t* v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 70 && p < end; shift += 7) {
    const uint8_t b = static_cast<uint8_t>(*p++);
    r |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (b < 0x80) {
      *v = r;
      return true;
    }
  }
  return false;
}

// A tag or a length: protobuf reads these as 32-bit varints of at most 5 bytes, the fifth
// holding the top 4 bits of a tag (below 0x10) or 3 of a length (below 0x08: under 2 GiB), and
// refuses the message otherwise — so must this reader, even where the bits past them are zero
// (a 6-byte encoding of tag 8 was taken here and refused by protobuf: found by the fuzzer).
inline bool ReadVarint32(const char*& p, const char* end, uint32_t fifth_below, uint64_t* v) {
  uint64_t r = 0;
  for (int i = 0; i < 5 && p < end; ++i) {
    const uint8_t b = static_cast<uint8_t>(*p++);
    if (i == 4 && b >= fifth_below) return false;
    r |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if (b < 0x80) {
      *v = r;
      return true;
    }
  }
  return false;
}

inline bool ReadTag(const char*& p, const char* end, uint64_t* tag) {
  return ReadVarint32(p, end, 0x10, tag);
}

inline bool ReadLen(const char*& p, const char* end, absl::string_view* out) {
  uint64_t n;
  if (!ReadVarint32(p, end, 0x08, &n) || n > static_cast<uint64_t>(end - p)) return false;
  *out = absl::string_view(p, static_cast<size_t>(n));
  p += n;
  return true;
}

}  // namespace ringside::daemon::wire

#endif  // RINGSIDE_DAEMON_AGGREGATOR_INGEST_WIRE_READER_H_
