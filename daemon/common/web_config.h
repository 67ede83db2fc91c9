// The web configuration file (--web.config.file): the subset of Prometheus exporter-toolkit's YAML
// that ringside implements (docs/http-security.md). Parsing is strict: a field outside the subset,
// a value out of range or an unusable combination is an error that names it, never ignored.
#ifndef RINGSIDE_DAEMON_COMMON_WEB_CONFIG_H_
#define RINGSIDE_DAEMON_COMMON_WEB_CONFIG_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringside::daemon {

enum class ClientAuth {
  kNone,              // NoClientCert
  kVerifyIfGiven,     // VerifyClientCertIfGiven
  kRequireAndVerify,  // RequireAndVerifyClientCert
};

struct WebTlsConfig {
  std::string cert_file;  // absolute (relative paths resolve against the file's directory)
  std::string key_file;
  std::string client_ca_file;
  ClientAuth client_auth = ClientAuth::kNone;
  int min_version = 0x0303;  // TLS1_2_VERSION
  int max_version = 0x0304;  // TLS1_3_VERSION
  // OpenSSL names of the TLS <= 1.2 suites, in order (exporter-toolkit's cipher_suites, which like
  // Go's crypto/tls never restrict TLS 1.3); empty: OpenSSL's defaults.
  std::vector<std::string> cipher_suites;
  bool prefer_server_cipher_suites = true;
};

struct WebConfig {
  bool tls = false;  // tls_server_config has a field
  WebTlsConfig tls_config;
  std::map<std::string, std::string> headers;           // http_server_config.headers
  std::map<std::string, std::string> basic_auth_users;  // user → bcrypt hash
};

// Parses `text` (the file's content); `dir` resolves relative file names. Checks everything but
// the files' contents (web_tls.h loads those).
absl::StatusOr<WebConfig> ParseWebConfig(const std::string& text, const std::string& dir);

// Reads and parses `path`.
absl::StatusOr<WebConfig> ReadWebConfig(const std::string& path);

// Whether `hash` is a bcrypt hash ($2a$/$2b$/$2y$, cost 04..31, 53 characters of salt and hash).
bool IsBcryptHash(const std::string& hash);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_WEB_CONFIG_H_
