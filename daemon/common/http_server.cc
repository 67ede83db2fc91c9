#include "daemon/common/http_server.h"

#include <CivetServer.h>
#include <openssl/ssl.h>
#include <arpa/inet.h>
#include <civetweb.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/common/civetweb_openssl.h"
#include "daemon/common/tls.h"
#include "daemon/common/web_security.h"

namespace ringside::daemon {
namespace {

std::string UrlDecode(absl::string_view s) {
  std::string out(s.size() + 1, '\0');
  int n = mg_url_decode(s.data(), static_cast<int>(s.size()), out.data(),
                        static_cast<int>(out.size()), /*is_form_url_encoded=*/1);
  if (n < 0) return std::string(s);
  out.resize(static_cast<size_t>(n));
  return out;
}

const char* StatusText(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

}  // namespace

class HttpServer::Adapter final : public CivetHandler {
 public:
  Adapter(Handler handler, WebSecurity* security)
      : handler_(std::move(handler)), security_(security) {}

  bool handleGet(CivetServer* server, struct mg_connection* conn) override {
    const struct mg_request_info* info = mg_get_request_info(conn);
    HttpRequest req;
    req.path = info->local_uri != nullptr ? info->local_uri : "";
    if (info->query_string != nullptr) {
      for (absl::string_view kv : absl::StrSplit(info->query_string, '&', absl::SkipEmpty())) {
        std::pair<absl::string_view, absl::string_view> p =
            absl::StrSplit(kv, absl::MaxSplits('=', 1));
        req.query[UrlDecode(p.first)] = UrlDecode(p.second);
      }
    }
    req.tls = info->is_ssl != 0;
    req.remote_addr = info->remote_addr;
    HttpResponse resp;
    WebAuthVerdict verdict;
    if (security_ != nullptr) {
      const char* authorization = mg_get_header(conn, "Authorization");
      verdict = security_->Authorize(req.path, info->client_cert != nullptr,
                                     authorization != nullptr ? authorization : "");
    }
    if (verdict.status != 200) {
      resp.status = verdict.status;
      resp.body = verdict.body;
    } else {
      try {
        resp = handler_(req);
      } catch (const std::exception& e) {
        resp.status = 500;
        resp.body = absl::StrCat("internal error: ", e.what(), "\n");
      }
    }
    std::string extra;
    for (const auto& [name, value] : verdict.headers) absl::StrAppend(&extra, name, ": ", value, "\r\n");
    std::string head = absl::StrCat("HTTP/1.1 ", resp.status, " ", StatusText(resp.status),
                                    "\r\nContent-Type: ", resp.content_type,
                                    "\r\nContent-Length: ", resp.body.size(), "\r\n", extra,
                                    "Cache-Control: no-store\r\nConnection: close\r\n\r\n");
    mg_write(conn, head.data(), head.size());
    mg_write(conn, resp.body.data(), resp.body.size());
    return true;
  }

 private:
  Handler handler_;
  WebSecurity* security_;
};

namespace {

// The host a client reaches the listening socket at: the loopback address for "every interface".
std::string WakeHost(const std::string& listen) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
    return host.empty() || host == "::" ? "::1" : host;
  }
  if (host.empty() || host == "0.0.0.0" || host == "localhost") return "127.0.0.1";
  return host;
}

// Opens (and drops) a connection to host:port without waiting for it to complete.
void Poke(const std::string& host, int port) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = AF_INET;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    family = AF_INET6;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*v6);
  } else {
    return;  // a name: civetweb stops on its own, within its 2 s poll
  }
  const int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  connect(fd, reinterpret_cast<sockaddr*>(&addr), len);  // EINPROGRESS: the SYN is out
  usleep(5000);
  close(fd);
}

}  // namespace

bool PlaintextApiAllowed(const HttpRequest& req, bool allow_insecure) {
  return req.tls || allow_insecure || IsLoopbackAddress(req.remote_addr);
}

HttpResponse PlaintextApiRefusal(const HttpRequest& req) {
  HttpResponse r;
  r.status = 403;
  r.content_type = "application/json";
  r.body = absl::StrCat(
      "{\"error\":\"the JSON API is not served in plaintext to ", req.remote_addr,
      ": configure TLS with --web.config.file, or start the aggregator with --allow-insecure\"}\n");
  return r;
}

std::string CivetListenAddress(const std::string& listen) {
  if (absl::StartsWith(listen, ":")) return listen.substr(1);
  return listen;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& listen,
                                                              int threads) {
  HttpServerOptions o;
  o.threads = threads;
  return Start(listen, o);
}

namespace {

// civetweb's init_ssl: user_data is the CivetServer, whose user context is the WebSecurity.
int InitSsl(void* ssl_ctx, void* user_data) {
  auto* server = static_cast<CivetServer*>(user_data);
  auto* security = static_cast<WebSecurity*>(const_cast<void*>(server->getUserContext()));
  if (security == nullptr) return -1;
  security->InstallOn(static_cast<SSL_CTX*>(ssl_ctx));
  return 1;  // everything is set up: civetweb loads no certificate and no CA of its own
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& listen,
                                                              const HttpServerOptions& o) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  std::string port = CivetListenAddress(listen);
  CivetCallbacks callbacks;  // its constructor zeroes every callback
  if (!o.web_config_file.empty()) {
    absl::StatusOr<std::unique_ptr<WebSecurity>> sec =
        WebSecurity::Load(o.web_config_file, {"/healthz", "/readyz"}, o.log);
    if (!sec.ok()) return sec.status();
    s->security_ = std::move(*sec);
    if (s->security_->tls()) {
      absl::Status shim = LoadCivetwebOpenSsl(
          o.tls_shim_dirs.empty() ? DefaultCivetwebTlsShimDirs() : o.tls_shim_dirs);
      if (!shim.ok()) return shim;
      port += "s";
      callbacks.init_ssl = InitSsl;
    }
  }
  std::vector<std::string> options = {"listening_ports",    port,
                                      "num_threads",        absl::StrCat(o.threads < 1 ? 1 : o.threads),
                                      "request_timeout_ms", "10000"};
  if (s->security_ != nullptr && s->security_->tls()) {
    // Never the system store for client certificates (civetweb's default adds it).
    options.insert(options.end(), {"ssl_default_verify_paths", "no"});
  }
  try {
    s->server_ = std::make_unique<CivetServer>(options, &callbacks, s->security_.get());
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, ": ", e.what()));
  }
  if (s->server_->getContext() == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  }
  std::vector<int> ports = s->server_->getListeningPorts();
  s->port_ = ports.empty() ? 0 : ports.front();
  s->wake_host_ = WakeHost(listen);
  return s;
}

HttpServer::~HttpServer() {
  if (!server_) return;
  // civetweb's master thread polls its listening sockets 2 s at a time and looks at the stop flag
  // only between polls, so close() alone took up to 2 s on every stop. A connection to the port,
  // made once the flag is set, ends the poll: poke it until close() returns (bounded).
  std::atomic<bool> closed{false};
  std::thread waker([this, &closed] {
    for (int i = 0; i < 200 && !closed.load(); ++i) {
      usleep(10000);
      if (port_ > 0) Poke(wake_host_, port_);
    }
  });
  server_->close();
  closed = true;
  waker.join();
  server_.reset();
}

bool HttpServer::tls() const { return security_ != nullptr && security_->tls(); }

void HttpServer::Handle(const std::string& path, Handler handler) {
  adapters_.push_back(std::make_unique<Adapter>(std::move(handler), security_.get()));
  server_->addHandler(path, adapters_.back().get());
}

}  // namespace ringside::daemon
