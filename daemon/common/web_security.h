// The live state of a --web.config.file for HttpServer: the parsed file and the certificate, key
// and client CA it names, re-read when any of those files changes (checked on every TLS handshake
// and every request, as exporter-toolkit does, so a renewed certificate or an edited password
// applies without a restart; a file that fails to load keeps the last good state and is logged).
// It configures each TLS connection at its ClientHello (certificate, versions, ciphers, client
// CA: only client_ca_file is trusted, never the system store) and authorises each request.
#ifndef RINGSIDE_DAEMON_COMMON_WEB_SECURITY_H_
#define RINGSIDE_DAEMON_COMMON_WEB_SECURITY_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/common/basic_auth.h"
#include "daemon/common/web_config.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace ringside::daemon {

struct WebAuthVerdict {
  int status = 200;  // 200: serve; else answer with this status and `body`
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // to add to any answer
};

class WebSecurity {
 public:
  struct Loaded;  // a parsed config with its files loaded (web_security.cc)

  // Loads `path` and the files it names; any error is returned (the daemon refuses to start).
  // `open_paths` are served without client certificate or password (the kubelet's probes).
  static absl::StatusOr<std::unique_ptr<WebSecurity>> Load(
      const std::string& path, std::set<std::string> open_paths = {"/healthz", "/readyz"},
      std::function<void(const std::string&)> log = nullptr);
  ~WebSecurity();

  bool tls() const { return tls_; }  // fixed at start: whether to listen with TLS

  // Civetweb's init_ssl: installs the per-connection setup on civetweb's SSL_CTX.
  void InstallOn(SSL_CTX* ctx);
  // The per-connection setup, at the ClientHello: certificate and key, versions, ciphers,
  // client-certificate verification. False when there is nothing to serve with.
  bool ConfigureConnection(SSL* ssl);

  // Whether a request for `path` may be served: `has_client_cert` means the TLS peer presented
  // a certificate that verified against client_ca_file; `authorization` is the header's value.
  WebAuthVerdict Authorize(const std::string& path, bool has_client_cert,
                           const std::string& authorization);

  // How many times the files were re-read successfully (for tests and the log).
  int reloads() const;

 private:
  WebSecurity() = default;
  std::shared_ptr<const Loaded> Current();

  std::string path_;
  std::set<std::string> open_paths_;
  std::function<void(const std::string&)> log_;
  bool tls_ = false;
  BasicAuthChecker auth_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const Loaded> current_ ABSL_GUARDED_BY(mu_);
  std::string seen_stamp_ ABSL_GUARDED_BY(mu_);  // of the files at the last (re)load attempt
  int reloads_ ABSL_GUARDED_BY(mu_) = 0;
};

// Loads `path` as the daemons do at start: the file and the files it names. OK when they would
// start with it (tests compare this with `promtool check web-config`).
absl::Status CheckWebConfigFile(const std::string& path);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_WEB_SECURITY_H_
