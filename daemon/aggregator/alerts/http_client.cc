#include "daemon/aggregator/alerts/http_client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace ringside::daemon {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

int RemainingMs(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

// Waits for `events` on fd until the deadline.
absl::Status Wait(int fd, short events, absl::Time deadline, absl::string_view what) {
  while (true) {
    const int ms = RemainingMs(deadline);
    if (ms == 0) return absl::DeadlineExceededError(absl::StrCat("timed out ", what));
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, ms);
    if (r > 0) return absl::OkStatus();
    if (r == 0) return absl::DeadlineExceededError(absl::StrCat("timed out ", what));
    if (errno != EINTR) return absl::UnavailableError(absl::StrCat("poll: ", strerror(errno)));
  }
}

absl::StatusOr<int> Connect(const HttpUrl& url, absl::Time deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = absl::StrCat(url.port);
  const int rc = getaddrinfo(url.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", url.host, ": ", gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for ", url.host));
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last = absl::UnavailableError(absl::StrCat("socket: ", strerror(errno)));
      continue;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      freeaddrinfo(res);
      return fd;
    }
    if (errno == EINPROGRESS) {
      absl::Status w = Wait(fd, POLLOUT, deadline, absl::StrCat("connecting to ", url.authority));
      int err = 0;
      socklen_t len = sizeof(err);
      if (w.ok() && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        freeaddrinfo(res);
        return fd;
      }
      last = w.ok() ? absl::UnavailableError(
                          absl::StrCat("cannot connect to ", url.authority, ": ", strerror(err)))
                    : w;
    } else {
      last = absl::UnavailableError(
          absl::StrCat("cannot connect to ", url.authority, ": ", strerror(errno)));
    }
    close(fd);
  }
  freeaddrinfo(res);
  return last;
}

absl::Status SendAll(int fd, absl::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (absl::Status s = Wait(fd, POLLOUT, deadline, "sending the request"); !s.ok()) return s;
      continue;
    }
    return absl::UnavailableError(absl::StrCat("send: ", strerror(errno)));
  }
  return absl::OkStatus();
}

// Decodes a chunked body; false while incomplete or malformed (*bad set when malformed).
bool Dechunk(absl::string_view in, std::string* out, bool* bad) {
  out->clear();
  while (true) {
    const size_t eol = in.find("\r\n");
    if (eol == absl::string_view::npos) return false;
    absl::string_view size_text = in.substr(0, eol);
    if (size_t semi = size_text.find(';'); semi != absl::string_view::npos) {
      size_text = size_text.substr(0, semi);
    }
    uint64_t size = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(size_text), &size) || size > (1u << 30)) {
      *bad = true;
      return false;
    }
    in.remove_prefix(eol + 2);
    if (size == 0) return true;  // trailers ignored
    if (in.size() < size + 2) return false;
    out->append(in.data(), size);
    in.remove_prefix(size + 2);
  }
}

}  // namespace

absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://")) {
    if (absl::StartsWith(url, "https://")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", url, "\": https is not supported; use http:// (e.g. through a local proxy)"));
    }
    return absl::InvalidArgumentError(absl::StrCat("\"", url, "\" is not an http:// URL"));
  }
  HttpUrl u;
  const size_t slash = rest.find_first_of("/?");
  absl::string_view authority = rest.substr(0, slash);
  if (slash != absl::string_view::npos) {
    u.path = std::string(rest.substr(slash));
    if (u.path[0] == '?') u.path = "/" + u.path;
  }
  if (authority.empty() || absl::StrContains(authority, '@')) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", url, "\": give host[:port] (no user info)"));
  }
  u.authority = std::string(authority);
  absl::string_view host = authority;
  absl::string_view port;
  if (absl::StartsWith(authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": unclosed [ in the host"));
    }
    host = authority.substr(1, close - 1);
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (!absl::ConsumePrefix(&after, ":")) {
        return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": bad host"));
      }
      port = after;
    }
  } else if (const size_t colon = authority.rfind(':'); colon != absl::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": no host"));
  u.host = std::string(host);
  if (!port.empty()) {
    int p = 0;
    if (!absl::SimpleAtoi(port, &p) || p <= 0 || p > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": bad port \"", port, "\""));
    }
    u.port = p;
  }
  return u;
}

