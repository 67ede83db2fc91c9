#include "daemon/ctl/file_source.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringside::daemon::ctl {
namespace {

absl::Status ErrnoError(int err, const std::string& op, const std::string& path) {
  std::string msg = absl::StrCat(path, ": ", op, ": ", strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EISDIR:
      return absl::FailedPreconditionError(msg);
    default:
      return absl::UnavailableError(msg);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileSource>> FileSource::Open(const std::string& path) {
  if (path == "-") return std::unique_ptr<FileSource>(new FileSource(0, "<stdin>", false));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open", path);
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return ErrnoError(EISDIR, "open", path);
  }
  return std::unique_ptr<FileSource>(new FileSource(fd, path, true));
}

FileSource::~FileSource() {
  if (owned_) ::close(fd_);
}

absl::StatusOr<size_t> FileSource::Read(char* buf, size_t n) {
  for (;;) {
    ssize_t got = ::read(fd_, buf, n);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno == EINTR) continue;
    return ErrnoError(errno, "read", path_);
  }
}

}  // namespace ringside::daemon::ctl
