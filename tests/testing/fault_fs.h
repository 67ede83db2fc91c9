// A FileSystem that passes through to the real one but fails chosen paths with a chosen status,
// in the manner of leveldb's ErrorEnv: an unreadable counter file without needing permissions
// (tests run as root, who reads anything).
#ifndef RINGSIDE_TESTS_TESTING_FAULT_FS_H_
#define RINGSIDE_TESTS_TESTING_FAULT_FS_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "collectors/common/file_system.h"

namespace ringside::testing {

class FaultFileSystem final : public collectors::FileSystem {
 public:
  // Reads of a path ending in `suffix` fail with `status` (opens succeed, as on sysfs where the
  // error comes from the attribute's show()).
  void FailReads(std::string suffix, absl::Status status) { fail_[std::move(suffix)] = status; }
  void Clear() { fail_.clear(); }
  int opens() const { return opens_; }

  absl::StatusOr<int> Open(const std::string& path) override;
  absl::StatusOr<size_t> ReadAt0(int fd, char* buf, size_t cap) override;
  void Close(int fd) override;
  absl::StatusOr<std::vector<collectors::DirEntry>> List(const std::string& path) override;
  absl::StatusOr<std::string> ReadLink(const std::string& path) override;

 private:
  std::map<std::string, absl::Status> fail_;
  std::map<int, std::string> fd_paths_;
  int opens_ = 0;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_FAULT_FS_H_
