// SHA-256 and HMAC-SHA256 (OpenSSL's libcrypto) as lowercase hex: the webhook signature
// (X-Ringside-Signature: sha256=<hex>) and stable short names for receivers.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_ALERTS_HMAC_H_
#define RINGSIDE_DAEMON_AGGREGATOR_ALERTS_HMAC_H_

#include <string>

#include "absl/strings/string_view.h"

namespace ringside::daemon {

// HMAC-SHA256 of `data` under `key`, 64 lowercase hex digits.
std::string HmacSha256Hex(absl::string_view key, absl::string_view data);
// SHA-256 of `data`, 64 lowercase hex digits.
std::string Sha256Hex(absl::string_view data);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_ALERTS_HMAC_H_
