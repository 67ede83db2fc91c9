#include "daemon/common/tls.h"

#include <arpa/inet.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_roles.h"

namespace ringside::daemon {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string pem = ss.str();
  if (pem.find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is not PEM"));
  }
  return pem;
}

// "host:port", "[v6]:port", "host" → host.
std::string HostOf(const std::string& host_port) {
  std::string s = host_port;
  if (absl::StartsWith(s, "dns:///")) s = s.substr(7);
  if (absl::StartsWith(s, "ipv4:")) s = s.substr(5);
  if (absl::StartsWith(s, "ipv6:")) s = s.substr(5);
  if (absl::StartsWith(s, "[")) {
    size_t end = s.find(']');
    return end == std::string::npos ? s : s.substr(1, end - 1);
  }
  size_t colon = s.rfind(':');
  if (colon != std::string::npos && s.find(':') == colon) return s.substr(0, colon);
  return s;
}

unsigned RefreshSeconds(const TlsOptions& o) { return o.refresh_interval_s < 1 ? 1 : o.refresh_interval_s; }

}  // namespace

bool IsLoopbackAddress(const std::string& host_port) {
  const std::string host = HostOf(host_port);
  if (host == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    static const in6_addr loop = IN6ADDR_LOOPBACK_INIT;
    return std::memcmp(&v6, &loop, sizeof(v6)) == 0;
  }
  return false;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsOptions& options, const std::string& listen) {
  if (options.cert_file.empty() && options.key_file.empty()) {
    if (!options.ca_file.empty()) {
      return absl::InvalidArgumentError("--tls-ca needs --tls-cert and --tls-key on the server");
    }
    if (!IsLoopbackAddress(listen) && !options.allow_insecure) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing plaintext on non-loopback address ", listen,
          ": give --tls-cert and --tls-key (and --tls-ca to require client certificates), "
          "or --allow-insecure"));
    }
    return grpc::InsecureServerCredentials();
  }
  if (options.cert_file.empty() || options.key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  absl::StatusOr<std::string> cert = ReadPem(options.cert_file, "certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(options.key_file, "private key");
  if (!key.ok()) return key.status();
  if (!options.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(options.ca_file, "CA");
    if (!ca.ok()) return ca.status();
  }
  // The files, re-read when they change (cert-manager renews them in place).
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      options.key_file, options.cert_file, options.ca_file, RefreshSeconds(options));
  grpc::experimental::TlsServerCredentialsOptions tls(provider);
  tls.watch_identity_key_cert_pairs();
  if (options.ca_file.empty()) {
    tls.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    tls.watch_root_certs();
    tls.set_cert_request_type(options.client_cert_optional
                                  ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY
                                  : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(tls);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsOptions& options, const std::string& target) {
  if (options.ca_file.empty()) {
    if (!options.cert_file.empty() || !options.key_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls-cert/--tls-key without --tls-ca: give the CA that signed the server's certificate");
    }
    if (!options.token_file.empty()) {
      return absl::InvalidArgumentError(
          "a token (--token-file) is sent only over TLS: give --tls-ca too");
    }
    if (!IsLoopbackAddress(target) && !options.allow_insecure) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing plaintext to non-loopback address ", target,
          ": give --tls-ca (and --tls-cert/--tls-key for mTLS), or --allow-insecure"));
    }
    return grpc::InsecureChannelCredentials();
  }
  absl::StatusOr<std::string> ca = ReadPem(options.ca_file, "CA");
  if (!ca.ok()) return ca.status();
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
  if (!options.cert_file.empty() || !options.key_file.empty()) {
    if (options.cert_file.empty() || options.key_file.empty()) {
      return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
    }
    absl::StatusOr<std::string> cert = ReadPem(options.cert_file, "certificate");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(options.key_file, "private key");
    if (!key.ok()) return key.status();
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        options.key_file, options.cert_file, options.ca_file, RefreshSeconds(options));
  } else {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        options.ca_file, RefreshSeconds(options));
  }
  grpc::experimental::TlsChannelCredentialsOptions tls;
  tls.set_certificate_provider(provider);
  tls.watch_root_certs();
  if (!options.cert_file.empty()) tls.watch_identity_key_cert_pairs();
  tls.set_verify_server_certs(true);
  tls.set_check_call_host(true);  // the server's certificate must name the target (or tls_name)
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::experimental::TlsCredentials(tls);
  if (!creds) return absl::InternalError("gRPC refused the TLS options");
  if (!options.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(options.token_file);
    if (!token.ok()) return token.status();
    creds = grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(*token));
  }
  return creds;
}

bool PeerMayClaimNode(const grpc::AuthContext& auth, const std::string& node) {
  if (!auth.IsPeerAuthenticated()) return true;  // plaintext: no identity to check
  for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
    for (const grpc::string_ref& value : auth.FindPropertyValues(property)) {
      if (std::string(value.data(), value.size()) == node) return true;
    }
  }
  return false;
}

}  // namespace ringside::daemon
