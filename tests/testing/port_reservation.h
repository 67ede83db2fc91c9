// A loopback TCP port held bound, not listening, for tests that need a port nothing answers on.
#ifndef RINGSIDE_TESTS_TESTING_PORT_RESERVATION_H_
#define RINGSIDE_TESTS_TESTING_PORT_RESERVATION_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ringside::testing {

// A TCP port on 127.0.0.1 held bound (not listening) until Release(): connections to it are
// refused, as to a receiver that is down, and no bind to port 0 (an aggregator's own gRPC or HTTP
// listener) is handed it meanwhile. A port bound and closed (FreePort() in
// tests/aggregator/alerts/alertmanager_process.h) gives no such guarantee: a port closed for 30 s
// was once handed to the aggregator's gRPC listener, and its webhook POSTs went to itself.
class PortReservation {
 public:
  PortReservation() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      Release();
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~PortReservation() { Release(); }
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;

  int port() const { return port_; }  // 0: no port could be bound
  void Release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_PORT_RESERVATION_H_
