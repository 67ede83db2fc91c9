// Makes Debian 12's civetweb serve TLS with OpenSSL 3. Civetweb 1.15 loads OpenSSL by
// dlopen("libssl.so") through the 1.1 API and crashes on the first HTTPS connection because
// libssl.so.3 lacks SSL_get_peer_certificate (docs/http-security.md). This loads ringside's two
// shim objects (civetweb_tls/*.c, SONAMEs "libssl.so" and "libcrypto.so") by absolute path, so
// civetweb's dlopen gets them, and checks that it does.
#ifndef RINGSIDE_DAEMON_COMMON_CIVETWEB_OPENSSL_H_
#define RINGSIDE_DAEMON_COMMON_CIVETWEB_OPENSSL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ringside::daemon {

// The folders searched for the shims when none are given: the installed one, then the build's.
std::vector<std::string> DefaultCivetwebTlsShimDirs();

// Loads the shims from the first of `dirs` that has both (once per process; later calls return
// the first result). An error says which folders were searched and what failed.
absl::Status LoadCivetwebOpenSsl(const std::vector<std::string>& dirs);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_CIVETWEB_OPENSSL_H_
