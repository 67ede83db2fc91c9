// A small HTTP server (civetweb, the one prometheus-cpp's Exposer runs on) for the daemons'
// /metrics, /healthz and JSON debug endpoints. Handlers run on civetweb's threads and must not
// block for long. With a web configuration file (exporter-toolkit's format, web_config.h) it
// serves TLS (through the OpenSSL 3 shim, civetweb_openssl.h), checks client certificates and
// bcrypt users, and adds the configured headers; docs/http-security.md.
#ifndef RINGSIDE_DAEMON_COMMON_HTTP_SERVER_H_
#define RINGSIDE_DAEMON_COMMON_HTTP_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

class CivetServer;

namespace ringside::daemon {

struct HttpRequest {
  std::string path;
  bool tls = false;         // the connection is TLS
  std::string remote_addr;  // the client's address (numeric)
  std::map<std::string, std::string> query;  // decoded
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class WebSecurity;

struct HttpServerOptions {
  int threads = 2;
  // exporter-toolkit's web configuration (--web.config.file); empty: plaintext, no users.
  std::string web_config_file;
  // Where the civetweb OpenSSL 3 shims are (empty: DefaultCivetwebTlsShimDirs()).
  std::vector<std::string> tls_shim_dirs;
  // Logged: a web config that changed but cannot be used.
  std::function<void(const std::string&)> log;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Listens on `listen` ("[host]:port"; ":9473" is every interface; port 0 picks one).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& listen,
                                                           int threads = 2);
  // The same with a web configuration: a file that cannot be used is an error here.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& listen,
                                                           const HttpServerOptions& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves GET `path` (exactly) with `handler`. Register before traffic is expected.
  void Handle(const std::string& path, Handler handler);
  int port() const { return port_; }
  bool tls() const;  // serving HTTPS

 private:
  class Adapter;
  HttpServer() = default;
  std::unique_ptr<WebSecurity> security_;  // before server_: civetweb's threads use it
  std::unique_ptr<CivetServer> server_;
  std::vector<std::unique_ptr<Adapter>> adapters_;
  int port_ = 0;
  std::string wake_host_;  // a numeric address of the listening socket, to wake it at close
};

// Whether a request for data (the aggregator's /api/v1) may be served: over TLS, from a loopback
// peer, or anywhere under --allow-insecure.
bool PlaintextApiAllowed(const HttpRequest& req, bool allow_insecure);
// The 403 for a request PlaintextApiAllowed refuses, saying what to configure.
HttpResponse PlaintextApiRefusal(const HttpRequest& req);

// ":9473" → "9473"; "127.0.0.1:0" stays; "[::1]:9473" → "[::1]:9473" (civetweb's syntax).
std::string CivetListenAddress(const std::string& listen);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_HTTP_SERVER_H_
