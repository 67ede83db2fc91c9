// The SampleBatch wire reader against protobuf: what it reads equals what protobuf parses; what it
// declines (non-canonical or broken bytes) is left to protobuf, never read differently.
#include "daemon/aggregator/ingest/sample_batch_view.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "ringside/v1/ingest.pb.h"

namespace ringside::daemon {
namespace {

// A value of `bits` significant bits: every varint length from 1 to 10 bytes.
uint64_t OfBits(std::mt19937_64& rng, int bits) {
  if (bits == 0) return 0;
  const uint64_t top = uint64_t{1} << (bits - 1);
  return top | (rng() & (top - 1));
}

void ExpectSame(const v1::AgentMessage& m, const SampleBatchView& v) {
  ASSERT_TRUE(m.has_samples());
  EXPECT_EQ(v.seq, m.seq());
  EXPECT_EQ(v.timestamp_unix_nanos, m.samples().timestamp_unix_nanos());
  ASSERT_EQ(v.ids.size(), static_cast<size_t>(m.samples().ids_size()));
  ASSERT_EQ(v.values.size(), static_cast<size_t>(m.samples().values_size()));
  for (size_t i = 0; i < v.ids.size(); ++i) EXPECT_EQ(v.ids[i], m.samples().ids(i)) << i;
  for (size_t i = 0; i < v.values.size(); ++i) EXPECT_EQ(v.values[i], m.samples().values(i)) << i;
}

TEST(SampleBatchViewTest, ReadsRandomBatchesAsProtobufDoes) {
  std::mt19937_64 rng(42);
  SampleBatchView view;  // reused, as the ingest path reuses it
  for (int round = 0; round < 300; ++round) {
    v1::AgentMessage m;
    if (round % 7 != 0) m.set_seq(OfBits(rng, static_cast<int>(rng() % 65)));
    v1::SampleBatch* b = m.mutable_samples();
    if (round % 5 != 0) b->set_timestamp_unix_nanos(static_cast<int64_t>(rng()));
    const int n = round == 0 ? 0 : static_cast<int>(rng() % 2000);
    for (int i = 0; i < n; ++i) {
      b->add_ids(static_cast<uint32_t>(OfBits(rng, static_cast<int>(rng() % 33))));
      b->add_values(OfBits(rng, static_cast<int>(rng() % 65)));
    }
    const std::string bytes = m.SerializeAsString();
    ASSERT_TRUE(ParseSampleBatchMessage(bytes, &view)) << "round " << round;
    ExpectSame(m, view);
  }
}

TEST(SampleBatchViewTest, ReadsUnevenBatchesForTheCoreToRefuse) {
  v1::AgentMessage m;
  m.set_seq(3);
  m.mutable_samples()->add_ids(1);
  m.mutable_samples()->add_ids(2);
  m.mutable_samples()->add_values(5);
  SampleBatchView view;
  ASSERT_TRUE(ParseSampleBatchMessage(m.SerializeAsString(), &view));
  ExpectSame(m, view);
}

TEST(SampleBatchViewTest, DeclinesWhatIsNotACanonicalSampleBatch) {
  SampleBatchView view;
  v1::AgentMessage hello;
  hello.mutable_hello()->set_node("n");
  EXPECT_FALSE(ParseSampleBatchMessage(hello.SerializeAsString(), &view));
  v1::AgentMessage defs;
  defs.mutable_series_defs();
  EXPECT_FALSE(ParseSampleBatchMessage(defs.SerializeAsString(), &view));
  v1::AgentMessage seq_only;
  seq_only.set_seq(4);  // a tombstone has no body: protobuf's to read
  EXPECT_FALSE(ParseSampleBatchMessage(seq_only.SerializeAsString(), &view));
  EXPECT_FALSE(ParseSampleBatchMessage("", &view));

  v1::AgentMessage m;
  m.set_seq(9);
  m.mutable_samples()->set_timestamp_unix_nanos(1'700'000'000'000'000'000);
  m.mutable_samples()->add_ids(1);
  m.mutable_samples()->add_values(300);
  const std::string good = m.SerializeAsString();
  ASSERT_TRUE(ParseSampleBatchMessage(good, &view));
  // Each of these protobuf parses (or refuses) on its own terms; the reader leaves it to it.
  const std::string batch = m.samples().SerializeAsString();
  auto wrap = [](const std::string& inner) {
    return std::string("\x08\x09\x62", 3) + static_cast<char>(inner.size()) + inner;
  };
  ASSERT_EQ(wrap(batch), good);
  const std::string unknown = wrap(batch + std::string("\x48\x01", 2));  // field 9
  const std::string unpacked = wrap(std::string("\x10\x05\x18\x06", 4));
  const std::string repeated = wrap(batch + std::string("\x12\x01\x02", 3));  // ids again
  const std::string two_bodies = good + std::string("\x62\x00", 2);
  const std::string two_seqs = good + std::string("\x08\x01", 2);
  const std::string truncated = good.substr(0, good.size() - 1);
  const std::string long_varint = wrap(std::string("\x08", 1) + std::string(10, '\xff') + "\x01");
  for (const std::string& bytes :
       {unknown, unpacked, repeated, two_bodies, two_seqs, truncated, long_varint}) {
    EXPECT_FALSE(ParseSampleBatchMessage(bytes, &view));
  }
  v1::AgentMessage parsed;
  EXPECT_TRUE(parsed.ParseFromString(unknown));
  EXPECT_TRUE(parsed.ParseFromString(unpacked));
  EXPECT_FALSE(parsed.ParseFromString(truncated));
  EXPECT_FALSE(parsed.ParseFromString(long_varint));
}

TEST(SampleBatchViewTest, TellsFromTheFirstBytesWhatMayBeABatch) {
  v1::AgentMessage m;
  m.set_seq(300);  // a two-byte varint
  m.mutable_samples()->add_ids(1);
  m.mutable_samples()->add_values(2);
  const std::string bytes = m.SerializeAsString();
  EXPECT_TRUE(MayBeSampleBatchMessage(bytes));
  for (size_t n = 0; n < 4; ++n) {  // too few bytes to tell: maybe
    EXPECT_TRUE(MayBeSampleBatchMessage(absl::string_view(bytes).substr(0, n))) << n;
  }
  v1::AgentMessage seq0;
  seq0.mutable_samples()->add_ids(1);
  EXPECT_TRUE(MayBeSampleBatchMessage(seq0.SerializeAsString()));
  v1::AgentMessage defs;
  defs.mutable_series_defs()->add_defs()->set_id(1);
  EXPECT_FALSE(MayBeSampleBatchMessage(defs.SerializeAsString()));
  v1::AgentMessage collectives;
  collectives.set_seq(5);
  collectives.mutable_collectives()->add_records()->set_rank(1);
  EXPECT_FALSE(MayBeSampleBatchMessage(collectives.SerializeAsString()));
}

}  // namespace
}  // namespace ringside::daemon
