// Sockets passed by the service manager (sd_listen_fds(3)): a .socket unit with
// FileDescriptorName=NAME hands its listening socket to the service as fd 3+i with $LISTEN_PID,
// $LISTEN_FDS and $LISTEN_FDNAMES. The daemon adopts it instead of creating its own, and does
// not unlink it on exit: systemd owns the file.
#ifndef RINGSIDE_DAEMON_COMMON_SOCKET_ACTIVATION_H_
#define RINGSIDE_DAEMON_COMMON_SOCKET_ACTIVATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside::daemon {

struct InheritedSocket {
  int fd = -1;       // -1: none named so was passed
  std::string path;  // the socket's bound path (for the log)
  int passed = 0;    // sockets systemd passed in all (named so or not)
};

// The passed socket named `name`, checked to be a listening AF_UNIX SOCK_STREAM socket (else
// FailedPrecondition). Reads and then clears $LISTEN_* (children must not see them), so call it
// once per process, before starting threads. fd -1 when nothing named `name` was passed.
absl::StatusOr<InheritedSocket> TakeInheritedUnixListener(absl::string_view name);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_SOCKET_ACTIVATION_H_
