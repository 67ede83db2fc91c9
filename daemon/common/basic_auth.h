// HTTP Basic authentication against bcrypt hashes (exporter-toolkit's basic_auth_users), checked
// with libxcrypt's crypt_r. bcrypt is slow on purpose (~60 ms at cost 10), so verdicts are cached
// (100 entries, keyed on a SHA-256 of user, hash and password; random eviction), and an unknown
// user costs the same as a known one.
#ifndef RINGSIDE_DAEMON_COMMON_BASIC_AUTH_H_
#define RINGSIDE_DAEMON_COMMON_BASIC_AUTH_H_

#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace ringside::daemon {

// Whether `password` matches the bcrypt `hash` (crypt_r; constant-time comparison).
bool BcryptMatches(const std::string& password, const std::string& hash);

class BasicAuthChecker {
 public:
  // Whether the request's "Authorization" header value names a user of `users` with the right
  // password. An absent or malformed header is false.
  bool Check(const std::map<std::string, std::string>& users, const std::string& authorization);

  size_t cache_size() const;

 private:
  static constexpr size_t kCacheSize = 100;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, bool> cache_ ABSL_GUARDED_BY(mu_);
  absl::Mutex bcrypt_mu_;  // one bcrypt at a time, as exporter-toolkit: a flood costs one core
};

// Splits "Basic base64(user:pass)"; false when it is not that.
bool ParseBasicAuthorization(const std::string& header, std::string* user, std::string* password);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_BASIC_AUTH_H_
