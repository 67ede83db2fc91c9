#include "daemon/common/web_security.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringside::daemon {

struct WebSecurity::Loaded {
  WebConfig config;
  X509* cert = nullptr;
  STACK_OF(X509)* chain = nullptr;
  EVP_PKEY* key = nullptr;
  X509_STORE* ca = nullptr;
  std::string ciphers;  // "A:B:C"

  ~Loaded() {
    X509_free(cert);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
    X509_STORE_free(ca);
  }
};

namespace {

std::string OpensslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

absl::Status LoadError(const std::string& what, const std::string& path) {
  return absl::InvalidArgumentError(
      absl::StrCat("web config: cannot load ", what, " ", path, ": ", OpensslError()));
}

// A cheap fingerprint of the files' identities (device, inode, size, mtime): it changes when one
// is rewritten or replaced (cert-manager's and kubelet's atomic symlink swaps included).
std::string Stamp(const std::vector<std::string>& paths) {
  std::string out;
  for (const std::string& p : paths) {
    struct stat st {};
    if (p.empty()) continue;
    if (stat(p.c_str(), &st) != 0) {
      absl::StrAppend(&out, p, ":missing;");
      continue;
    }
    absl::StrAppend(&out, p, ":", st.st_dev, ":", st.st_ino, ":", st.st_size, ":",
                    st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, ";");
  }
  return out;
}

std::vector<std::string> FilesOf(const std::string& path, const WebConfig* c) {
  std::vector<std::string> out = {path};
  if (c != nullptr && c->tls) {
    out.push_back(c->tls_config.cert_file);
    out.push_back(c->tls_config.key_file);
    out.push_back(c->tls_config.client_ca_file);
  }
  return out;
}

absl::StatusOr<std::shared_ptr<WebSecurity::Loaded>> LoadAll(const std::string& path) {
  absl::StatusOr<WebConfig> parsed = ReadWebConfig(path);
  if (!parsed.ok()) return parsed.status();
  auto l = std::make_shared<WebSecurity::Loaded>();
  l->config = std::move(*parsed);
  if (!l->config.tls) return l;
  const WebTlsConfig& t = l->config.tls_config;
  ERR_clear_error();
  {
    BIO* bio = BIO_new_file(t.cert_file.c_str(), "r");
    if (bio == nullptr) return LoadError("cert_file", t.cert_file);
    l->cert = PEM_read_bio_X509_AUX(bio, nullptr, nullptr, nullptr);
    l->chain = sk_X509_new_null();
    while (l->cert != nullptr) {
      X509* extra = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
      if (extra == nullptr) break;
      sk_X509_push(l->chain, extra);
    }
    ERR_clear_error();
    BIO_free(bio);
    if (l->cert == nullptr) return LoadError("cert_file (no PEM certificate in it)", t.cert_file);
  }
  {
    BIO* bio = BIO_new_file(t.key_file.c_str(), "r");
    if (bio == nullptr) return LoadError("key_file", t.key_file);
    l->key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (l->key == nullptr) return LoadError("key_file (no PEM private key in it)", t.key_file);
    if (X509_check_private_key(l->cert, l->key) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(absl::StrCat(
          "web config: key_file ", t.key_file, " does not match cert_file ", t.cert_file));
    }
  }
  if (!t.client_ca_file.empty()) {
    BIO* bio = BIO_new_file(t.client_ca_file.c_str(), "r");
    if (bio == nullptr) return LoadError("client_ca_file", t.client_ca_file);
    STACK_OF(X509_INFO)* infos = PEM_X509_INFO_read_bio(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    l->ca = X509_STORE_new();
    int n = 0;
    for (int i = 0; infos != nullptr && i < sk_X509_INFO_num(infos); ++i) {
      X509_INFO* info = sk_X509_INFO_value(infos, i);
      if (info->x509 == nullptr) continue;
      X509_STORE_add_cert(l->ca, info->x509);
      ++n;
    }
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    ERR_clear_error();
    if (n == 0) {
      return absl::InvalidArgumentError(absl::StrCat("web config: client_ca_file ",
                                                     t.client_ca_file, " has no PEM certificate"));
    }
  }
  l->ciphers = absl::StrJoin(t.cipher_suites, ":");
  if (!l->ciphers.empty()) {
    // Check the list once here, so a connection never meets an unusable one.
    SSL_CTX* probe = SSL_CTX_new(TLS_server_method());
    const bool ok = probe != nullptr && SSL_CTX_set_cipher_list(probe, l->ciphers.c_str()) == 1;
    SSL_CTX_free(probe);
    ERR_clear_error();
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("web config: OpenSSL accepts none of cipher_suites (", l->ciphers, ")"));
    }
  }
  return l;
}

int ClientHello(SSL* ssl, int* alert, void* arg) {
  if (static_cast<WebSecurity*>(arg)->ConfigureConnection(ssl)) return SSL_CLIENT_HELLO_SUCCESS;
  *alert = SSL_AD_INTERNAL_ERROR;
  return SSL_CLIENT_HELLO_ERROR;
}

}  // namespace

WebSecurity::~WebSecurity() = default;

