#include "daemon/common/socket_activation.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringside::daemon {

absl::StatusOr<InheritedSocket> TakeInheritedUnixListener(absl::string_view name) {
  char** names = nullptr;
  // unset_environment=1: $LISTEN_* are for this process only.
  const int n = sd_listen_fds_with_names(1, &names);
  if (n < 0) {
    return absl::InternalError(absl::StrCat("sd_listen_fds_with_names: ", std::strerror(-n)));
  }
  InheritedSocket out;
  out.passed = n;
  absl::Status status;
  for (int i = 0; i < n; ++i) {
    const int fd = SD_LISTEN_FDS_START + i;
    const char* fd_name = names != nullptr && names[i] != nullptr ? names[i] : "unknown";
    if (name != fd_name || out.fd >= 0) continue;
    const int r = sd_is_socket_unix(fd, SOCK_STREAM, /*listening=*/1, nullptr, 0);
    if (r <= 0) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "the socket systemd passed as \"", name, "\" (fd ", fd,
          ") is not a listening AF_UNIX SOCK_STREAM socket (ListenStream= in the .socket unit)"));
      continue;
    }
    out.fd = fd;
    sockaddr_un addr = {};
    socklen_t len = sizeof(addr);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
        len > offsetof(sockaddr_un, sun_path)) {
      const size_t n_path = len - offsetof(sockaddr_un, sun_path);
      out.path.assign(addr.sun_path, strnlen(addr.sun_path, n_path));
      if (out.path.empty() && n_path > 1)
        out.path = "@" + std::string(addr.sun_path + 1, n_path - 1);
    }
    // Ours from now on: not inherited by anything the daemon might exec.
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  if (names != nullptr) {
    for (int i = 0; i < n; ++i) std::free(names[i]);
    std::free(names);
  }
  if (!status.ok()) return status;
  return out;
}

}  // namespace ringside::daemon
