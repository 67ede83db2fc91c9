#include "bench/sample_batch_encoder.h"

#include <algorithm>
#include <bit>

namespace ringside::bench {
namespace {

// Wire-format tags (field number << 3 | wire type): varint 0, length-delimited 2.
constexpr char kTagSeq = (1 << 3) | 0;           // AgentMessage.seq
constexpr char kTagSamples = (12 << 3) | 2;      // AgentMessage.samples
constexpr char kTagTimestamp = (1 << 3) | 0;     // SampleBatch.timestamp_unix_nanos
constexpr char kTagIds = (2 << 3) | 2;           // SampleBatch.ids (packed)
constexpr char kTagValues = (3 << 3) | 2;        // SampleBatch.values (packed)

size_t VarintSize(uint64_t v) {
  // 1 byte for 0..127, one more per further 7 bits.
  return static_cast<size_t>((std::bit_width(v | 1) + 6) / 7);
}

char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

}  // namespace

SampleBatchEncoder::SampleBatchEncoder(std::span<const uint32_t> ids) : n_ids_(ids.size()) {
  if (ids.empty()) return;
  size_t len = 0;
  for (uint32_t id : ids) len += VarintSize(id);
  ids_field_.resize(1 + VarintSize(len) + len);
  char* p = ids_field_.data();
  *p++ = kTagIds;
  p = PutVarint(p, len);
  for (uint32_t id : ids) p = PutVarint(p, id);
}

void SampleBatchEncoder::Encode(uint64_t seq, int64_t timestamp_unix_nanos,
                                std::span<const uint64_t> values, std::string* out) const {
  const uint64_t ts = static_cast<uint64_t>(timestamp_unix_nanos);  // int64: two's complement
  size_t values_len = 0;
  for (uint64_t v : values) values_len += VarintSize(v);
  size_t batch_len = ids_field_.size();
  if (ts != 0) batch_len += 1 + VarintSize(ts);
  if (values_len > 0) batch_len += 1 + VarintSize(values_len) + values_len;
  const size_t total = (seq != 0 ? 1 + VarintSize(seq) : 0) + 1 + VarintSize(batch_len) + batch_len;
  // resize() of a string that already has the capacity writes no more than the new tail.
  out->resize(total);
  char* p = out->data();
  if (seq != 0) {
    *p++ = kTagSeq;
    p = PutVarint(p, seq);
  }
  *p++ = kTagSamples;
  p = PutVarint(p, batch_len);
  if (ts != 0) {
    *p++ = kTagTimestamp;
    p = PutVarint(p, ts);
  }
  p = std::copy(ids_field_.begin(), ids_field_.end(), p);
  if (values_len > 0) {
    *p++ = kTagValues;
    p = PutVarint(p, values_len);
    for (uint64_t v : values) p = PutVarint(p, v);
  }
}

}  // namespace ringside::bench
