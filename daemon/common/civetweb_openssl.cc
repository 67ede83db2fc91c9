#include "daemon/common/civetweb_openssl.h"

#include <dlfcn.h>
#include <unistd.h>

#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringside::daemon {
namespace {

constexpr char kSsl[] = "libringside-civetweb-ssl.so";
constexpr char kCrypto[] = "libringside-civetweb-crypto.so";

absl::Status TryLoad(const std::string& dir) {
  const std::string crypto = absl::StrCat(dir, "/", kCrypto);
  const std::string ssl = absl::StrCat(dir, "/", kSsl);
  if (access(crypto.c_str(), R_OK) != 0 || access(ssl.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(dir, ": no ", kSsl, "/", kCrypto));
  }
  void* c = dlopen(crypto.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (c == nullptr) return absl::InternalError(absl::StrCat(crypto, ": ", dlerror()));
  void* s = dlopen(ssl.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (s == nullptr) return absl::InternalError(absl::StrCat(ssl, ": ", dlerror()));
  // What civetweb's dlopen("libssl.so") will now get, and the functions it needs from it.
  void* as_civetweb = dlopen("libssl.so", RTLD_LAZY | RTLD_NOLOAD);
  void* crypto_as_civetweb = dlopen("libcrypto.so", RTLD_LAZY | RTLD_NOLOAD);
  const bool same = as_civetweb == s && crypto_as_civetweb == c;
  if (as_civetweb != nullptr) dlclose(as_civetweb);
  if (crypto_as_civetweb != nullptr) dlclose(crypto_as_civetweb);
  if (!same) {
    return absl::InternalError(absl::StrCat(
        ssl, " was loaded but dlopen(\"libssl.so\") does not return it (wrong SONAME?)"));
  }
  for (const char* fn : {"SSL_get_peer_certificate", "SSL_CTX_new", "SSL_accept"}) {
    if (dlsym(s, fn) == nullptr) {
      return absl::InternalError(absl::StrCat(ssl, " does not provide ", fn));
    }
  }
  if (dlsym(c, "ERR_get_error") == nullptr) {
    return absl::InternalError(absl::StrCat(crypto, " does not provide ERR_get_error"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> DefaultCivetwebTlsShimDirs() {
  std::vector<std::string> out;
#ifdef RINGSIDE_CIVETWEB_TLS_SHIM_DIRS
  for (const char* d : {RINGSIDE_CIVETWEB_TLS_SHIM_DIRS}) out.push_back(d);
#endif
  return out;
}

absl::Status LoadCivetwebOpenSsl(const std::vector<std::string>& dirs) {
  static absl::once_flag once;
  static absl::Status* result = nullptr;
  absl::call_once(once, [&dirs] {
    std::vector<std::string> tried;
    for (const std::string& d : dirs) {
      absl::Status s = TryLoad(d);
      if (s.ok()) {
        result = new absl::Status();
        return;
      }
      tried.push_back(std::string(s.message()));
    }
    result = new absl::Status(absl::FailedPreconditionError(absl::StrCat(
        "HTTPS needs ringside's OpenSSL 3 shim for civetweb, not usable here (",
        absl::StrJoin(tried, "; "), ")")));
  });
  return *result;
}

}  // namespace ringside::daemon
