// The upload buffer's drop policy and sequence numbering, and the reconnect backoff, without a
// network.
#include "daemon/agent/upload_buffer.h"

#include <gtest/gtest.h>

#include <vector>

#include "daemon/agent/backoff.h"

namespace ringside::daemon {
namespace {

v1::AgentMessage Samples(int n, int64_t ts = 1) {
  v1::AgentMessage m;
  m.mutable_samples()->set_timestamp_unix_nanos(ts);
  for (int i = 0; i < n; ++i) {
    m.mutable_samples()->add_ids(i + 1);
    m.mutable_samples()->add_values(1000 + i);
  }
  return m;
}

v1::AgentMessage Collectives(int n, const std::string& job = "job") {
  v1::AgentMessage m;
  for (int i = 0; i < n; ++i) {
    v1::CollectiveRecord* r = m.mutable_collectives()->add_records();
    r->set_job_id(job);
    r->set_seq(i);
  }
  return m;
}

v1::AgentMessage Links(int n) {
  v1::AgentMessage m;
  for (int i = 0; i < n; ++i) m.mutable_link_events()->add_events()->set_device("mlx5_0");
  return m;
}

// The types still held, in order (tombstones as "-").
std::vector<std::string> Held(const UploadBuffer& b) {
  std::vector<std::string> out;
  for (const UploadBuffer::Entry* e = b.NextAfter(0); e != nullptr; e = b.NextAfter(e->order)) {
    out.push_back(e->tombstone ? "-" : std::string(UploadTypeName(e->type)));
  }
  return out;
}

class UploadBufferTest : public ::testing::Test {
 protected:
  // Room for about `n` messages of 1000 sample values.
  static size_t Capacity(double n) {
    return static_cast<size_t>(n * static_cast<double>(UploadBuffer::Footprint(Samples(1000))));
  }
};

TEST_F(UploadBufferTest, DropsOldestSampleBatchesFirstAndCountsThem) {
  UploadBuffer b(Capacity(3.5));
  b.Push(UploadType::kCollectives, Collectives(3), 3);
  b.Push(UploadType::kSamples, Samples(1000, 1), 1000);
  b.Push(UploadType::kLinkEvents, Links(2), 2);
  b.Push(UploadType::kSamples, Samples(1000, 2), 1000);
  b.Push(UploadType::kSamples, Samples(1000, 3), 1000);
  EXPECT_EQ(b.dropped(UploadType::kSamples).messages, 0u);
  b.Push(UploadType::kSamples, Samples(1000, 4), 1000);
  b.Push(UploadType::kSamples, Samples(1000, 5), 1000);
  // The two oldest sample batches went; the collectives and link events stay.
  EXPECT_EQ(b.dropped(UploadType::kSamples).messages, 2u);
  EXPECT_EQ(b.dropped(UploadType::kSamples).records, 2000u);
  EXPECT_EQ(b.dropped(UploadType::kCollectives).messages, 0u);
  EXPECT_EQ(b.dropped(UploadType::kLinkEvents).messages, 0u);
  EXPECT_EQ(Held(b), (std::vector<std::string>{"collectives", "link_events", "samples", "samples",
                                               "samples"}));
  const UploadBuffer::Entry* third = b.NextAfter(b.NextAfter(b.NextAfter(0)->order)->order);
  EXPECT_EQ(third->msg->samples().timestamp_unix_nanos(), 3);
  EXPECT_LE(b.bytes(), b.capacity());
}

TEST_F(UploadBufferTest, NeverDropsCollectivesOrLinkEventsWhileSamplesRemain) {
  UploadBuffer b(Capacity(3));
  b.Push(UploadType::kSamples, Samples(1000), 1000);
  // Collectives push out the one sample batch, and only then each other, oldest first.
  for (int i = 0; i < 40; ++i) b.Push(UploadType::kCollectives, Collectives(10, "j"), 10);
  EXPECT_EQ(b.dropped(UploadType::kSamples).messages, 1u);
  EXPECT_GT(b.dropped(UploadType::kCollectives).messages, 0u);
  EXPECT_EQ(b.dropped(UploadType::kCollectives).records,
            10 * b.dropped(UploadType::kCollectives).messages);
  EXPECT_EQ(b.dropped(UploadType::kCollectives).messages + b.messages(), 40u);
  // A new sample batch is the first to go when room is needed again.
  const uint64_t collectives_dropped = b.dropped(UploadType::kCollectives).messages;
  b.Push(UploadType::kSamples, Samples(1000), 1000);
  EXPECT_EQ(b.dropped(UploadType::kSamples).messages, 2u);
  EXPECT_EQ(b.dropped(UploadType::kCollectives).messages, collectives_dropped);
}

TEST_F(UploadBufferTest, SequenceNumbersAreAssignedWhenSentSoUnsentDropsLeaveNoGap) {
  UploadBuffer b(Capacity(2.5));
  EXPECT_EQ(b.resend_from_seq(), 1u);
  b.Push(UploadType::kSamples, Samples(1000, 1), 1000);
  b.Push(UploadType::kCollectives, Collectives(1), 1);
  b.Push(UploadType::kSamples, Samples(1000, 2), 1000);
  // Send the first two.
  const UploadBuffer::Entry* e = b.NextAfter(0);
  EXPECT_EQ(b.AssignSeq(e->order), 1u);
  e = b.NextAfter(e->order);
  EXPECT_EQ(b.AssignSeq(e->order), 2u);
  const uint64_t unsent = b.NextAfter(e->order)->order;
  // Overflow: drops the sent sample batch (seq 1) as a tombstone, then the unsent one outright.
  b.Push(UploadType::kSamples, Samples(1000, 3), 1000);
  b.Push(UploadType::kSamples, Samples(1000, 4), 1000);
  // The unsent one is lost for sure; the sent one may still arrive: its fate is pending.
  EXPECT_EQ(b.dropped(UploadType::kSamples).messages, 1u);
  EXPECT_EQ(b.dropped(UploadType::kSamples).records, 1000u);
  EXPECT_EQ(b.counts(UploadType::kSamples).pending.messages, 1u);
  EXPECT_EQ(b.counts(UploadType::kSamples).pending.records, 1000u);
  EXPECT_EQ(Held(b), (std::vector<std::string>{"-", "collectives", "samples", "samples"}));
  EXPECT_EQ(b.NextAfter(0)->seq, 1u);
  EXPECT_EQ(b.NextAfter(0)->msg->samples().ids_size(), 0);
  EXPECT_EQ(b.NextAfter(0)->msg->seq(), 1u);
  EXPECT_EQ(b.AssignSeq(unsent), 0u);  // gone
  // A new session starts from the tombstone: the aggregator's HelloAck will say whether it has
  // seq 1.
  EXPECT_EQ(b.resend_from_seq(), 1u);
  e = b.NextAfter(b.NextAfter(b.NextAfter(0)->order)->order);
  EXPECT_EQ(e->msg->samples().timestamp_unix_nanos(), 3);
  EXPECT_EQ(b.AssignSeq(e->order), 3u);  // the next seq: no gap
  EXPECT_EQ(e->msg->seq(), 3u);
}

TEST_F(UploadBufferTest, ASentMessageDroppedAndThenAckedWasDeliveredNotDropped) {
  UploadBuffer b(UploadBuffer::Footprint(Collectives(10)) * 5 / 2);  // room for 2
  b.Push(UploadType::kCollectives, Collectives(10), 10);
  b.Push(UploadType::kCollectives, Collectives(10), 10);
  b.AssignSeq(b.NextAfter(0)->order);  // seq 1 written to the stream
  // Room is needed: seq 1 becomes a tombstone, the unsent one goes outright.
  b.Push(UploadType::kCollectives, Collectives(10), 10);
  b.Push(UploadType::kCollectives, Collectives(10), 10);
  const UploadBuffer::DropCounts& c = b.counts(UploadType::kCollectives);
  ASSERT_TRUE(b.NextAfter(0)->tombstone);
  EXPECT_EQ(c.pending.records, 10u);
  const uint64_t dropped_before = c.dropped.records;
  // The aggregator acks seq 1 (the bytes TCP had taken arrived): delivered, never dropped.
  b.Ack(1);
  EXPECT_EQ(c.pending.records, 0u);
  EXPECT_EQ(c.pending.messages, 0u);
  EXPECT_EQ(c.delivered.records, 10u);
  EXPECT_EQ(c.delivered.messages, 1u);
  EXPECT_EQ(c.dropped.records, dropped_before);
  EXPECT_FALSE(b.NextAfter(0)->tombstone);
}

TEST_F(UploadBufferTest, ATombstoneResentInALaterSessionCountsItsMessageAsDropped) {
  UploadBuffer b(UploadBuffer::Footprint(Collectives(10)) * 5 / 2);  // room for 2
  b.Push(UploadType::kCollectives, Collectives(10), 10);
  b.AssignSeq(b.NextAfter(0)->order);
  b.Push(UploadType::kCollectives, Collectives(10), 10);
  b.Push(UploadType::kCollectives, Collectives(10), 10);
  b.Push(UploadType::kCollectives, Collectives(10), 10);
  const UploadBuffer::DropCounts& c = b.counts(UploadType::kCollectives);
  const uint64_t order = b.NextAfter(0)->order;
  ASSERT_TRUE(b.NextAfter(0)->tombstone);
  const uint64_t dropped_before = c.dropped.records;
  // A later session's HelloAck did not cover seq 1: the tombstone is resent, the message is lost.
  b.MarkResent(order);
  EXPECT_EQ(c.pending.records, 0u);
  EXPECT_EQ(c.dropped.records, dropped_before + 10);
  EXPECT_EQ(c.dropped.messages * 10, c.dropped.records);
  // Resending again (another session) and the ack do not count it twice.
  b.MarkResent(order);
  b.Ack(1);
  EXPECT_EQ(c.dropped.records, dropped_before + 10);
  EXPECT_EQ(c.delivered.records, 0u);
}

TEST_F(UploadBufferTest, SentMessageDroppedBetweenOthersKeepsItsSeqAsTombstone) {
  UploadBuffer b(Capacity(3.5));
  b.Push(UploadType::kCollectives, Collectives(1), 1);
  b.Push(UploadType::kSamples, Samples(1000, 1), 1000);
  b.Push(UploadType::kCollectives, Collectives(1), 1);
  for (const UploadBuffer::Entry* e = b.NextAfter(0); e; e = b.NextAfter(e->order)) {
    b.AssignSeq(e->order);
  }
  for (int i = 0; i < 3; ++i) b.Push(UploadType::kSamples, Samples(1000, 10 + i), 1000);
  // seq 1, 2 (now empty), 3 are all still there to resend: the aggregator sees no hole.
  EXPECT_EQ(b.resend_from_seq(), 1u);
  std::vector<uint64_t> seqs;
  for (const UploadBuffer::Entry* e = b.NextAfter(0); e && e->seq; e = b.NextAfter(e->order)) {
    seqs.push_back(e->seq);
  }
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_TRUE(b.NextAfter(b.NextAfter(0)->order)->tombstone);
}

TEST_F(UploadBufferTest, AckReleasesOnlyAcknowledgedMessages) {
  UploadBuffer b(Capacity(10));
  for (int i = 0; i < 4; ++i) b.Push(UploadType::kCollectives, Collectives(2), 2);
  const UploadBuffer::Entry* e = b.NextAfter(0);
  b.AssignSeq(e->order);
  b.AssignSeq(b.NextAfter(e->order)->order);
  const size_t before = b.bytes();
  b.Ack(1);
  EXPECT_EQ(b.messages(), 3u);
  EXPECT_LT(b.bytes(), before);
  EXPECT_EQ(b.resend_from_seq(), 2u);
  b.Ack(99);  // never releases what was not sent
  EXPECT_EQ(b.messages(), 2u);
  EXPECT_EQ(b.resend_from_seq(), 3u);
  EXPECT_EQ(b.last_assigned_seq(), 2u);
}

TEST(BackoffTest, GrowsJitteredAndStaysBounded) {
  BackoffOptions o;
  o.initial = absl::Milliseconds(10);
  o.max = absl::Milliseconds(100);
  o.multiplier = 2;
  o.jitter = 0.2;
  Backoff b(o, 42);
  absl::Duration expected = o.initial;
  for (int i = 0; i < 30; ++i) {
    const absl::Duration d = b.Next();
    EXPECT_GE(d, expected * 0.8) << i;
    EXPECT_LE(d, std::min(expected * 1.2, o.max)) << i;
    expected = std::min(expected * 2, o.max);
  }
  b.Reset();
  EXPECT_LE(b.Next(), absl::Milliseconds(12));
}

}  // namespace
}  // namespace ringside::daemon
