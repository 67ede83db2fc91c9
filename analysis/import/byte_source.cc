#include "analysis/import/byte_source.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringside::analysis {

absl::StatusOr<size_t> StringSource::Read(char* buf, size_t n) {
  size_t k = std::min(n, data_.size() - pos_);
  if (k > 0) std::memcpy(buf, data_.data() + pos_, k);
  pos_ += k;
  return k;
}

absl::StatusOr<std::string> ReadAll(ByteSource& src, size_t max_bytes) {
  std::string out;
  char buf[1 << 16];
  for (;;) {
    absl::StatusOr<size_t> n = src.Read(buf, sizeof(buf));
    if (!n.ok()) return n.status();
    if (*n == 0) return out;
    if (out.size() + *n > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("input is larger than the limit of ", max_bytes, " bytes"));
    }
    out.append(buf, *n);
  }
}

}  // namespace ringside::analysis
