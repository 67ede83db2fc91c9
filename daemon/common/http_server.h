// A small HTTP server (civetweb, the one prometheus-cpp's Exposer runs on) for the daemons'
// /metrics, /healthz and JSON debug endpoints. Handlers run on civetweb's threads and must not
// block for long.
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
  std::map<std::string, std::string> query;  // decoded
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Listens on `listen` ("[host]:port"; ":9473" is every interface; port 0 picks one).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& listen,
                                                           int threads = 2);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves GET `path` (exactly) with `handler`. Register before traffic is expected.
  void Handle(const std::string& path, Handler handler);
  int port() const { return port_; }

 private:
  class Adapter;
  HttpServer() = default;
  std::unique_ptr<CivetServer> server_;
  std::vector<std::unique_ptr<Adapter>> adapters_;
  int port_ = 0;
  std::string wake_host_;  // a numeric address of the listening socket, to wake it at close
};

// ":9473" → "9473"; "127.0.0.1:0" stays; "[::1]:9473" → "[::1]:9473" (civetweb's syntax).
std::string CivetListenAddress(const std::string& listen);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_HTTP_SERVER_H_
