#include "collectors/common/polled_file.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringside::collectors {

absl::StatusOr<absl::string_view> PolledFile::Read(char* buf) {
  if (fd_ < 0) {
    absl::StatusOr<int> fd = fs_->Open(path_);
    if (!fd.ok()) return fd.status();
    fd_ = *fd;
  }
  absl::StatusOr<size_t> n = fs_->ReadAt0(fd_, buf, kMaxContent + 1);
  if (!n.ok()) {
    Close();
    return absl::Status(n.status().code(), absl::StrCat(path_, ": ", n.status().message()));
  }
  if (*n > kMaxContent) {
    return absl::DataLossError(
        absl::StrCat(path_, ": longer than ", kMaxContent, " bytes, not a counter"));
  }
  return absl::string_view(buf, *n);
}

void PolledFile::Close() {
  if (fd_ >= 0) {
    fs_->Close(fd_);
    fd_ = -1;
  }
}

}  // namespace ringside::collectors
