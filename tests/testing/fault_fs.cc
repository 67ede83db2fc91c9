#include "tests/testing/fault_fs.h"

#include "absl/strings/match.h"

namespace ringside::testing {

absl::StatusOr<int> FaultFileSystem::Open(const std::string& path) {
  absl::StatusOr<int> fd = collectors::DefaultFileSystem()->Open(path);
  if (fd.ok()) {
    fd_paths_[*fd] = path;
    ++opens_;
  }
  return fd;
}

absl::StatusOr<size_t> FaultFileSystem::ReadAt0(int fd, char* buf, size_t cap) {
  auto it = fd_paths_.find(fd);
  if (it != fd_paths_.end()) {
    for (const auto& [suffix, status] : fail_) {
      if (absl::EndsWith(it->second, suffix)) return status;
    }
  }
  return collectors::DefaultFileSystem()->ReadAt0(fd, buf, cap);
}

void FaultFileSystem::Close(int fd) {
  fd_paths_.erase(fd);
  collectors::DefaultFileSystem()->Close(fd);
}

absl::StatusOr<std::vector<collectors::DirEntry>> FaultFileSystem::List(const std::string& path) {
  return collectors::DefaultFileSystem()->List(path);
}

absl::StatusOr<std::string> FaultFileSystem::ReadLink(const std::string& path) {
  return collectors::DefaultFileSystem()->ReadLink(path);
}

}  // namespace ringside::testing
