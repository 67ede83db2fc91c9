// All file-system access of the collectors goes through FileSystem, so tests can point a
// collector at a generated tree (RealFileSystem rooted anywhere) or inject faults (a wrapper that
// fails chosen reads), in the manner of leveldb's Env.
#ifndef RINGSIDE_COLLECTORS_COMMON_FILE_SYSTEM_H_
#define RINGSIDE_COLLECTORS_COMMON_FILE_SYSTEM_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringside::collectors {

struct DirEntry {
  std::string name;
  uint64_t inode = 0;  // lets a caller notice a folder that was removed and made again
  bool is_dir = false; // a directory, or a symbolic link (sysfs class entries are links)
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Opens a file for reading; returns a descriptor owned by the caller (Close it).
  virtual absl::StatusOr<int> Open(const std::string& path) = 0;
  // Reads up to `cap` bytes at offset 0. Sysfs regenerates an attribute on every read at offset
  // 0, so one open descriptor serves every cycle.
  virtual absl::StatusOr<size_t> ReadAt0(int fd, char* buf, size_t cap) = 0;
  virtual void Close(int fd) = 0;
  // Entries of a directory, without "." and "..". NotFound when it does not exist.
  virtual absl::StatusOr<std::vector<DirEntry>> List(const std::string& path) = 0;
  // The target of a symbolic link. NotFound when there is none.
  virtual absl::StatusOr<std::string> ReadLink(const std::string& path) = 0;

  // Whole small file in one call (open, read, close), for attributes read once per discovery.
  absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t cap = 4096);
};

// The regular files (not folders) of a directory, sorted by name; empty when it cannot be listed.
std::vector<DirEntry> ListFilesSorted(FileSystem* fs, const std::string& dir);

// The real thing: POSIX calls.
FileSystem* DefaultFileSystem();

// Maps an errno from a read or open to a canonical status that names the path.
absl::Status ErrnoStatus(int err, absl::string_view op, absl::string_view path);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_COMMON_FILE_SYSTEM_H_
