// Transport security shared by the agent, the aggregator and the CLI: credentials from
// --tls-cert/--tls-key/--tls-ca, the plaintext policy (refused off loopback unless
// --allow-insecure), and the check that an mTLS peer may claim a node name.
#ifndef RINGSIDE_DAEMON_COMMON_TLS_H_
#define RINGSIDE_DAEMON_COMMON_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace ringside::daemon {

struct TlsOptions {
  std::string cert_file;  // PEM certificate chain of this side
  std::string key_file;   // PEM private key of this side
  std::string ca_file;    // PEM CA: on a server, client certificates are required and verified
                          // against it (mTLS); on a client, the server is verified against it
  bool allow_insecure = false;  // plaintext on a non-loopback address
  // Server: request client certificates and verify those given, but let a client without one
  // connect (a reader with a token, grpc_roles.h); the roles then require what each call needs.
  bool client_cert_optional = false;
  // Client: a read-only bearer token sent with every call (the CLI's --token-file); TLS only.
  std::string token_file;
  // How often the certificate, key and CA files are checked for renewal (gRPC's
  // FileWatcherCertificateProvider): new connections use the new files, open streams go on.
  unsigned refresh_interval_s = 60;
};

// True for 127.0.0.0/8, ::1 and "localhost" (with or without :port). ":9472", "0.0.0.0:9472" and
// "[::]:9472" listen on every interface, so they are not loopback.
bool IsLoopbackAddress(const std::string& host_port);

// Credentials for a server listening on `listen`. With TLS, the files are re-read every
// refresh_interval_s (renewal without restart). Plaintext (no cert) is refused unless `listen`
// is loopback or allow_insecure is set; the error says which flags to give.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options, const std::string& listen);

// Credentials for a client connecting to `target`. TLS when a CA is given (with this side's
// certificate and key when given, for mTLS); plaintext only to loopback or with allow_insecure.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsOptions& options, const std::string& target);

// Whether the authenticated peer may speak for `node`: with no TLS identity (plaintext), yes; with
// a verified certificate, only if its common name or one of its subject alternative names (DNS)
// equals `node`.
bool PeerMayClaimNode(const grpc::AuthContext& auth, const std::string& node);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_TLS_H_
