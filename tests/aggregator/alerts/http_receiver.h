// A tiny HTTP/1.1 server on 127.0.0.1 for the alert tests: records every request (method, path,
// lowercased headers, body) and answers with a status the test sets. Stop() closes the port (a
// receiver that is down: connections are refused); Start() opens the same port again. Every wait
// is bounded.
#ifndef RINGSIDE_TESTS_AGGREGATOR_ALERTS_HTTP_RECEIVER_H_
#define RINGSIDE_TESTS_AGGREGATOR_ALERTS_HTTP_RECEIVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ringside::testing {

class HttpReceiver {
 public:
  struct Request {
    std::string method;
    std::string path;
    std::map<std::string, std::string> headers;  // lowercased names
    std::string body;
    int answered = 0;  // the status sent back
    absl::Time received;  // when its body was in
  };

  // Binds 127.0.0.1:`port` (0: any free port) and serves until destroyed or Stop().
  explicit HttpReceiver(int port = 0) : port_(port) { Start(); }
  ~HttpReceiver() { Stop(); }

  bool Start() {
    Stop();
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 16) != 0) {
      close(fd);
      return false;
    }
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    listen_fd_ = fd;
    stop_ = false;
    thread_ = std::thread([this] { Serve(); });
    return true;
  }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
  }

  int port() const { return port_; }
  std::string url(const std::string& path = "/hook") const {
    return absl::StrCat("http://127.0.0.1:", port_, path);
  }
  void SetStatus(int status) {
    absl::MutexLock l(&mu_);
    status_ = status;
  }
  std::vector<Request> Requests() const {
    absl::MutexLock l(&mu_);
    return requests_;
  }
  // The requests answered 2xx.
  std::vector<Request> Accepted() const {
    std::vector<Request> out;
    for (Request& r : Requests()) {
      if (r.answered >= 200 && r.answered < 300) out.push_back(std::move(r));
    }
    return out;
  }
  bool WaitForAccepted(size_t n, absl::Duration timeout) const {
    const absl::Time end = absl::Now() + timeout;
    while (absl::Now() < end) {
      if (Accepted().size() >= n) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return Accepted().size() >= n;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      Handle(c);
      close(c);
    }
  }

  void Handle(int c) {
    std::string raw;
    char buf[8192];
    const absl::Time end = absl::Now() + absl::Seconds(5);
    size_t head_end = std::string::npos;
    size_t want = 0;
    while (absl::Now() < end) {
      pollfd p{c, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = recv(c, buf, sizeof(buf), 0);
      if (n <= 0) break;
      raw.append(buf, static_cast<size_t>(n));
      if (head_end == std::string::npos) {
        head_end = raw.find("\r\n\r\n");
        if (head_end != std::string::npos) {
          want = head_end + 4 + ContentLength(raw.substr(0, head_end));
        }
      }
      if (head_end != std::string::npos && raw.size() >= want) break;
    }
    if (head_end == std::string::npos) return;
    Request r;
    std::vector<std::string> lines = absl::StrSplit(raw.substr(0, head_end), "\r\n");
    std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
    if (first.size() >= 2) {
      r.method = first[0];
      r.path = first[1];
    }
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      r.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
    r.body = raw.substr(head_end + 4);
    r.received = absl::Now();
    {
      absl::MutexLock l(&mu_);
      r.answered = status_;
      requests_.push_back(r);
    }
    const std::string resp = absl::StrCat("HTTP/1.1 ", r.answered,
                                          " X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    (void)send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
  }

  static size_t ContentLength(const std::string& head) {
    for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
      if (absl::StartsWithIgnoreCase(line, "content-length:")) {
        size_t n = 0;
        if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &n)) return n;
      }
    }
    return 0;
  }

  int port_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable absl::Mutex mu_;
  int status_ = 200;
  std::vector<Request> requests_;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_AGGREGATOR_ALERTS_HTTP_RECEIVER_H_
