#include "daemon/ctl/relative_time.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringside::daemon::ctl {

std::string CompactDuration(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = -d;
  int64_t s = absl::ToInt64Seconds(d);
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrCat(s / 60, "m", s % 60, "s");
  if (s < 86400) return absl::StrCat(s / 3600, "h", (s % 3600) / 60, "m");
  return absl::StrCat(s / 86400, "d", (s % 86400) / 3600, "h");
}

std::string Ago(int64_t unix_nanos, absl::Time now) {
  if (unix_nanos == 0) return "-";
  absl::Duration d = now - absl::FromUnixNanos(unix_nanos);
  if (d < -absl::Seconds(1)) return absl::StrCat("in ", CompactDuration(d));
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  return absl::StrCat(CompactDuration(d), " ago");
}

std::string Rfc3339(int64_t unix_nanos) {
  if (unix_nanos == 0) return "";
  absl::Time t = absl::FromUnixNanos(unix_nanos);
  const char* format =
      unix_nanos % 1'000'000'000 == 0 ? "%Y-%m-%dT%H:%M:%SZ" : "%Y-%m-%dT%H:%M:%E3SZ";
  return absl::FormatTime(format, t, absl::UTCTimeZone());
}

namespace {

// absl::ParseDuration plus a day unit ("2d", "1d12h").
bool ParseDurationWithDays(std::string text, absl::Duration* out) {
  text = std::string(absl::StripAsciiWhitespace(text));
  absl::Duration days = absl::ZeroDuration();
  size_t d = text.find('d');
  if (d != std::string::npos) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(text.substr(0, d), &n) || n < 0) return false;
    days = absl::Hours(24 * n);
    text = text.substr(d + 1);
    if (text.empty()) {
      *out = days;
      return true;
    }
  }
  absl::Duration rest;
  if (!absl::ParseDuration(text, &rest)) return false;
  *out = days + rest;
  return true;
}

}  // namespace

absl::StatusOr<absl::Duration> ParsePositiveDuration(const std::string& text) {
  absl::Duration d;
  if (!ParseDurationWithDays(text, &d) || d <= absl::ZeroDuration() ||
      d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a positive duration (e.g. 30s, 10m, 2h, 1d)"));
  }
  return d;
}

absl::StatusOr<int64_t> ParseSince(const std::string& text, absl::Time now) {
  absl::Duration d;
  if (ParseDurationWithDays(text, &d)) {
    if (d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(absl::StrCat("--since \"", text, "\" is negative"));
    }
    return absl::ToUnixNanos(now - d);
  }
  absl::Time t;
  std::string err;
  if (absl::ParseTime(absl::RFC3339_full, text, &t, &err)) {
    if (t > now + absl::Minutes(1)) {
      return absl::InvalidArgumentError(absl::StrCat("--since \"", text, "\" is in the future"));
    }
    return absl::ToUnixNanos(t);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--since \"", text,
      "\" is neither a duration (90m, 2h, 1d) nor an RFC 3339 time (2026-11-22T08:00:00Z)"));
}

}  // namespace ringside::daemon::ctl
