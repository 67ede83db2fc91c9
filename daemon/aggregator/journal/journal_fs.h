// The journal's only access to the operating system, in the manner of leveldb's Env: tests wrap it
// to fail writes (a full disk) or syncs without touching a real disk's limits.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_JOURNAL_JOURNAL_FS_H_
#define RINGSIDE_DAEMON_AGGREGATOR_JOURNAL_JOURNAL_FS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside::daemon {

class JournalFile {
 public:
  virtual ~JournalFile() = default;
  virtual absl::Status Append(absl::string_view data) = 0;
  virtual absl::Status Sync() = 0;  // fdatasync
  virtual absl::Status Close() = 0;
  // Cuts the file back to `size` bytes (after a failed write, to drop a torn frame).
  virtual absl::Status Truncate(uint64_t size) {
    (void)size;
    return absl::UnimplementedError("truncate not supported");
  }
};

// Held while a process uses a state directory (an flock, released by the kernel on kill -9).
class JournalDirLock {
 public:
  virtual ~JournalDirLock() = default;
};

class JournalFileSystem {
 public:
  virtual ~JournalFileSystem() = default;
  // Creates `path` (which must not exist) for appending.
  virtual absl::StatusOr<std::unique_ptr<JournalFile>> Create(const std::string& path) = 0;
  virtual absl::StatusOr<std::string> ReadAll(const std::string& path) = 0;
  // File names (not paths) in `dir`.
  virtual absl::StatusOr<std::vector<std::string>> List(const std::string& dir) = 0;
  virtual absl::StatusOr<uint64_t> Size(const std::string& path) = 0;
  virtual absl::Status Remove(const std::string& path) = 0;
  virtual absl::Status MakeDirs(const std::string& dir) = 0;
  // Makes the creation and removal of files in `dir` durable.
  virtual absl::Status SyncDir(const std::string& dir) = 0;
  // An exclusive lock on `path`; FailedPrecondition when another process holds it.
  virtual absl::StatusOr<std::unique_ptr<JournalDirLock>> Lock(const std::string& path) = 0;
};

// The real file system (POSIX). A process-wide instance; never deleted.
JournalFileSystem* DefaultJournalFileSystem();

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_JOURNAL_JOURNAL_FS_H_
