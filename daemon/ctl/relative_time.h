// Times as the `ringside` CLI shows them: ages relative to now ("3m12s ago"), RFC 3339 for JSON,
// and the parsing of --since/--window values (a duration like 90m, or an RFC 3339 time).
#ifndef RINGSIDE_DAEMON_CTL_RELATIVE_TIME_H_
#define RINGSIDE_DAEMON_CTL_RELATIVE_TIME_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringside::daemon::ctl {

// A compact duration: "0s", "45s", "3m12s", "2h5m", "3d4h". Rounded down to the unit shown;
// negative durations are shown by magnitude.
std::string CompactDuration(absl::Duration d);

// `unix_nanos` relative to `now`: "3m12s ago", "in 5s" (clock skew), "-" when 0 (unset).
std::string Ago(int64_t unix_nanos, absl::Time now);

// RFC 3339 in UTC with seconds ("2026-11-22T08:10:00Z"; fractions only when nonzero, to the
// millisecond). Empty when 0.
std::string Rfc3339(int64_t unix_nanos);

// --since: a duration before `now` ("90m", "1h30m", "2d") or an RFC 3339 time. Returns the time
// in Unix nanoseconds. InvalidArgument for anything else or a time in the future.
absl::StatusOr<int64_t> ParseSince(const std::string& text, absl::Time now);

// A positive duration ("30s", "10m", "2d"). InvalidArgument otherwise.
absl::StatusOr<absl::Duration> ParsePositiveDuration(const std::string& text);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_RELATIVE_TIME_H_
