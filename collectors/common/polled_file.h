// A file read once per sampling cycle. The descriptor stays open between cycles (sysfs produces a
// fresh value on every read at offset 0), so a cycle costs one pread per value instead of
// open+read+close. A failed read closes the descriptor; the next cycle opens the path again.
#ifndef RINGSIDE_COLLECTORS_COMMON_POLLED_FILE_H_
#define RINGSIDE_COLLECTORS_COMMON_POLLED_FILE_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "collectors/common/file_system.h"

namespace ringside::collectors {

class PolledFile {
 public:
  // Longest content accepted; a counter is at most 20 digits, state/rate lines are short.
  static constexpr size_t kMaxContent = 128;

  PolledFile(FileSystem* fs, std::string path) : fs_(fs), path_(std::move(path)) {}
  ~PolledFile() { Close(); }
  PolledFile(PolledFile&& other) noexcept
      : fs_(other.fs_), path_(std::move(other.path_)), fd_(other.fd_) {
    other.fd_ = -1;
  }
  PolledFile& operator=(PolledFile&&) = delete;
  PolledFile(const PolledFile&) = delete;
  PolledFile& operator=(const PolledFile&) = delete;

  // The file's content, in `buf` (at least kMaxContent + 1 bytes). DataLoss when the file is
  // longer than kMaxContent; the read error's status otherwise.
  absl::StatusOr<absl::string_view> Read(char* buf);

  const std::string& path() const { return path_; }
  void Close();

 private:
  FileSystem* fs_;
  std::string path_;
  int fd_ = -1;
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_COMMON_POLLED_FILE_H_
