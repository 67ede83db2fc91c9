#include "daemon/aggregator/journal/journal_format.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringside::daemon {
namespace {

constexpr std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : (c >> 1);
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrcTable = MakeCrcTable();

void PutU16(std::string* out, uint16_t v) {
  char b[2] = {static_cast<char>(v & 0xff), static_cast<char>(v >> 8)};
  out->append(b, 2);
}
void PutU32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 4);
}
void PutU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 8);
}

class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}
  bool U8(uint8_t* v) {
    if (data_.size() < 1) return false;
    *v = static_cast<uint8_t>(data_[0]);
    data_.remove_prefix(1);
    return true;
  }
  bool U16(uint16_t* v) {
    uint64_t x;
    if (!Fixed(2, &x)) return false;
    *v = static_cast<uint16_t>(x);
    return true;
  }
  bool U32(uint32_t* v) {
    uint64_t x;
    if (!Fixed(4, &x)) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  }
  bool U64(uint64_t* v) { return Fixed(8, v); }
  bool Bytes(size_t n, std::string* out) {
    if (data_.size() < n) return false;
    out->assign(data_.data(), n);
    data_.remove_prefix(n);
    return true;
  }
  bool empty() const { return data_.empty(); }

 private:
  bool Fixed(int n, uint64_t* v) {
    if (data_.size() < static_cast<size_t>(n)) return false;
    uint64_t x = 0;
    for (int i = 0; i < n; ++i)
      x |= static_cast<uint64_t>(static_cast<uint8_t>(data_[i])) << (8 * i);
    data_.remove_prefix(n);
    *v = x;
    return true;
  }
  absl::string_view data_;
};

}  // namespace

uint32_t Crc32c(absl::string_view data) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = kCrcTable[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

void EncodeJournalRecord(const JournalRecord& r, std::string* out) {
  std::string body;
  body.reserve(32 + r.node.size() + r.message.size());
  body.push_back(static_cast<char>(r.type));
  const size_t node_len = std::min<size_t>(r.node.size(), UINT16_MAX);
  PutU16(&body, static_cast<uint16_t>(node_len));
  body.append(r.node.data(), node_len);
  PutU64(&body, r.epoch);
  PutU64(&body, r.seq);
  if (r.type == JournalRecordType::kPayload) {
    PutU64(&body, static_cast<uint64_t>(r.received_unix_nanos));
    PutU32(&body, static_cast<uint32_t>(r.message.size()));
    body.append(r.message);
  }
  PutU32(out, static_cast<uint32_t>(body.size()));
  PutU32(out, Crc32c(body));
  out->append(body);
}

absl::Status DecodeJournalRecord(absl::string_view data, size_t* pos, JournalRecord* r) {
  if (*pos >= data.size()) return absl::OutOfRangeError("end of segment");
  absl::string_view rest = data.substr(*pos);
  Reader head(rest);
  uint32_t len = 0;
  uint32_t crc = 0;
  if (!head.U32(&len) || !head.U32(&crc)) {
    return absl::DataLossError(absl::StrCat("torn frame header at offset ", *pos));
  }
  if (len == 0 || len > kMaxJournalFrameBytes) {
    return absl::DataLossError(absl::StrCat("bad frame length ", len, " at offset ", *pos));
  }
  if (rest.size() - 8 < len) {
    return absl::DataLossError(absl::StrCat("torn frame at offset ", *pos, ": ", len,
                                            " bytes announced, ", rest.size() - 8, " present"));
  }
  absl::string_view body = rest.substr(8, len);
  if (Crc32c(body) != crc) {
    return absl::DataLossError(absl::StrCat("CRC mismatch at offset ", *pos));
  }
  Reader b(body);
  uint8_t type = 0;
  uint16_t node_len = 0;
  JournalRecord out;
  if (!b.U8(&type) || !b.U16(&node_len) || !b.Bytes(node_len, &out.node) || !b.U64(&out.epoch) ||
      !b.U64(&out.seq)) {
    return absl::DataLossError(absl::StrCat("short record at offset ", *pos));
  }
  if (type < 1 || type > 3) {
    return absl::DataLossError(absl::StrCat("unknown record type ", type, " at offset ", *pos));
  }
  out.type = static_cast<JournalRecordType>(type);
  if (out.type == JournalRecordType::kPayload) {
    uint64_t received = 0;
    uint32_t msg_len = 0;
    if (!b.U64(&received) || !b.U32(&msg_len) || !b.Bytes(msg_len, &out.message)) {
      return absl::DataLossError(absl::StrCat("short payload record at offset ", *pos));
    }
    out.received_unix_nanos = static_cast<int64_t>(received);
  }
  *r = std::move(out);
  *pos += 8 + len;
  return absl::OkStatus();
}

}  // namespace ringside::daemon
