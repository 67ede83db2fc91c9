// The load generator's SampleBatch encoder (ringside-shard-capacity-bench, issue #26): writes an
// AgentMessage{seq, samples{timestamp, ids, values}} in protobuf's wire format without building
// the message, with the ids field encoded once per agent shape. The bytes are exactly what
// AgentMessage::SerializeToString produces for the same message (fields in number order, proto3
// zeros omitted, minimal varints), so the aggregator parses what a real agent sends.
#ifndef RINGSIDE_BENCH_SAMPLE_BATCH_ENCODER_H_
#define RINGSIDE_BENCH_SAMPLE_BATCH_ENCODER_H_

#include <cstdint>
#include <span>
#include <string>

namespace ringside::bench {

class SampleBatchEncoder {
 public:
  // `ids` are the series every batch carries, in order (ids[i] has values[i]).
  explicit SampleBatchEncoder(std::span<const uint32_t> ids);

  // Replaces `*out` with the encoded message; `values` must have as many entries as the ids.
  // Reuses `out`'s capacity, so a caller that keeps one string allocates nothing per batch.
  void Encode(uint64_t seq, int64_t timestamp_unix_nanos, std::span<const uint64_t> values,
              std::string* out) const;

  size_t size() const { return n_ids_; }

 private:
  size_t n_ids_ = 0;
  std::string ids_field_;  // SampleBatch field 2: tag, length, packed varints ("" with no ids)
};

}  // namespace ringside::bench

#endif  // RINGSIDE_BENCH_SAMPLE_BATCH_ENCODER_H_
