// The shard-capacity bench's hand-made SampleBatch bytes against protobuf's own serializer: the
// aggregator must parse exactly what a real agent's AgentMessage would carry.
#include "bench/sample_batch_encoder.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::bench {
namespace {

class SampleBatchEncoderTest : public ::testing::Test {
 protected:
  // What protobuf writes for the same message.
  static std::string Reference(uint64_t seq, int64_t ts, const std::vector<uint32_t>& ids,
                               const std::vector<uint64_t>& values) {
    v1::AgentMessage m;
    m.set_seq(seq);
    v1::SampleBatch* b = m.mutable_samples();
    b->set_timestamp_unix_nanos(ts);
    for (uint32_t id : ids) b->add_ids(id);
    for (uint64_t v : values) b->add_values(v);
    return m.SerializeAsString();
  }
};

TEST_F(SampleBatchEncoderTest, BytesMatchProtobufForAPortSeriesBatch) {
  std::vector<uint32_t> ids;
  std::vector<uint64_t> values;
  for (uint32_t s = 0; s < 1500; ++s) {
    ids.push_back(s);
    // Every varint length from 1 to 10 bytes, as counters at mid-life values have.
    values.push_back(s % 11 == 0 ? 0 : (uint64_t{1} << (s % 64)) + s);
  }
  const SampleBatchEncoder enc(ids);
  std::string out;
  enc.Encode(123456, 1'764'000'000'123'456'789, values, &out);
  EXPECT_EQ(out, Reference(123456, 1'764'000'000'123'456'789, ids, values));

  v1::AgentMessage parsed;
  ASSERT_TRUE(parsed.ParseFromString(out));
  EXPECT_EQ(parsed.seq(), 123456u);
  ASSERT_TRUE(parsed.has_samples());
  EXPECT_EQ(parsed.samples().timestamp_unix_nanos(), 1'764'000'000'123'456'789);
  ASSERT_EQ(parsed.samples().values_size(), 1500);
  EXPECT_EQ(parsed.samples().ids(1499), 1499u);
  EXPECT_EQ(parsed.samples().values(63), values[63]);
}

TEST_F(SampleBatchEncoderTest, ExtremesAndProto3ZerosMatchProtobuf) {
  const std::vector<uint32_t> ids = {0, 127, 128, 16384, std::numeric_limits<uint32_t>::max()};
  const std::vector<uint64_t> values = {0, 127, 128, std::numeric_limits<uint64_t>::max(), 1};
  const SampleBatchEncoder enc(ids);
  std::string out;
  for (uint64_t seq : {uint64_t{0}, uint64_t{1}, std::numeric_limits<uint64_t>::max()}) {
    for (int64_t ts : {int64_t{0}, int64_t{-1}, std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max()}) {
      enc.Encode(seq, ts, values, &out);
      EXPECT_EQ(out, Reference(seq, ts, ids, values)) << "seq " << seq << " ts " << ts;
    }
  }
}

TEST_F(SampleBatchEncoderTest, EmptyBatchIsAnEmptySamplesField) {
  const SampleBatchEncoder enc({});
  std::string out;
  enc.Encode(7, 0, {}, &out);
  EXPECT_EQ(out, Reference(7, 0, {}, {}));
  v1::AgentMessage parsed;
  ASSERT_TRUE(parsed.ParseFromString(out));
  EXPECT_TRUE(parsed.has_samples());  // the oneof is set even when the batch is empty
}

TEST_F(SampleBatchEncoderTest, ReusedStringShrinksAndGrowsWithTheValues) {
  const std::vector<uint32_t> ids = {0, 1, 2};
  const SampleBatchEncoder enc(ids);
  std::string out;
  const std::vector<uint64_t> big = {std::numeric_limits<uint64_t>::max(), 1ull << 62, 1ull << 50};
  const std::vector<uint64_t> small = {1, 2, 3};
  enc.Encode(1, 5, big, &out);
  EXPECT_EQ(out, Reference(1, 5, ids, big));
  enc.Encode(2, 6, small, &out);
  EXPECT_EQ(out, Reference(2, 6, ids, small));
  enc.Encode(3, 7, big, &out);
  EXPECT_EQ(out, Reference(3, 7, ids, big));
}

}  // namespace
}  // namespace ringside::bench
