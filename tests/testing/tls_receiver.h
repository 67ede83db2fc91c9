// A tiny HTTPS server on 127.0.0.1 (OpenSSL) for the alert transport tests: it presents a server
// certificate (tests/testing/certs.h), optionally requires a client certificate signed by a given
// CA (mTLS), records every request it could read (head, body, the client certificate's CN) and
// answers each with a set status. Handshakes that fail (the client refused the server, or the
// server refused the client) are counted. Every wait is bounded.
#ifndef RINGSIDE_TESTS_TESTING_TLS_RECEIVER_H_
#define RINGSIDE_TESTS_TESTING_TLS_RECEIVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace ringside::testing {

class TlsReceiver {
 public:
  struct Options {
    std::string cert;       // server certificate (PEM)
    std::string key;        // its key
    std::string client_ca;  // non-empty: require a client certificate signed by this CA
    int status = 200;
  };
  struct Request {
    std::string method;
    std::string path;
    std::string head;  // the request line and headers, as received
    std::string body;
    std::string client_cn;  // the client certificate's common name; empty without one
  };

  static absl::StatusOr<std::unique_ptr<TlsReceiver>> Start(const Options& options);
  ~TlsReceiver();
  TlsReceiver(const TlsReceiver&) = delete;
  TlsReceiver& operator=(const TlsReceiver&) = delete;

  int port() const { return port_; }
  // "https://127.0.0.1:<port><path>".
  std::string url(const std::string& path = "/hook") const;
  std::vector<Request> Requests() const;
  int handshake_failures() const { return handshake_failures_.load(); }

 private:
  TlsReceiver() = default;
  void Serve();
  void Handle(int fd);

  Options options_;
  SSL_CTX* ctx_ = nullptr;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> handshake_failures_{0};
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<Request> requests_;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_TLS_RECEIVER_H_