absl::StatusOr<HttpClientResponse> ParseHttpResponse(absl::string_view raw) {
  const size_t end = raw.find("\r\n\r\n");
  if (end == absl::string_view::npos) return absl::DataLossError("incomplete HTTP response head");
  std::vector<absl::string_view> lines = absl::StrSplit(raw.substr(0, end), "\r\n");
  HttpClientResponse r;
  // "HTTP/1.1 200 OK"
  std::vector<absl::string_view> status = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  if (status.size() < 2 || !absl::StartsWith(status[0], "HTTP/1.") ||
      !absl::SimpleAtoi(status[1], &r.status) || r.status < 100 || r.status > 999) {
    return absl::DataLossError(
        absl::StrCat("not an HTTP response: \"", lines[0].substr(0, 80), "\""));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) continue;
    r.headers[absl::AsciiStrToLower(absl::StripAsciiWhitespace(lines[i].substr(0, colon)))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  absl::string_view body = raw.substr(end + 4);
  if (auto te = r.headers.find("transfer-encoding");
      te != r.headers.end() && absl::StrContains(absl::AsciiStrToLower(te->second), "chunked")) {
    bool bad = false;
    if (!Dechunk(body, &r.body, &bad)) {
      return absl::DataLossError(bad ? "malformed chunked body" : "incomplete chunked body");
    }
  } else if (auto cl = r.headers.find("content-length"); cl != r.headers.end()) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(cl->second, &n)) return absl::DataLossError("bad Content-Length");
    if (body.size() < n) return absl::DataLossError("incomplete body");
    r.body = std::string(body.substr(0, n));
  } else {
    r.body = std::string(body);
  }
  return r;
}

absl::StatusOr<HttpClientResponse> SendHttp(const HttpClientRequest& req) {
  const absl::Time deadline = absl::Now() + req.timeout;
  absl::StatusOr<int> fd_or = Connect(req.url, deadline);
  if (!fd_or.ok()) return fd_or.status();
  Fd fd(*fd_or);
  std::string head =
      absl::StrCat(req.method, " ", req.url.path, " HTTP/1.1\r\nHost: ", req.url.authority,
                   "\r\nConnection: close\r\n");
  for (const auto& [name, value] : req.headers) absl::StrAppend(&head, name, ": ", value, "\r\n");
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT") {
    absl::StrAppend(&head, "Content-Length: ", req.body.size(), "\r\n");
  }
  absl::StrAppend(&head, "\r\n");
  if (absl::Status s = SendAll(fd.get(), head, deadline); !s.ok()) return s;
  if (absl::Status s = SendAll(fd.get(), req.body, deadline); !s.ok()) return s;

  std::string raw;
  char buf[16384];
  while (true) {
    const ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n > 0) {
      raw.append(buf, static_cast<size_t>(n));
      if (raw.size() > req.max_response_bytes + 65536) {
        return absl::DataLossError(absl::StrCat("response from ", req.url.authority,
                                                " larger than ", req.max_response_bytes, " bytes"));
      }
      // A complete response ends the read even if the server keeps the connection open.
      if (absl::StatusOr<HttpClientResponse> r = ParseHttpResponse(raw);
          r.ok() && (r->headers.count("content-length") || r->headers.count("transfer-encoding"))) {
        return r;
      }
      continue;
    }
    if (n == 0) break;  // closed: the body ends here
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (absl::Status s = Wait(fd.get(), POLLIN, deadline,
                                absl::StrCat("waiting for ", req.url.authority, " to answer"));
          !s.ok()) {
        return s;
      }
      continue;
    }
    return absl::UnavailableError(
        absl::StrCat("recv from ", req.url.authority, ": ", strerror(errno)));
  }
  if (raw.empty()) {
    return absl::UnavailableError(absl::StrCat(req.url.authority, " closed without answering"));
  }
  return ParseHttpResponse(raw);
}

}  // namespace ringside::daemon
