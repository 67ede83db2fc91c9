// Who may do what on the aggregator's gRPC port (docs/http-security.md "Roles"). Under TLS:
//   - agent:  a verified client certificate that is not a reader's. It may open Ingest streams,
//             only as the node its certificate names (PeerMayClaimNode), and read nothing.
//   - reader: a verified certificate whose common name or a DNS SAN is in `reader_identities`
//             (a trailing * matches a prefix: "ringside-aggregator-*"), or a bearer token listed
//             in `reader_token_file`. It may call Query (List*, Get*, Watch*) and never ingest.
// Nothing else reads, and a token never ingests. Over plaintext (loopback, or --allow-insecure)
// there is no identity to check, and everything is allowed, as before.
#ifndef RINGSIDE_DAEMON_COMMON_GRPC_ROLES_H_
#define RINGSIDE_DAEMON_COMMON_GRPC_ROLES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace ringside::daemon {

struct RoleOptions {
  bool enforce = false;  // the server has TLS: identities are required
  std::vector<std::string> reader_identities;
  std::string reader_token_file;  // one token per line; '#' comments; re-read when it changes
};

class RoleAuthorizer {
 public:
  static absl::StatusOr<std::shared_ptr<RoleAuthorizer>> Create(RoleOptions options);

  // OK for a reader; UNAUTHENTICATED without an identity or with a bad token; PERMISSION_DENIED
  // for a certificate without the reader role (an agent's).
  grpc::Status CheckReader(const grpc::ServerContextBase& context);
  // OK for an agent certificate (the node check stays with the ingest service);
  // UNAUTHENTICATED without a certificate; PERMISSION_DENIED for a reader.
  grpc::Status CheckIngest(const grpc::ServerContextBase& context);

  bool tokens_enabled() const { return !options_.reader_token_file.empty(); }

 private:
  explicit RoleAuthorizer(RoleOptions options) : options_(std::move(options)) {}
  bool IsReaderCertificate(const grpc::AuthContext& auth) const;
  bool TokenValid(const std::string& token);
  absl::Status ReloadTokensLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RoleOptions options_;
  absl::Mutex mu_;
  std::vector<std::string> token_digests_ ABSL_GUARDED_BY(mu_);  // SHA-256 of each token
  std::string token_stamp_ ABSL_GUARDED_BY(mu_);
};

// The verified certificate's identities, "CN, SAN, ..." (or "no client certificate").
std::string PeerIdentityList(const grpc::AuthContext& auth);

// Reads the first non-comment line of a token file (the CLI's --token-file).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_GRPC_ROLES_H_
