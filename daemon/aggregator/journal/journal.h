// The aggregator's durable journal (with --state-dir): an append-only log of every CollectiveBatch
// and LinkEvents payload received, with the (node, agent_epoch, seq) that identifies it, and
// checkpoints of the per-(node, agent_epoch) ack watermarks. It is what makes delivery exactly-once
// across a restart: an Ack never covers a payload before the payload is fsynced, and after a
// restart (even kill -9) the watermarks are restored, so a resent payload is recognised as a
// duplicate.
//
// Group commit: Append() queues a record and returns at once; one writer thread writes everything
// queued in one write() and one fdatasync(), then runs the records' callbacks, in append order.
//
// Segments: journal-<16-digit index>.log in the state dir, each starting with a header and a
// checkpoint of every watermark (so deleting an old segment never loses a watermark). A new
// segment is started at every open (never appending after a torn tail), when the current one
// reaches segment_bytes, and after a write error. The total is bounded by max_bytes: the oldest
// segments are deleted (when_full = kDeleteOldest), or writing stops as on a full disk (kStop).
//
// Failures: a failed write or sync (full disk, I/O error) keeps the batch queued, cuts the segment
// back to its last good frame (a segment that could not even be started is removed), and retries
// the batch in a new segment every retry_interval; nothing is acknowledged meanwhile, so agents
// keep buffering. Queued bytes are bounded by max_pending_bytes: past it Append() refuses
// (ResourceExhausted) and the caller refuses the message. Nothing here crashes the process.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_JOURNAL_JOURNAL_H_
#define RINGSIDE_DAEMON_AGGREGATOR_JOURNAL_JOURNAL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/aggregator/journal/journal_fs.h"
#include "daemon/common/steady_time.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::daemon {

// The highest sequence number received (and, for payloads, made durable) of one agent epoch.
struct Watermark {
  std::string node;
  uint64_t agent_epoch = 0;
  uint64_t seq = 0;
};

// One payload read back from the journal.
struct JournalEntry {
  std::string node;
  uint64_t agent_epoch = 0;
  uint64_t seq = 0;
  absl::Time received;
  v1::AgentMessage message;  // collectives or link_events
};

struct JournalReadStats {
  uint64_t segments = 0;
  uint64_t bytes = 0;
  uint64_t payloads = 0;             // payload records read (before dropping duplicates)
  uint64_t duplicates = 0;           // payload records at or below their epoch's watermark
  uint64_t corrupt_segments = 0;     // segments that ended in a torn or corrupt frame
  uint64_t unreadable_segments = 0;  // segments the file system would not read (EIO, ...)
  uint64_t unparsable_payloads = 0;  // frames intact but the message did not parse
  uint64_t unread_bytes = 0;         // after the bad frame of each corrupt segment, and unreadable
  // One line per corrupt or unreadable segment: its name, what was wrong (at which offset), the
  // bytes not read.
  std::vector<std::string> damage;
};

// Reads every segment of `dir` in order and calls `visit` for each payload once (a record written
// twice, after a failed sync, is visited once). A segment that cannot be read (an I/O error) is
// skipped and counted, as a damaged one is: the rest of the journal is still read. `watermarks`
// (optional) receives the restored watermark of every (node, agent_epoch): the highest of its
// checkpoints and payloads.
absl::Status ReadJournal(const std::string& dir, JournalFileSystem* fs,
                         const std::function<void(const JournalEntry&)>& visit,
                         std::vector<Watermark>* watermarks = nullptr,
                         JournalReadStats* stats = nullptr);

struct JournalOptions {
  std::string dir;
  uint64_t segment_bytes = 64ull << 20;
  uint64_t max_bytes = 1ull << 30;
  enum class WhenFull { kDeleteOldest, kStop };
  WhenFull when_full = WhenFull::kDeleteOldest;
  uint64_t max_pending_bytes = 64ull << 20;
  absl::Duration retry_interval = absl::Seconds(1);
  JournalFileSystem* fs = nullptr;  // nullptr: the real file system
  // The current watermarks, for the checkpoint at the start of each segment and at Close(). Called
  // on the writer thread with no journal lock held. Each must be at or below every payload of its
  // epoch that is not yet durable.
  std::function<std::vector<Watermark>()> watermarks;
  std::function<void(const std::string&)> log;
};

struct JournalStats {
  uint64_t bytes = 0;  // on disk, all segments
  uint64_t segments = 0;
  uint64_t records_written = 0;   // payload records made durable
  uint64_t commits = 0;           // successful write+sync rounds
  uint64_t write_errors = 0;      // failed write or sync rounds
  uint64_t segments_deleted = 0;  // by retention
  uint64_t refused = 0;           // appends refused (backlog full or closed)
  uint64_t pending_bytes = 0;
  uint64_t pending_records = 0;
  bool healthy = true;  // the last write succeeded
  std::string last_error;
};

class Journal {
 public:
  using DoneFn = std::function<void()>;

  // Replays `options.dir` (creating it if needed): `replay` sees each stored payload once, and
  // `restored` receives the watermarks. Then starts the writer thread on a new segment.
  static absl::StatusOr<std::unique_ptr<Journal>> Open(
      JournalOptions options, const std::function<void(const JournalEntry&)>& replay,
      std::vector<Watermark>* restored, JournalReadStats* read_stats = nullptr);

  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Queues a payload; `done` runs on the writer thread once it is durable (never if the process
  // stops first). ResourceExhausted when max_pending_bytes are queued; FailedPrecondition after
  // Close().
  absl::Status Append(const std::string& node, uint64_t agent_epoch, uint64_t seq,
                      absl::Time received, const v1::AgentMessage& message, DoneFn done)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Writes what is queued (if the disk allows), a final checkpoint, and stops the writer.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  JournalStats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  const JournalOptions& options() const { return options_; }

 private:
  struct Pending {
    std::string frame;
    DoneFn done;
  };
  struct Segment {
    uint64_t index = 0;
    uint64_t bytes = 0;
  };

  explicit Journal(JournalOptions options);
  void Run();
  // Writer-thread only (no lock held):
  absl::Status WriteBatch(const std::deque<Pending>& batch);
  absl::Status StartSegment();
  absl::Status WriteCheckpoint(std::string* frames);
  void ApplyRetention();
  void RecountAfterFailure();
  std::string SegmentPath(uint64_t index) const;
  void Log(const std::string& message) const;

  const JournalOptions options_;
  JournalFileSystem* const fs_;
  std::unique_ptr<JournalDirLock> lock_;

  // Writer-thread state.
  std::vector<Watermark> initial_marks_;  // restored at Open: part of the first checkpoint
  std::unique_ptr<JournalFile> file_;
  uint64_t file_good_bytes_ = 0;  // bytes of file_ known written and synced
  bool file_broken_ = false;
  uint64_t next_index_ = 1;
  absl::Time last_error_log_ = absl::InfinitePast();

  mutable absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<Segment> segments_ ABSL_GUARDED_BY(mu_);  // oldest first; the last is current
  JournalStats stats_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // SteadyNow()
  SteadyCondVar stop_cv_;  // wakes the retry wait when stop_ is set
  std::thread writer_;
};

// The name of segment `index` ("journal-0000000000000001.log").
std::string JournalSegmentName(uint64_t index);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_JOURNAL_JOURNAL_H_
