#include "daemon/aggregator/journal/journal_fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringside::daemon {
namespace {

absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path) {
  const std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EWOULDBLOCK:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::InternalError(msg);
  }
}

class PosixFile final : public JournalFile {
 public:
  PosixFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixFile() override { (void)Close(); }

  absl::Status Append(absl::string_view data) override {
    if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, "write", path_);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
    if (::fdatasync(fd_) != 0) return ErrnoStatus(errno, "fdatasync", path_);
    return absl::OkStatus();
  }
  absl::Status Truncate(uint64_t size) override {
    if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " is closed"));
    while (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      if (errno != EINTR) return ErrnoStatus(errno, "truncate", path_);
    }
    return absl::OkStatus();
  }
  absl::Status Close() override {
    if (fd_ < 0) return absl::OkStatus();
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return ErrnoStatus(errno, "close", path_);
    return absl::OkStatus();
  }

 private:
  int fd_;
  std::string path_;
};

class PosixLock final : public JournalDirLock {
 public:
  explicit PosixLock(int fd) : fd_(fd) {}
  ~PosixLock() override {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }

 private:
  int fd_;
};

class PosixFileSystem final : public JournalFileSystem {
 public:
  absl::StatusOr<std::unique_ptr<JournalFile>> Create(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0) return ErrnoStatus(errno, "create", path);
    return std::make_unique<PosixFile>(fd, path);
  }

  absl::StatusOr<std::string> ReadAll(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "open", path);
    std::string out;
    char buf[1 << 16];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::close(fd);
        return ErrnoStatus(err, "read", path);
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }

  absl::StatusOr<std::vector<std::string>> List(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus(errno, "list", dir);
    std::vector<std::string> out;
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(std::move(name));
    }
    ::closedir(d);
    return out;
  }

  absl::StatusOr<uint64_t> Size(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "stat", path);
    return static_cast<uint64_t>(st.st_size);
  }

  absl::Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus(errno, "remove", path);
    return absl::OkStatus();
  }

  absl::Status MakeDirs(const std::string& dir) override {
    if (dir.empty()) return absl::InvalidArgumentError("empty directory name");
    std::string partial;
    size_t pos = 0;
    while (pos != std::string::npos) {
      pos = dir.find('/', pos + 1);
      partial = dir.substr(0, pos);
      if (partial.empty()) continue;
      if (::mkdir(partial.c_str(), 0750) != 0 && errno != EEXIST) {
        return ErrnoStatus(errno, "mkdir", partial);
      }
    }
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) return ErrnoStatus(errno, "stat", dir);
    if (!S_ISDIR(st.st_mode)) return absl::FailedPreconditionError(dir + " is not a directory");
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "open", dir);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return ErrnoStatus(err, "fsync", dir);
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<JournalDirLock>> Lock(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) return ErrnoStatus(errno, "open", path);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) {
        return absl::FailedPreconditionError(
            absl::StrCat(path, " is locked: another ringside-aggregator uses this --state-dir"));
      }
      return ErrnoStatus(err, "flock", path);
    }
    return std::make_unique<PosixLock>(fd);
  }
};

}  // namespace

JournalFileSystem* DefaultJournalFileSystem() {
  static JournalFileSystem* fs = new PosixFileSystem();
  return fs;
}

}  // namespace ringside::daemon
