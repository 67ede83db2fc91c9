// The journal on its own: the frame format, group commit and callbacks, replay after a restart,
// torn tails, retention, and a full disk (FaultJournalFileSystem).
#include "daemon/aggregator/journal/journal.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "absl/synchronization/notification.h"
#include "daemon/aggregator/journal/journal_format.h"
#include "tests/aggregator/ingest/ingest_test_util.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

using ringside::testing::CollectivesMsg;
using ringside::testing::FaultJournalFileSystem;
using ringside::testing::LinkEventsMsg;
using ringside::testing::TempDir;

class JournalTest : public ::testing::Test {
 protected:
  JournalOptions Options() {
    JournalOptions o;
    o.dir = dir_.path() + "/journal";
    o.retry_interval = absl::Milliseconds(20);
    return o;
  }
  std::unique_ptr<Journal> Open(JournalOptions o, std::vector<JournalEntry>* replayed = nullptr,
                                std::vector<Watermark>* marks = nullptr) {
    auto j = Journal::Open(
        o,
        [&](const JournalEntry& e) {
          if (replayed) replayed->push_back(e);
        },
        marks);
    EXPECT_TRUE(j.ok()) << j.status();
    return j.ok() ? std::move(*j) : nullptr;
  }
  // Appends and waits (bounded) until durable.
  bool AppendDurable(Journal& j, const std::string& node, uint64_t epoch, uint64_t seq,
                     const v1::AgentMessage& m) {
    auto done = std::make_shared<absl::Notification>();
    absl::Status s = j.Append(node, epoch, seq, absl::FromUnixSeconds(1000 + seq), m,
                              [done] { done->Notify(); });
    if (!s.ok()) return false;
    return done->WaitForNotificationWithTimeout(absl::Seconds(10));
  }
  // Appends one padded record; false unless durable within 2 s.
  bool AppendDurableWithin(Journal& j, uint64_t seq) {
    auto done = std::make_shared<absl::Notification>();
    if (!j.Append("a", 1, seq, absl::Now(), CollectivesMsg(seq, seq, 1, "h", 200), [done] {
            done->Notify();
          }).ok()) {
      return false;
    }
    return done->WaitForNotificationWithTimeout(absl::Seconds(2));
  }
  std::vector<JournalEntry> ReadAll(std::vector<Watermark>* marks = nullptr,
                                    JournalReadStats* stats = nullptr) {
    std::vector<JournalEntry> out;
    absl::Status s = ReadJournal(
        dir_.path() + "/journal", nullptr, [&](const JournalEntry& e) { out.push_back(e); }, marks,
        stats);
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }

  TempDir dir_;
};

TEST_F(JournalTest, FrameRoundTripAndCorruption) {
  JournalRecord r;
  r.type = JournalRecordType::kPayload;
  r.node = "gpu-017";
  r.epoch = 0xDEADBEEFCAFEull;
  r.seq = 42;
  r.received_unix_nanos = 1234567890123;
  r.message = std::string("\x00\x01payload", 9);
  std::string data;
  EncodeJournalRecord(r, &data);
  EncodeJournalRecord(r, &data);
  size_t pos = 0;
  JournalRecord back;
  ASSERT_TRUE(DecodeJournalRecord(data, &pos, &back).ok());
  EXPECT_EQ(back.node, "gpu-017");
  EXPECT_EQ(back.epoch, 0xDEADBEEFCAFEull);
  EXPECT_EQ(back.seq, 42u);
  EXPECT_EQ(back.received_unix_nanos, 1234567890123);
  EXPECT_EQ(back.message, r.message);
  ASSERT_TRUE(DecodeJournalRecord(data, &pos, &back).ok());
  EXPECT_TRUE(absl::IsOutOfRange(DecodeJournalRecord(data, &pos, &back)));
  // A torn tail and a flipped bit are data loss, not a crash.
  std::string torn = data.substr(0, data.size() - 3);
  pos = 0;
  ASSERT_TRUE(DecodeJournalRecord(torn, &pos, &back).ok());
  EXPECT_TRUE(absl::IsDataLoss(DecodeJournalRecord(torn, &pos, &back)));
  std::string flipped = data;
  flipped[12] ^= 0x10;
  pos = 0;
  EXPECT_TRUE(absl::IsDataLoss(DecodeJournalRecord(flipped, &pos, &back)));
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value
}