absl::StatusOr<std::unique_ptr<WebSecurity>> WebSecurity::Load(
    const std::string& path, std::set<std::string> open_paths,
    std::function<void(const std::string&)> log) {
  absl::StatusOr<std::shared_ptr<Loaded>> loaded = LoadAll(path);
  if (!loaded.ok()) return loaded.status();
  std::unique_ptr<WebSecurity> s(new WebSecurity());
  s->path_ = path;
  s->open_paths_ = std::move(open_paths);
  s->log_ = log ? std::move(log) : [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
  };
  s->tls_ = (*loaded)->config.tls;
  absl::MutexLock lock(&s->mu_);
  s->seen_stamp_ = Stamp(FilesOf(path, &(*loaded)->config));
  s->current_ = std::move(*loaded);
  return s;
}

std::shared_ptr<const WebSecurity::Loaded> WebSecurity::Current() {
  absl::MutexLock lock(&mu_);
  const std::string stamp = Stamp(FilesOf(path_, &current_->config));
  if (stamp == seen_stamp_) return current_;
  seen_stamp_ = stamp;
  absl::StatusOr<std::shared_ptr<Loaded>> next = LoadAll(path_);
  if (next.ok() && (*next)->config.tls != tls_) {
    next = absl::FailedPreconditionError(
        "adding or removing tls_server_config needs a restart");
  }
  if (!next.ok()) {
    log_(absl::StrCat("web config ", path_, " changed but cannot be used, keeping the previous one: ",
                      next.status().message()));
    return current_;
  }
  // The stamp of the files the new config names (they may differ from the old ones).
  seen_stamp_ = Stamp(FilesOf(path_, &(*next)->config));
  current_ = std::move(*next);
  ++reloads_;
  log_(absl::StrCat("web config ", path_, " re-read (certificate, key, CA and users)"));
  return current_;
}

int WebSecurity::reloads() const {
  absl::MutexLock lock(&mu_);
  return reloads_;
}

void WebSecurity::InstallOn(SSL_CTX* ctx) {
  // Every connection gets a full handshake against the current files: no session cache and no
  // tickets, so a rotated CA or certificate can never be bypassed by a resumed session.
  static const unsigned char kContext[] = "ringside-http";
  SSL_CTX_set_session_id_context(ctx, kContext, sizeof(kContext) - 1);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  SSL_CTX_set_client_hello_cb(ctx, ClientHello, this);
}

bool WebSecurity::ConfigureConnection(SSL* ssl) {
  std::shared_ptr<const Loaded> l = Current();
  const WebTlsConfig& t = l->config.tls_config;
  if (l->cert == nullptr || l->key == nullptr) return false;
  if (SSL_use_cert_and_key(ssl, l->cert, l->key, l->chain, 1) != 1) {
    ERR_clear_error();
    return false;
  }
  SSL_clear_options(ssl, SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1 | SSL_OP_NO_TLSv1_2 |
                             SSL_OP_NO_TLSv1_3);
  SSL_set_min_proto_version(ssl, t.min_version);
  SSL_set_max_proto_version(ssl, t.max_version);
  if (!l->ciphers.empty()) SSL_set_cipher_list(ssl, l->ciphers.c_str());
  if (t.prefer_server_cipher_suites) {
    SSL_set_options(ssl, SSL_OP_CIPHER_SERVER_PREFERENCE);
  } else {
    SSL_clear_options(ssl, SSL_OP_CIPHER_SERVER_PREFERENCE);
  }
  if (t.client_auth == ClientAuth::kNone || l->ca == nullptr) {
    SSL_set_verify(ssl, SSL_VERIFY_NONE, nullptr);
    return true;
  }
  // Only client_ca_file is trusted. A certificate is requested, and one that does not verify
  // fails the handshake; none at all is let through to Authorize, which refuses every path but
  // the probes under RequireAndVerifyClientCert.
  // (No list of acceptable CA names: Prometheus 2.42's Go TLS failed the TLS 1.3 handshake on
  // the certificate_authorities extension OpenSSL built from it, "tls: unexpected message".)
  SSL_set1_verify_cert_store(ssl, l->ca);
  SSL_set_verify(ssl, SSL_VERIFY_PEER, nullptr);
  return true;
}

WebAuthVerdict WebSecurity::Authorize(const std::string& path, bool has_client_cert,
                                      const std::string& authorization) {
  std::shared_ptr<const Loaded> l = Current();
  WebAuthVerdict v;
  for (const auto& [name, value] : l->config.headers) v.headers.emplace_back(name, value);
  if (open_paths_.count(path) > 0) return v;
  if (l->config.tls && l->config.tls_config.client_auth == ClientAuth::kRequireAndVerify &&
      !has_client_cert) {
    v.status = 403;
    v.body = "a client certificate signed by the configured client CA is required\n";
    return v;
  }
  if (!l->config.basic_auth_users.empty() &&
      !auth_.Check(l->config.basic_auth_users, authorization)) {
    v.status = 401;
    v.body = "Unauthorized\n";
    v.headers.emplace_back("WWW-Authenticate", "Basic");
    return v;
  }
  return v;
}

absl::Status CheckWebConfigFile(const std::string& path) {
  absl::StatusOr<std::shared_ptr<WebSecurity::Loaded>> l = LoadAll(path);
  return l.ok() ? absl::OkStatus() : l.status();
}

}  // namespace ringside::daemon
