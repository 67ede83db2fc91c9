// Minimal JSON text helpers for the daemons' machine-readable output.
#ifndef RINGSIDE_DAEMON_COMMON_JSON_H_
#define RINGSIDE_DAEMON_COMMON_JSON_H_

#include <string>
#include "absl/strings/string_view.h"

namespace ringside::daemon {

// `s` as a JSON string literal, quotes included; control characters and invalid bytes escaped.
std::string JsonQuote(absl::string_view s);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_JSON_H_
