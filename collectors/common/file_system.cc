#include "collectors/common/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringside::collectors {

absl::Status ErrnoStatus(int err, absl::string_view op, absl::string_view path) {
  std::string msg = absl::StrCat(op, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENODEV:
    case ENXIO:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EINVAL:
    case EISDIR:
      return absl::InvalidArgumentError(msg);
    case EOPNOTSUPP:
    case ENOSYS:
      return absl::UnimplementedError(msg);
    case EAGAIN:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::StatusOr<std::string> FileSystem::ReadSmallFile(const std::string& path, size_t cap) {
  absl::StatusOr<int> fd = Open(path);
  if (!fd.ok()) return fd.status();
  std::string buf(cap, '\0');
  absl::StatusOr<size_t> n = ReadAt0(*fd, buf.data(), buf.size());
  Close(*fd);
  if (!n.ok()) return n.status();
  buf.resize(*n);
  return buf;
}

std::vector<DirEntry> ListFilesSorted(FileSystem* fs, const std::string& dir) {
  absl::StatusOr<std::vector<DirEntry>> entries = fs->List(dir);
  std::vector<DirEntry> files;
  if (!entries.ok()) return files;
  for (DirEntry& e : *entries) {
    if (!e.is_dir) files.push_back(std::move(e));
  }
  std::sort(files.begin(), files.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return files;
}

namespace {

class RealFileSystem final : public FileSystem {
 public:
  absl::StatusOr<int> Open(const std::string& path) override {
    // O_NONBLOCK: a FIFO or device planted in a tree must not hang a sampling cycle.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return ErrnoStatus(errno, "open", path);
    return fd;
  }

  absl::StatusOr<size_t> ReadAt0(int fd, char* buf, size_t cap) override {
    for (;;) {
      ssize_t n = ::pread(fd, buf, cap, 0);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "read", "fd");
    }
  }

  void Close(int fd) override { ::close(fd); }

  absl::StatusOr<std::vector<DirEntry>> List(const std::string& path) override {
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) return ErrnoStatus(errno, "opendir", path);
    std::vector<DirEntry> out;
    while (struct dirent* e = ::readdir(dir)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      DirEntry entry;
      entry.name = e->d_name;
      entry.inode = e->d_ino;
      if (e->d_type == DT_DIR) {
        entry.is_dir = true;
      } else if (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) {
        struct stat st;
        std::string full = path + "/" + e->d_name;
        if (::stat(full.c_str(), &st) == 0) {
          entry.is_dir = S_ISDIR(st.st_mode);
          entry.inode = st.st_ino;  // the target's inode: a re-created device gets a new one
        }
      }
      out.push_back(std::move(entry));
    }
    ::closedir(dir);
    return out;
  }

  absl::StatusOr<std::string> ReadLink(const std::string& path) override {
    char buf[4096];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf) - 1);
    if (n < 0) return ErrnoStatus(errno, "readlink", path);
    return std::string(buf, static_cast<size_t>(n));
  }
};

}  // namespace

FileSystem* DefaultFileSystem() {
  static RealFileSystem* fs = new RealFileSystem();
  return fs;
}

}  // namespace ringside::collectors
