#include "tests/testing/tls_receiver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringside::testing {
namespace {

std::string OpensslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    absl::StrAppend(&out, out.empty() ? "" : "; ", buf);
  }
  return out;
}

size_t ContentLength(absl::string_view head) {
  for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
    if (absl::StartsWithIgnoreCase(line, "content-length:")) {
      size_t n = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &n)) return n;
    }
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsReceiver>> TlsReceiver::Start(const Options& options) {
  // A client that hangs up mid-write must not kill the test with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<TlsReceiver> r(new TlsReceiver());
  r->options_ = options;
  r->ctx_ = SSL_CTX_new(TLS_server_method());
  if (r->ctx_ == nullptr) return absl::InternalError("SSL_CTX_new: " + OpensslErrors());
  if (SSL_CTX_use_certificate_chain_file(r->ctx_, options.cert.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(r->ctx_, options.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    return absl::InternalError("cannot load the server certificate: " + OpensslErrors());
  }
  if (!options.client_ca.empty()) {
    if (SSL_CTX_load_verify_locations(r->ctx_, options.client_ca.c_str(), nullptr) != 1) {
      return absl::InternalError("cannot load the client CA: " + OpensslErrors());
    }
    SSL_CTX_set_verify(r->ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 16) != 0) {
    if (fd >= 0) close(fd);
    return absl::InternalError("cannot listen on 127.0.0.1");
  }
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  r->listen_fd_ = fd;
  r->port_ = ntohs(a.sin_port);
  r->thread_ = std::thread([p = r.get()] { p->Serve(); });
  return r;
}

TlsReceiver::~TlsReceiver() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

std::string TlsReceiver::url(const std::string& path) const {
  return absl::StrCat("https://127.0.0.1:", port_, path);
}

std::vector<TlsReceiver::Request> TlsReceiver::Requests() const {
  absl::MutexLock l(&mu_);
  return requests_;
}

void TlsReceiver::Serve() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    Handle(c);
    close(c);
  }
}

void TlsReceiver::Handle(int fd) {
  // Blocking I/O, each read and write bounded.
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  SSL* ssl = SSL_new(ctx_);
  SSL_set_fd(ssl, fd);
  if (SSL_accept(ssl) != 1) {
    handshake_failures_.fetch_add(1);
    ERR_clear_error();
    SSL_free(ssl);
    return;
  }
  Request req;
  if (X509* peer = SSL_get1_peer_certificate(ssl); peer != nullptr) {
    char cn[256] = {0};
    X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof(cn));
    req.client_cn = cn;
    X509_free(peer);
  }
  std::string raw;
  size_t head_end = std::string::npos;
  size_t want = 0;
  char buf[8192];
  while (head_end == std::string::npos || raw.size() < want) {
    const int n = SSL_read(ssl, buf, sizeof(buf));
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
    if (head_end == std::string::npos) {
      head_end = raw.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        want = head_end + 4 + ContentLength(absl::string_view(raw).substr(0, head_end));
      }
    }
  }
  if (head_end == std::string::npos) {
    // Nothing readable: in TLS 1.3 a refused client certificate shows up here, after the
    // server's half of the handshake.
    handshake_failures_.fetch_add(1);
    ERR_clear_error();
    SSL_free(ssl);
    return;
  }
  req.head = raw.substr(0, head_end);
  req.body = raw.substr(head_end + 4);
  std::vector<std::string> first =
      absl::StrSplit(absl::string_view(req.head).substr(0, req.head.find("\r\n")), ' ');
  if (first.size() >= 2) {
    req.method = first[0];
    req.path = first[1];
  }
  {
    absl::MutexLock l(&mu_);
    requests_.push_back(req);
  }
  const std::string resp = absl::StrCat("HTTP/1.1 ", options_.status,
                                        " X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
  SSL_write(ssl, resp.data(), static_cast<int>(resp.size()));
  SSL_shutdown(ssl);
  ERR_clear_error();
  SSL_free(ssl);
}

}  // namespace ringside::testing
