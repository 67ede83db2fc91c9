// Client ends of the agent's collective-record socket for tests: connect, and send a whole buffer.
#ifndef RINGSIDE_TESTS_TESTING_UNIX_SOCKET_H_
#define RINGSIDE_TESTS_TESTING_UNIX_SOCKET_H_

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace ringside::testing {

// A connected AF_UNIX stream socket to `path`, or -1.
inline int ConnectUnix(const std::string& path) {
  sockaddr_un addr = {};
  if (path.size() >= sizeof(addr.sun_path)) return -1;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends all of `bytes` (no SIGPIPE); false when the peer is gone.
inline bool SendAll(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_UNIX_SOCKET_H_
