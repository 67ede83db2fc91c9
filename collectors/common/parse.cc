#include "collectors/common/parse.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ringside::collectors {
namespace {

std::string Quote(absl::string_view text) {
  constexpr size_t kMax = 40;
  std::string shown(text.substr(0, kMax));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  return absl::StrCat("\"", shown, text.size() > kMax ? "...\"" : "\"");
}

}  // namespace

absl::StatusOr<uint64_t> ParseUint64(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (s.empty()) return absl::DataLossError("empty value");
  if (s.size() > 20) return absl::DataLossError(absl::StrCat("not a counter: ", Quote(text)));
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return absl::DataLossError(absl::StrCat("not a counter: ", Quote(text)));
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) {
      return absl::DataLossError(absl::StrCat("counter above 2^64-1: ", Quote(text)));
    }
    v = v * 10 + d;
  }
  return v;
}

absl::StatusOr<int64_t> ParseInt64(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  bool neg = absl::ConsumePrefix(&s, "-");
  absl::StatusOr<uint64_t> mag = ParseUint64(s);
  if (!mag.ok() || s.empty() || (s.front() < '0' || s.front() > '9')) {
    return absl::DataLossError(absl::StrCat("not an integer: ", Quote(text)));
  }
  if (*mag > static_cast<uint64_t>(INT64_MAX) + (neg ? 1 : 0)) {
    return absl::DataLossError(absl::StrCat("integer out of range: ", Quote(text)));
  }
  return neg ? static_cast<int64_t>(0 - *mag) : static_cast<int64_t>(*mag);
}

bool IsNotAvailableText(absl::string_view text) {
  return text.find("N/A (no PMA)") != absl::string_view::npos;
}

absl::string_view FirstLine(absl::string_view text) {
  size_t nl = text.find('\n');
  if (nl != absl::string_view::npos) text = text.substr(0, nl);
  return absl::StripTrailingAsciiWhitespace(text);
}

absl::StatusOr<IdAndName> ParseIdAndName(absl::string_view text) {
  absl::string_view line = FirstLine(text);
  size_t colon = line.find(':');
  if (colon == absl::string_view::npos || line.find(':', colon + 1) != absl::string_view::npos) {
    return absl::DataLossError(absl::StrCat("expected \"<id>: <name>\": ", Quote(text)));
  }
  absl::StatusOr<uint64_t> id = ParseUint64(line.substr(0, colon));
  if (!id.ok() || *id > UINT32_MAX) {
    return absl::DataLossError(absl::StrCat("expected \"<id>: <name>\": ", Quote(text)));
  }
  IdAndName out;
  out.id = static_cast<uint32_t>(*id);
  out.name = std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  return out;
}

absl::StatusOr<uint64_t> ParseIbRateBytesPerSecond(absl::string_view text) {
  absl::string_view line = absl::StripLeadingAsciiWhitespace(FirstLine(text));
  size_t space = line.find(' ');
  absl::string_view number = line.substr(0, space);
  absl::string_view rest = space == absl::string_view::npos ? "" : line.substr(space + 1);
  if (!absl::StartsWithIgnoreCase(rest, "Gb/sec")) {
    return absl::DataLossError(absl::StrCat("expected \"<n> Gb/sec ...\": ", Quote(text)));
  }
  // Gb/s with at most 3 decimals (2.5, 10, 12.5, 0): compute in milli-Gb/s to stay exact.
  absl::string_view whole = number;
  absl::string_view frac;
  if (size_t dot = number.find('.'); dot != absl::string_view::npos) {
    whole = number.substr(0, dot);
    frac = number.substr(dot + 1);
  }
  if (frac.size() > 3) return absl::DataLossError(absl::StrCat("rate: ", Quote(text)));
  absl::StatusOr<uint64_t> w = ParseUint64(whole);
  if (!w.ok() || *w > 1000000) return absl::DataLossError(absl::StrCat("rate: ", Quote(text)));
  uint64_t milli = *w * 1000;
  if (!frac.empty()) {
    absl::StatusOr<uint64_t> f = ParseUint64(frac);
    if (!f.ok()) return absl::DataLossError(absl::StrCat("rate: ", Quote(text)));
    uint64_t scale = frac.size() == 1 ? 100 : frac.size() == 2 ? 10 : 1;
    milli += *f * scale;
  }
  return milli * 125000;  // 1 milli-Gb/s = 10^6 bit/s = 125,000 bytes/s
}

}  // namespace ringside::collectors