TEST_F(JournalTest, AppendsAreDurableAndReplayedAfterReopen) {
  {
    auto j = Open(Options());
    ASSERT_NE(j, nullptr);
    ASSERT_TRUE(AppendDurable(*j, "a", 1, 1, CollectivesMsg(1, 100, 3)));
    ASSERT_TRUE(AppendDurable(*j, "a", 1, 2, LinkEventsMsg(2, 2)));
    ASSERT_TRUE(AppendDurable(*j, "b", 9, 5, CollectivesMsg(5, 1, 1)));
    JournalStats st = j->stats();
    EXPECT_EQ(st.records_written, 3u);
    EXPECT_TRUE(st.healthy);
    EXPECT_EQ(st.pending_bytes, 0u);
    EXPECT_GT(st.bytes, 0u);
  }
  std::vector<JournalEntry> replayed;
  std::vector<Watermark> marks;
  auto j = Open(Options(), &replayed, &marks);
  ASSERT_NE(j, nullptr);
  ASSERT_EQ(replayed.size(), 3u);
  EXPECT_EQ(replayed[0].node, "a");
  EXPECT_EQ(replayed[0].seq, 1u);
  EXPECT_EQ(replayed[0].message.collectives().records_size(), 3);
  EXPECT_EQ(replayed[1].message.link_events().events_size(), 2);
  EXPECT_EQ(replayed[1].received, absl::FromUnixSeconds(1002));
  EXPECT_EQ(replayed[2].agent_epoch, 9u);
  ASSERT_EQ(marks.size(), 2u);
  EXPECT_EQ(marks[0].node, "a");
  EXPECT_EQ(marks[0].seq, 2u);
  EXPECT_EQ(marks[1].seq, 5u);
  // Every open starts a new segment (never appending after a possibly torn tail).
  EXPECT_EQ(j->stats().segments, 2u);
}

TEST_F(JournalTest, CheckpointsCarryWatermarksAcrossSegments) {
  JournalOptions o = Options();
  o.watermarks = [] { return std::vector<Watermark>{{"samples-only", 4, 77}}; };
  { auto j = Open(o); }  // a segment with a checkpoint, and a final checkpoint at close
  o.watermarks = nullptr;
  std::vector<Watermark> marks;
  auto j = Open(o, nullptr, &marks);
  ASSERT_EQ(marks.size(), 1u);
  EXPECT_EQ(marks[0].node, "samples-only");
  EXPECT_EQ(marks[0].seq, 77u);
}

TEST_F(JournalTest, TornTailIsIgnoredAndTheRestKept) {
  {
    auto j = Open(Options());
    ASSERT_TRUE(AppendDurable(*j, "a", 1, 1, CollectivesMsg(1, 100, 2)));
    ASSERT_TRUE(AppendDurable(*j, "a", 1, 2, CollectivesMsg(2, 102, 2)));
  }
  // A crash in the middle of a write: half a frame at the end of the segment.
  const std::string seg = dir_.path() + "/journal/" + JournalSegmentName(1);
  std::string junk;
  JournalRecord r;
  r.node = "a";
  r.epoch = 1;
  r.seq = 3;
  r.message = std::string(100, 'x');
  EncodeJournalRecord(r, &junk);
  std::ofstream(seg, std::ios::app | std::ios::binary) << junk.substr(0, junk.size() / 2);
  JournalReadStats st;
  std::vector<JournalEntry> entries = ReadAll(nullptr, &st);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(st.corrupt_segments, 1u);
  // And reopening works, continuing in a new segment.
  std::vector<JournalEntry> replayed;
  auto j = Open(Options(), &replayed);
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(replayed.size(), 2u);
  EXPECT_TRUE(AppendDurable(*j, "a", 1, 3, CollectivesMsg(3, 104, 1)));
  EXPECT_EQ(ReadAll().size(), 3u);
}

TEST_F(JournalTest, RetentionDeletesTheOldestSegments) {
  JournalOptions o = Options();
  o.segment_bytes = 2000;
  o.max_bytes = 8000;
  auto j = Open(o);
  for (uint64_t seq = 1; seq <= 60; ++seq) {
    ASSERT_TRUE(AppendDurable(*j, "a", 1, seq, CollectivesMsg(seq, seq, 1, "h", 200)));
  }
  JournalStats st = j->stats();
  EXPECT_GT(st.segments_deleted, 0u);
  EXPECT_LE(st.bytes, o.max_bytes + o.segment_bytes);
  std::vector<Watermark> marks;
  std::vector<JournalEntry> entries = ReadAll(&marks);
  EXPECT_LT(entries.size(), 60u);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.back().seq, 60u);  // the newest survive
}

