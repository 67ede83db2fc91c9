#include "daemon/aggregator/journal/journal.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "daemon/aggregator/journal/journal_format.h"
#include "daemon/common/steady_time.h"

namespace ringside::daemon {
namespace {

constexpr absl::string_view kSegmentPrefix = "journal-";
constexpr absl::string_view kSegmentSuffix = ".log";
constexpr absl::string_view kLockName = "LOCK";

// Segment indexes in `dir`, ascending.
absl::StatusOr<std::vector<uint64_t>> ListSegments(JournalFileSystem* fs, const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = fs->List(dir);
  if (!names.ok()) return names.status();
  std::vector<uint64_t> out;
  for (const std::string& name : *names) {
    if (!absl::StartsWith(name, kSegmentPrefix) || !absl::EndsWith(name, kSegmentSuffix)) continue;
    absl::string_view digits = absl::string_view(name).substr(
        kSegmentPrefix.size(), name.size() - kSegmentPrefix.size() - kSegmentSuffix.size());
    uint64_t index = 0;
    if (absl::SimpleAtoi(digits, &index)) out.push_back(index);
  }
  std::sort(out.begin(), out.end());
  return out;
}

using EpochKey = std::pair<std::string, uint64_t>;

}  // namespace

std::string JournalSegmentName(uint64_t index) {
  return absl::StrFormat("%s%016d%s", kSegmentPrefix, index, kSegmentSuffix);
}

absl::Status ReadJournal(const std::string& dir, JournalFileSystem* fs,
                         const std::function<void(const JournalEntry&)>& visit,
                         std::vector<Watermark>* watermarks, JournalReadStats* stats) {
  if (fs == nullptr) fs = DefaultJournalFileSystem();
  JournalReadStats local;
  JournalReadStats& st = stats != nullptr ? *stats : local;
  absl::StatusOr<std::vector<uint64_t>> segments = ListSegments(fs, dir);
  if (!segments.ok()) return segments.status();
  std::map<EpochKey, uint64_t> marks;
  for (uint64_t index : *segments) {
    const std::string path = absl::StrCat(dir, "/", JournalSegmentName(index));
    absl::StatusOr<std::string> data = fs->ReadAll(path);
    if (absl::IsNotFound(data.status())) continue;  // deleted since the listing
    if (!data.ok()) {
      // A disk that returns errors for one file must not keep the aggregator down: what every
      // other segment holds is still read (as with a damaged frame).
      absl::StatusOr<uint64_t> size = fs->Size(path);
      ++st.unreadable_segments;
      if (size.ok()) st.unread_bytes += *size;
      st.damage.push_back(absl::StrCat(
          JournalSegmentName(index), ": could not be read (", data.status().message(), "); its ",
          size.ok() ? absl::StrCat(*size) : std::string("unknown number of"),
          " bytes are not replayed"));
      continue;
    }
    ++st.segments;
    st.bytes += data->size();
    size_t pos = 0;
    JournalRecord rec;
    for (;;) {
      absl::Status s = DecodeJournalRecord(*data, &pos, &rec);
      if (absl::IsOutOfRange(s)) break;
      if (!s.ok()) {
        // Replay stops here for this segment and goes on with the next: what this segment holds
        // after the bad frame is lost, what every other segment holds is not.
        ++st.corrupt_segments;
        st.unread_bytes += data->size() - pos;
        st.damage.push_back(absl::StrCat(JournalSegmentName(index), ": ", s.message(), "; the ",
                                         data->size() - pos,
                                         " bytes from there on are not read (a write torn by a "
                                         "crash, or damage)"));
        break;
      }
      if (rec.type == JournalRecordType::kHeader) continue;
      uint64_t& mark = marks[EpochKey(rec.node, rec.epoch)];
      if (rec.type == JournalRecordType::kWatermark) {
        mark = std::max(mark, rec.seq);
        continue;
      }
      ++st.payloads;
      if (rec.seq <= mark) {
        ++st.duplicates;
        continue;
      }
      mark = rec.seq;
      JournalEntry e;
      if (!e.message.ParseFromString(rec.message)) {
        ++st.unparsable_payloads;
        continue;
      }
      e.node = rec.node;
      e.agent_epoch = rec.epoch;
      e.seq = rec.seq;
      e.received = absl::FromUnixNanos(rec.received_unix_nanos);
      if (visit) visit(e);
    }
  }
  if (watermarks != nullptr) {
    watermarks->clear();
    for (const auto& [key, seq] : marks) {
      if (seq > 0) watermarks->push_back(Watermark{key.first, key.second, seq});
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------

Journal::Journal(JournalOptions options)
    : options_(std::move(options)),
      fs_(options_.fs != nullptr ? options_.fs : DefaultJournalFileSystem()) {}

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(
    JournalOptions options, const std::function<void(const JournalEntry&)>& replay,
    std::vector<Watermark>* restored, JournalReadStats* read_stats) {
  if (options.dir.empty()) return absl::InvalidArgumentError("journal: no directory");
  if (options.segment_bytes == 0 || options.max_bytes == 0) {
    return absl::InvalidArgumentError("journal: segment and maximum sizes must be positive");
  }
  if (options.when_full == JournalOptions::WhenFull::kDeleteOldest) {
    // Retention deletes whole segments: keep several within the bound.
    options.segment_bytes =
        std::max<uint64_t>(1, std::min(options.segment_bytes, options.max_bytes / 4));
  }
  std::unique_ptr<Journal> j(new Journal(std::move(options)));
  const std::string& dir = j->options_.dir;
  if (absl::Status s = j->fs_->MakeDirs(dir); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<JournalDirLock>> lock =
      j->fs_->Lock(absl::StrCat(dir, "/", kLockName));
  if (!lock.ok()) return lock.status();
  j->lock_ = std::move(*lock);

  std::vector<Watermark> marks;
  JournalReadStats local_stats;
  if (read_stats == nullptr) read_stats = &local_stats;
  if (absl::Status s = ReadJournal(dir, j->fs_, replay, &marks, read_stats); !s.ok()) return s;
  if (restored != nullptr) *restored = marks;
  j->initial_marks_ = std::move(marks);
  for (const std::string& d : read_stats->damage) j->Log(absl::StrCat("replay: ", d));

  absl::StatusOr<std::vector<uint64_t>> segments = ListSegments(j->fs_, dir);
  if (!segments.ok()) return segments.status();
  {
    absl::MutexLock l(&j->mu_);
    for (uint64_t index : *segments) {
      absl::StatusOr<uint64_t> size = j->fs_->Size(j->SegmentPath(index));
      Segment seg{index, size.ok() ? *size : 0};
      j->segments_.push_back(seg);
      j->stats_.bytes += seg.bytes;
    }
    j->stats_.segments = j->segments_.size();
  }
  j->next_index_ = segments->empty() ? 1 : segments->back() + 1;
  // The first segment of this run, with the restored watermarks as its checkpoint: the writer
  // starts on it, so a restart never appends after a torn tail.
  if (absl::Status s = j->StartSegment(); !s.ok()) {
    // A full or failing disk at startup: start anyway, refuse to acknowledge payloads until a
    // write succeeds (the writer retries with a new segment).
    j->file_broken_ = true;
    j->RecountAfterFailure();
    absl::MutexLock l(&j->mu_);
    ++j->stats_.write_errors;
    j->stats_.healthy = false;
    j->stats_.last_error = s.ToString();
    j->Log(absl::StrCat("cannot start a segment, will retry: ", s.ToString()));
  }
  j->writer_ = std::thread([p = j.get()] { p->Run(); });
  return j;
}

Journal::~Journal() { Close(); }

std::string Journal::SegmentPath(uint64_t index) const {
  return absl::StrCat(options_.dir, "/", JournalSegmentName(index));
}

void Journal::Log(const std::string& message) const {
  if (options_.log) options_.log(absl::StrCat("journal: ", message));
}

absl::Status Journal::Append(const std::string& node, uint64_t agent_epoch, uint64_t seq,
                             absl::Time received, const v1::AgentMessage& message, DoneFn done) {
  JournalRecord rec;
  rec.type = JournalRecordType::kPayload;
  rec.node = node;
  rec.epoch = agent_epoch;
  rec.seq = seq;
  rec.received_unix_nanos = absl::ToUnixNanos(received);
  if (!message.SerializeToString(&rec.message)) {
    return absl::InternalError("journal: cannot serialize the message");
  }
  Pending p;
  EncodeJournalRecord(rec, &p.frame);
  p.done = std::move(done);
  absl::MutexLock l(&mu_);
  if (closed_ || stop_) {
    ++stats_.refused;
    return absl::FailedPreconditionError("journal closed");
  }
  if (stats_.pending_bytes + p.frame.size() > options_.max_pending_bytes) {
    ++stats_.refused;
    return absl::ResourceExhaustedError(absl::StrCat(
        "journal backlog full: ", stats_.pending_bytes, " bytes waiting for the disk (",
        stats_.healthy ? "disk slow" : absl::StrCat("last error: ", stats_.last_error), ")"));
  }
  stats_.pending_bytes += p.frame.size();
  ++stats_.pending_records;
  queue_.push_back(std::move(p));
  return absl::OkStatus();
}

absl::Status Journal::WriteCheckpoint(std::string* frames) {
  std::vector<Watermark> marks = initial_marks_;
  if (options_.watermarks) {
    std::vector<Watermark> live = options_.watermarks();
    marks.insert(marks.end(), live.begin(), live.end());
  }
  for (const Watermark& w : marks) {
    if (w.seq == 0) continue;
    JournalRecord rec;
    rec.type = JournalRecordType::kWatermark;
    rec.node = w.node;
    rec.epoch = w.agent_epoch;
    rec.seq = w.seq;
    EncodeJournalRecord(rec, frames);
  }
  return absl::OkStatus();
}

absl::Status Journal::StartSegment() {
  if (file_) {
    (void)file_->Close();
    file_.reset();
  }
  const uint64_t index = next_index_++;
  const std::string path = SegmentPath(index);
  absl::StatusOr<std::unique_ptr<JournalFile>> f = fs_->Create(path);
  if (!f.ok()) return f.status();
  {
    absl::MutexLock l(&mu_);
    segments_.push_back(Segment{index, 0});
    stats_.segments = segments_.size();
  }
  std::string frames;
  JournalRecord header;
  header.type = JournalRecordType::kHeader;
  header.node = std::string(kJournalMagic);
  header.epoch = kJournalFormatVersion;
  header.seq = index;
  EncodeJournalRecord(header, &frames);
  (void)WriteCheckpoint(&frames);
  absl::Status s = (*f)->Append(frames);
  if (s.ok()) s = (*f)->Sync();
  if (s.ok()) s = fs_->SyncDir(options_.dir);
  {
    absl::MutexLock l(&mu_);
    // Count what may have reached the disk even on failure; RecountAfterFailure corrects it.
    segments_.back().bytes += frames.size();
    stats_.bytes += frames.size();
  }
  if (!s.ok()) {
    // Nothing of this segment is needed (the previous ones hold every watermark): remove it, so
    // that retries on a full disk do not leave a trail of empty or torn segments.
    (void)(*f)->Close();
    if (fs_->Remove(path).ok()) (void)fs_->SyncDir(options_.dir);
    return s;
  }
  file_ = std::move(*f);
  file_good_bytes_ = frames.size();
  file_broken_ = false;
  initial_marks_.clear();
  ApplyRetention();
  return absl::OkStatus();
}

void Journal::ApplyRetention() {
  if (options_.when_full != JournalOptions::WhenFull::kDeleteOldest) return;
  std::vector<uint64_t> remove;
  {
    absl::MutexLock l(&mu_);
    while (segments_.size() > 1 && stats_.bytes > options_.max_bytes) {
      remove.push_back(segments_.front().index);
      stats_.bytes -= std::min(stats_.bytes, segments_.front().bytes);
      segments_.pop_front();
      ++stats_.segments_deleted;
    }
    stats_.segments = segments_.size();
  }
  for (uint64_t index : remove) {
    if (absl::Status s = fs_->Remove(SegmentPath(index)); !s.ok() && !absl::IsNotFound(s)) {
      Log(absl::StrCat("cannot delete old segment: ", s.ToString()));
    }
  }
  if (!remove.empty()) (void)fs_->SyncDir(options_.dir);
}

void Journal::RecountAfterFailure() {
  // After a failed write the sizes we counted may be wrong, and in kStop mode an operator may have
  // freed space by deleting segments: ask the file system.
  absl::MutexLock l(&mu_);
  uint64_t total = 0;
  std::deque<Segment> kept;
  for (Segment seg : segments_) {
    absl::StatusOr<uint64_t> size = fs_->Size(SegmentPath(seg.index));
    if (!size.ok()) continue;
    seg.bytes = *size;
    total += seg.bytes;
    kept.push_back(seg);
  }
  segments_ = std::move(kept);
  stats_.bytes = total;
  stats_.segments = segments_.size();
}

absl::Status Journal::WriteBatch(const std::deque<Pending>& batch) {
  uint64_t batch_bytes = 0;
  for (const Pending& p : batch) batch_bytes += p.frame.size();
  uint64_t current_bytes = 0;
  uint64_t total_bytes = 0;
  {
    absl::MutexLock l(&mu_);
    current_bytes = segments_.empty() ? 0 : segments_.back().bytes;
    total_bytes = stats_.bytes;
  }
  if (options_.when_full == JournalOptions::WhenFull::kStop &&
      total_bytes + batch_bytes > options_.max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("journal full: ", total_bytes, " bytes stored, ", batch_bytes,
                     " more would pass --journal-max-bytes=", options_.max_bytes));
  }
  if (!file_ || file_broken_ || current_bytes >= options_.segment_bytes) {
    if (absl::Status s = StartSegment(); !s.ok()) {
      file_broken_ = true;
      return s;
    }
  }
  std::string buf;
  buf.reserve(batch_bytes);
  for (const Pending& p : batch) buf.append(p.frame);
  absl::Status s = file_->Append(buf);
  if (s.ok()) s = file_->Sync();
  {
    absl::MutexLock l(&mu_);
    segments_.back().bytes += buf.size();
    stats_.bytes += buf.size();
  }
  if (s.ok()) {
    file_good_bytes_ += buf.size();
    return s;
  }
  // What reached the disk is unknown: cut the segment back to its last good frame (so a restart
  // finds no torn frame to report), and retry in a new segment.
  file_broken_ = true;
  absl::Status cut = file_->Truncate(file_good_bytes_);
  if (cut.ok()) cut = file_->Sync();
  if (!cut.ok()) Log(absl::StrCat("cannot cut back the failed write: ", cut.ToString()));
  return s;
}

void Journal::Run() {
  for (;;) {
    std::deque<Pending> batch;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || (!queue_.empty() && SteadyNow() >= retry_at_);
      };
      while (!ready()) {
        if (queue_.empty()) {
          mu_.Await(absl::Condition(&ready));  // an Enqueue's unlock wakes it
        } else {
          // Waiting to retry, on the monotonic clock (a step back of the wall clock must not
          // hold the retry, and every acknowledgement with it, for the step's length).
          stop_cv_.AwaitWithTimeout(mu_, ready, retry_at_ - SteadyNow());
        }
      }
      if (queue_.empty() && stop_) break;
      if (stop_ && !stats_.healthy && SteadyNow() < retry_at_) break;  // give up at shutdown
      batch.swap(queue_);
    }
    absl::Status s = WriteBatch(batch);
    if (s.ok()) {
      uint64_t bytes = 0;
      for (const Pending& p : batch) bytes += p.frame.size();
      {
        absl::MutexLock l(&mu_);
        stats_.pending_bytes -= std::min(stats_.pending_bytes, bytes);
        stats_.pending_records -= std::min<uint64_t>(stats_.pending_records, batch.size());
        stats_.records_written += batch.size();
        ++stats_.commits;
        if (!stats_.healthy) Log("writing again");
        stats_.healthy = true;
        stats_.last_error.clear();
        retry_at_ = absl::InfinitePast();
      }
      for (Pending& p : batch) {
        if (p.done) p.done();
      }
      continue;
    }
    RecountAfterFailure();
    const absl::Time now = absl::Now();
    {
      absl::MutexLock l(&mu_);
      ++stats_.write_errors;
      stats_.healthy = false;
      stats_.last_error = s.ToString();
      retry_at_ = SteadyNow() + options_.retry_interval;
      // Back at the front, in order: the retry writes them again, into a new segment.
      for (auto it = batch.rbegin(); it != batch.rend(); ++it) queue_.push_front(std::move(*it));
    }
    if (now - last_error_log_ >= absl::Seconds(10)) {
      last_error_log_ = now;
      Log(absl::StrCat("write failed, not acknowledging until it succeeds (retry every ",
                       absl::FormatDuration(options_.retry_interval), "): ", s.ToString()));
    }
  }
  // A final checkpoint, so that a clean restart restores exact watermarks.
  bool healthy;
  {
    absl::MutexLock l(&mu_);
    healthy = stats_.healthy && queue_.empty();
  }
  if (healthy && file_ && !file_broken_) {
    std::string frames;
    (void)WriteCheckpoint(&frames);
    if (!frames.empty()) {
      absl::Status s = file_->Append(frames);
      if (s.ok()) s = file_->Sync();
      absl::MutexLock l(&mu_);
      if (!segments_.empty()) segments_.back().bytes += frames.size();
      stats_.bytes += frames.size();
    }
  }
  if (file_) (void)file_->Close();
  file_.reset();
}

void Journal::Close() {
  {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    closed_ = true;
    stop_ = true;
  }
  stop_cv_.Notify();
  if (writer_.joinable()) writer_.join();
}

JournalStats Journal::stats() const {
  absl::MutexLock l(&mu_);
  return stats_;
}

}  // namespace ringside::daemon
