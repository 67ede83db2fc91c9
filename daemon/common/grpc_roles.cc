#include "daemon/common/grpc_roles.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <fstream>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringside::daemon {
namespace {

std::string Sha256(const std::string& s) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(s.data(), s.size(), d, &n, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<char*>(d), n);
}

std::string FileStamp(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "missing";
  return absl::StrCat(st.st_dev, ":", st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".",
                      st.st_mtim.tv_nsec);
}

std::vector<std::string> Identities(const grpc::AuthContext& auth) {
  std::vector<std::string> out;
  for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
    for (const grpc::string_ref& v : auth.FindPropertyValues(property)) {
      out.emplace_back(v.data(), v.size());
    }
  }
  return out;
}

bool HasCertificate(const grpc::AuthContext& auth) {
  return !auth.FindPropertyValues("x509_pem_cert").empty() ||
         !auth.FindPropertyValues("x509_common_name").empty();
}

// The bearer token of the call, if any ("" when none; "\n" when the header is not a bearer).
std::string BearerToken(const grpc::ServerContextBase& context) {
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return "";
  const std::string v(it->second.data(), it->second.size());
  if (!absl::StartsWithIgnoreCase(v, "bearer ")) return "\n";
  return std::string(absl::StripAsciiWhitespace(v.substr(7)));
}

constexpr char kReaderHow[] =
    "the Query API needs a reader identity: a client certificate named in the aggregator's "
    "--reader-identities, or a read-only token (ringside --token-file, listed in "
    "--reader-token-file)";

}  // namespace

std::string PeerIdentityList(const grpc::AuthContext& auth) {
  std::vector<std::string> ids = Identities(auth);
  if (ids.empty()) return "no client certificate";
  std::set<std::string> unique(ids.begin(), ids.end());
  return absl::StrJoin(unique, ", ");
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read token file ", path));
  std::string line;
  while (std::getline(in, line)) {
    std::string t(absl::StripAsciiWhitespace(line));
    if (!t.empty() && t[0] != '#') return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("token file ", path, " has no token"));
}

absl::StatusOr<std::shared_ptr<RoleAuthorizer>> RoleAuthorizer::Create(RoleOptions options) {
  std::shared_ptr<RoleAuthorizer> a(new RoleAuthorizer(std::move(options)));
  if (a->tokens_enabled()) {
    absl::MutexLock lock(&a->mu_);
    absl::Status s = a->ReloadTokensLocked();
    if (!s.ok()) return s;
  }
  return a;
}

absl::Status RoleAuthorizer::ReloadTokensLocked() {
  const std::string stamp = FileStamp(options_.reader_token_file);
  if (stamp == token_stamp_) return absl::OkStatus();
  std::ifstream in(options_.reader_token_file);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read --reader-token-file ", options_.reader_token_file));
  }
  std::vector<std::string> digests;
  std::string line;
  while (std::getline(in, line)) {
    std::string t(absl::StripAsciiWhitespace(line));
    if (t.empty() || t[0] == '#') continue;
    if (t.size() < 16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--reader-token-file ", options_.reader_token_file,
          ": a token is shorter than 16 characters (make one with: openssl rand -hex 32)"));
    }
    digests.push_back(Sha256(t));
  }
  token_digests_ = std::move(digests);
  token_stamp_ = stamp;
  return absl::OkStatus();
}

bool RoleAuthorizer::TokenValid(const std::string& token) {
  if (token.empty() || token == "\n") return false;
  const std::string d = Sha256(token);
  absl::MutexLock lock(&mu_);
  (void)ReloadTokensLocked();  // a file that vanished or broke keeps the last tokens
  bool ok = false;
  for (const std::string& t : token_digests_) {
    ok |= t.size() == d.size() && CRYPTO_memcmp(t.data(), d.data(), d.size()) == 0;
  }
  return ok;
}

bool RoleAuthorizer::IsReaderCertificate(const grpc::AuthContext& auth) const {
  for (const std::string& id : Identities(auth)) {
    for (const std::string& want : options_.reader_identities) {
      if (absl::EndsWith(want, "*")) {
        if (absl::StartsWith(id, want.substr(0, want.size() - 1))) return true;
      } else if (id == want) {
        return true;
      }
    }
  }
  return false;
}

grpc::Status RoleAuthorizer::CheckReader(const grpc::ServerContextBase& context) {
  if (!options_.enforce) return grpc::Status::OK;
  const std::string token = BearerToken(context);
  if (!token.empty()) {
    if (!tokens_enabled()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this aggregator accepts no tokens (no --reader-token-file); use a "
                          "reader certificate");
    }
    if (TokenValid(token)) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the bearer token is not one of the aggregator's --reader-token-file");
  }
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (!auth || !HasCertificate(*auth)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat("no client certificate and no token: ", kReaderHow));
  }
  if (IsReaderCertificate(*auth)) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat("certificate ", PeerIdentityList(*auth),
                                   " has no reader role (an agent certificate may only ingest): ",
                                   kReaderHow));
}

grpc::Status RoleAuthorizer::CheckIngest(const grpc::ServerContextBase& context) {
  if (!options_.enforce) return grpc::Status::OK;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (!auth || !HasCertificate(*auth)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "ingest needs the agent's client certificate (a token is read-only)");
  }
  if (IsReaderCertificate(*auth)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("certificate ", PeerIdentityList(*auth),
                                     " has the reader role and may not ingest"));
  }
  return grpc::Status::OK;
}

}  // namespace ringside::daemon
