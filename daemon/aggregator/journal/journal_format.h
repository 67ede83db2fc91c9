// The journal's on-disk records. A segment file is a sequence of frames:
//
//   u32 length (little-endian) of type+body │ u32 CRC-32C of type+body │ u8 type │ body
//
// Bodies (integers little-endian):
//   header     (1): u16 len, "ringside-journal" │ u64 format version (1) │ u64 segment index
//   watermark  (2): u16 len, node │ u64 agent_epoch │ u64 seq
//   payload    (3): u16 len, node │ u64 agent_epoch │ u64 seq │ i64 received unix ns │
//                   u32 len, the serialized ringside.v1.AgentMessage (CollectiveBatch or
//                   LinkEvents)
//
// A frame whose length runs past the end of the file, or whose CRC does not match, ends the
// segment (a torn write at a crash): what follows it is not read.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_JOURNAL_JOURNAL_FORMAT_H_
#define RINGSIDE_DAEMON_AGGREGATOR_JOURNAL_JOURNAL_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringside::daemon {

enum class JournalRecordType : uint8_t { kHeader = 1, kWatermark = 2, kPayload = 3 };

inline constexpr absl::string_view kJournalMagic = "ringside-journal";
inline constexpr uint64_t kJournalFormatVersion = 1;
// Larger frames are taken as corruption.
inline constexpr uint32_t kMaxJournalFrameBytes = 256u << 20;

struct JournalRecord {
  JournalRecordType type = JournalRecordType::kPayload;
  std::string node;    // the magic for a header
  uint64_t epoch = 0;  // the format version for a header
  uint64_t seq = 0;    // the segment index for a header
  int64_t received_unix_nanos = 0;
  std::string message;  // payload only
};

// Appends the record's frame to `out`.
void EncodeJournalRecord(const JournalRecord& record, std::string* out);

// Decodes the frame at data[*pos] and advances *pos. OutOfRange at the clean end of `data`;
// DataLoss for a torn or corrupt frame (with what was wrong).
absl::Status DecodeJournalRecord(absl::string_view data, size_t* pos, JournalRecord* record);

// CRC-32C (Castagnoli), as used by ext4, iSCSI and leveldb.
uint32_t Crc32c(absl::string_view data);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_JOURNAL_JOURNAL_FORMAT_H_