TEST_F(JournalTest, StopModeRefusesPastTheBoundWithoutLosingData) {
  JournalOptions o = Options();
  o.max_bytes = 3000;
  o.when_full = JournalOptions::WhenFull::kStop;
  auto j = Open(o);
  uint64_t seq = 1;
  while (seq < 100 && AppendDurableWithin(*j, seq)) ++seq;
  EXPECT_LT(seq, 100u) << "the journal never filled";
  JournalStats st = j->stats();
  EXPECT_FALSE(st.healthy);
  EXPECT_GT(st.write_errors, 0u);
  EXPECT_NE(st.last_error.find("journal full"), std::string::npos) << st.last_error;
  EXPECT_EQ(st.pending_records, 1u);  // kept, not dropped
  j.reset();
  // What was acknowledged is all there, once.
  std::vector<JournalEntry> entries = ReadAll();
  EXPECT_EQ(entries.size(), seq - 1);
}

TEST_F(JournalTest, FullDiskStopsCommitsAndResumesWhenSpaceReturns) {
  FaultJournalFileSystem fs;
  JournalOptions o = Options();
  o.fs = &fs;
  auto j = Open(o);
  ASSERT_TRUE(AppendDurable(*j, "a", 1, 1, CollectivesMsg(1, 1, 1)));
  fs.FailWrites(absl::ResourceExhaustedError("write: No space left on device"));
  auto done = std::make_shared<absl::Notification>();
  ASSERT_TRUE(
      j->Append("a", 1, 2, absl::Now(), CollectivesMsg(2, 2, 1), [done] { done->Notify(); }).ok());
  EXPECT_FALSE(done->WaitForNotificationWithTimeout(absl::Milliseconds(300)));
  JournalStats st = j->stats();
  EXPECT_FALSE(st.healthy);
  EXPECT_GE(st.write_errors, 1u);
  EXPECT_EQ(st.pending_records, 1u);
  fs.Heal();
  EXPECT_TRUE(done->WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(j->stats().healthy);
  j.reset();
  std::vector<JournalEntry> entries = ReadAll();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].seq, 2u);
}

TEST_F(JournalTest, BacklogIsBounded) {
  FaultJournalFileSystem fs;
  JournalOptions o = Options();
  o.fs = &fs;
  o.max_pending_bytes = 4096;
  auto j = Open(o);
  fs.FailWrites(absl::ResourceExhaustedError("No space left on device"));
  int accepted = 0;
  absl::Status last;
  for (uint64_t seq = 1; seq <= 100; ++seq) {
    last = j->Append("a", 1, seq, absl::Now(), CollectivesMsg(seq, seq, 1, "h", 300), nullptr);
    if (!last.ok()) break;
    ++accepted;
  }
  EXPECT_TRUE(absl::IsResourceExhausted(last)) << last;
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 100);
  EXPECT_LE(j->stats().pending_bytes, 4096u);
  EXPECT_GT(j->stats().refused, 0u);
}

TEST_F(JournalTest, RecordWrittenTwiceIsReadOnce) {
  // A sync that fails after the data reached the disk: the retry writes the batch again into a new
  // segment. Replay must see each payload once.
  {
    auto j = Open(Options());
    ASSERT_TRUE(AppendDurable(*j, "a", 1, 1, CollectivesMsg(1, 1, 1)));
  }
  {
    auto j = Open(Options());
    ASSERT_TRUE(AppendDurable(*j, "a", 1, 1, CollectivesMsg(1, 1, 1)));
    ASSERT_TRUE(AppendDurable(*j, "a", 1, 2, CollectivesMsg(2, 2, 1)));
  }
  JournalReadStats st;
  std::vector<JournalEntry> entries = ReadAll(nullptr, &st);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(st.duplicates, 1u);
}

TEST_F(JournalTest, SecondProcessOnTheSameDirectoryIsRefused) {
  auto j = Open(Options());
  auto again = Journal::Open(Options(), nullptr, nullptr);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition) << again.status();
}

}  // namespace
}  // namespace ringside::daemon
