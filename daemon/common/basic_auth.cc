#include "daemon/common/basic_auth.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace ringside::daemon {
namespace {

// exporter-toolkit's hash of "fakepassword": unknown users are checked against it, so the time
// an answer takes does not tell whether the user exists.
constexpr char kFakeHash[] = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";

std::string CacheKey(const std::string& user, const std::string& hash, const std::string& pass) {
  std::string in = user;
  in.push_back('\0');
  in += hash;
  in.push_back('\0');
  in += pass;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(in.data(), in.size(), digest, &len, EVP_sha256(), nullptr);
  OPENSSL_cleanse(in.data(), in.size());
  return std::string(reinterpret_cast<char*>(digest), len);
}

}  // namespace

bool BcryptMatches(const std::string& password, const std::string& hash) {
  // crypt_data is 32 KiB: civetweb's worker threads have small stacks, so it lives on the heap.
  auto data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  const char* out = crypt_r(password.c_str(), hash.c_str(), data.get());
  if (out == nullptr || out[0] == '*') return false;
  const size_t n = std::strlen(out);
  return n == hash.size() && CRYPTO_memcmp(out, hash.data(), n) == 0;
}

bool ParseBasicAuthorization(const std::string& header, std::string* user, std::string* password) {
  if (!absl::StartsWithIgnoreCase(header, "basic ")) return false;
  const std::string b64(absl::StripAsciiWhitespace(header.substr(6)));
  if (b64.empty() || b64.size() % 4 != 0 || b64.size() > 4096) return false;
  std::string decoded(b64.size() / 4 * 3 + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(decoded.data()),
                                reinterpret_cast<const unsigned char*>(b64.data()),
                                static_cast<int>(b64.size()));
  if (n < 0) return false;
  size_t len = static_cast<size_t>(n);
  // EVP_DecodeBlock counts the padding as zero bytes.
  if (absl::EndsWith(b64, "==")) {
    len -= 2;
  } else if (absl::EndsWith(b64, "=")) {
    len -= 1;
  }
  decoded.resize(len);
  const size_t colon = decoded.find(':');
  if (colon == std::string::npos) return false;
  *user = decoded.substr(0, colon);
  *password = decoded.substr(colon + 1);
  return true;
}

bool BasicAuthChecker::Check(const std::map<std::string, std::string>& users,
                             const std::string& authorization) {
  std::string user, pass;
  if (!ParseBasicAuthorization(authorization, &user, &pass)) return false;
  auto it = users.find(user);
  const bool known = it != users.end();
  const std::string hash = known ? it->second : kFakeHash;
  const std::string key = CacheKey(user, hash, pass);
  {
    absl::MutexLock lock(&mu_);
    auto c = cache_.find(key);
    if (c != cache_.end()) return known && c->second;
  }
  bool ok;
  {
    absl::MutexLock lock(&bcrypt_mu_);
    ok = BcryptMatches(pass, hash);
  }
  absl::MutexLock lock(&mu_);
  if (cache_.size() >= kCacheSize) {
    unsigned char r[4];
    RAND_bytes(r, sizeof(r));
    auto victim = cache_.begin();
    std::advance(victim, (r[0] | r[1] << 8 | r[2] << 16) % cache_.size());
    cache_.erase(victim);
  }
  cache_[key] = ok;
  return known && ok;
}

size_t BasicAuthChecker::cache_size() const {
  absl::MutexLock lock(&mu_);
  return cache_.size();
}

}  // namespace ringside::daemon
