// JournalSegment: the aggregator's journal recovery (ReadJournal) of segment files holding
// arbitrary bytes, through an in-memory file system, and the frame decoder on the same bytes.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "daemon/aggregator/journal/journal.h"
#include "daemon/aggregator/journal/journal_format.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"

namespace ringside::fuzz {
namespace {

namespace d = ringside::daemon;

// Read-only files in memory; everything else is refused (recovery must not write).
class MemoryFs final : public d::JournalFileSystem {
 public:
  std::map<std::string, std::string> files;  // name → bytes, all in dir "/j"

  absl::StatusOr<std::unique_ptr<d::JournalFile>> Create(const std::string&) override {
    FUZZ_CHECK(false && "recovery created a file");
    return absl::UnimplementedError("read-only");
  }
  absl::StatusOr<std::string> ReadAll(const std::string& path) override {
    FUZZ_CHECK(absl::StartsWith(path, "/j/"));
    auto it = files.find(path.substr(3));
    if (it == files.end()) return absl::NotFoundError(path);
    return it->second;
  }
  absl::StatusOr<std::vector<std::string>> List(const std::string& dir) override {
    FUZZ_CHECK(dir == "/j");
    std::vector<std::string> names;
    for (const auto& [name, bytes] : files) names.push_back(name);
    names.push_back("LOCK");
    names.push_back("journal-xyz.log");  // not a segment: skipped
    return names;
  }
  absl::StatusOr<uint64_t> Size(const std::string& path) override {
    absl::StatusOr<std::string> s = ReadAll(path);
    if (!s.ok()) return s.status();
    return s->size();
  }
  absl::Status Remove(const std::string&) override { return absl::UnimplementedError("read-only"); }
  absl::Status MakeDirs(const std::string&) override { return absl::OkStatus(); }
  absl::Status SyncDir(const std::string&) override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<d::JournalDirLock>> Lock(const std::string&) override {
    return absl::UnimplementedError("read-only");
  }
};

// Rewrites each frame's CRC to match its body, as far as the frames' lengths chain.
void FixCrcs(std::string& s) {
  size_t pos = 0;
  while (pos + 8 <= s.size()) {
    uint32_t len = 0;
    for (int i = 0; i < 4; ++i) len |= static_cast<uint32_t>(static_cast<uint8_t>(s[pos + i])) << (8 * i);
    if (len == 0 || len > s.size() - pos - 8) return;
    const uint32_t crc = d::Crc32c(absl::string_view(s).substr(pos + 8, len));
    for (int i = 0; i < 4; ++i) s[pos + 4 + i] = static_cast<char>(crc >> (8 * i));
    pos += 8 + len;
  }
}

// The frame decoder on one segment: each decoded record re-encodes to a prefix of its frame
// (a body may carry trailing bytes the decoder ignores); decoding stops at the first error.
void CheckFrames(absl::string_view seg) {
  size_t pos = 0;
  d::JournalRecord rec;
  for (;;) {
    const size_t at = pos;
    const absl::Status s = d::DecodeJournalRecord(seg, &pos, &rec);
    if (!s.ok()) {
      FUZZ_CHECK(absl::IsOutOfRange(s) || absl::IsDataLoss(s));
      FUZZ_CHECK(pos == at);
      if (absl::IsOutOfRange(s)) FUZZ_CHECK(at == seg.size());
      return;
    }
    FUZZ_CHECK(pos > at && pos <= seg.size());
    std::string again;
    d::EncodeJournalRecord(rec, &again);
    FUZZ_CHECK(again.size() <= pos - at);
    // Same body (after the length and CRC words, which differ when the frame had trailing bytes).
    FUZZ_CHECK(absl::string_view(again).substr(8) == seg.substr(at + 8, again.size() - 8));
  }
}

}  // namespace

bool JournalSegment(const uint8_t* data, size_t size) {
  if (size == 0) return false;
  const uint8_t flags = data[0];
  std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  MemoryFs fs;
  std::vector<std::string> segs;
  if (flags & 2) {
    segs.push_back(rest.substr(0, rest.size() / 2));
    segs.push_back(rest.substr(rest.size() / 2));
  } else {
    segs.push_back(rest);
  }
  uint64_t total = 0;
  for (size_t i = 0; i < segs.size(); ++i) {
    if (flags & 1) FixCrcs(segs[i]);
    CheckFrames(segs[i]);
    total += segs[i].size();
    fs.files[d::JournalSegmentName(7 + i)] = segs[i];
  }

  std::map<std::pair<std::string, uint64_t>, uint64_t> last_seq;
  uint64_t visited = 0;
  std::vector<d::Watermark> marks;
  d::JournalReadStats st;
  const absl::Status s = d::ReadJournal(
      "/j", &fs,
      [&](const d::JournalEntry& e) {
        ++visited;
        FUZZ_CHECK(e.seq > 0);
        uint64_t& last = last_seq[{e.node, e.agent_epoch}];
        FUZZ_CHECK(e.seq > last);  // each payload once, in order within its epoch
        last = e.seq;
      },
      &marks, &st);
  FUZZ_CHECK(s.ok());  // the files are all there: damage is counted, not an error
  FUZZ_CHECK(st.segments == segs.size());
  FUZZ_CHECK(st.bytes == total);
  FUZZ_CHECK(st.corrupt_segments <= st.segments);
  FUZZ_CHECK(st.payloads == visited + st.duplicates + st.unparsable_payloads);
  // Every visited payload is covered by the restored watermark of its epoch, so a resent copy
  // after the restart is taken for the duplicate it is.
  std::map<std::pair<std::string, uint64_t>, uint64_t> restored;
  for (const d::Watermark& m : marks) {
    FUZZ_CHECK(m.seq > 0);
    FUZZ_CHECK(restored.emplace(std::make_pair(m.node, m.agent_epoch), m.seq).second);
  }
  for (const auto& [key, seq] : last_seq) {
    auto it = restored.find(key);
    FUZZ_CHECK(it != restored.end() && it->second >= seq);
  }
  return st.corrupt_segments == 0 && st.unparsable_payloads == 0;
}

}  // namespace ringside::fuzz
