// Parsers for the text formats of sysfs attributes. Pure functions; each rejects what it does not
// understand with DataLoss rather than guessing.
#ifndef RINGSIDE_COLLECTORS_COMMON_PARSE_H_
#define RINGSIDE_COLLECTORS_COMMON_PARSE_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"

namespace ringside::collectors {

// "123\n" → 123. Leading/trailing ASCII whitespace is allowed; anything else (sign, letters,
// empty, more than 20 digits, a value above 2^64-1) is DataLoss.
absl::StatusOr<uint64_t> ParseUint64(absl::string_view text);

// "-1\n" and the like: a signed decimal.
absl::StatusOr<int64_t> ParseInt64(absl::string_view text);

// True for the text old kernels write into a PMA counter file when the MAD failed.
bool IsNotAvailableText(absl::string_view text);

// IB port `state` / `phys_state`: "4: ACTIVE" → {4, "ACTIVE"}.
struct IdAndName {
  uint32_t id = 0;
  std::string name;
};
absl::StatusOr<IdAndName> ParseIdAndName(absl::string_view text);

// IB port `rate`: "40 Gb/sec (4X QDR)", "2.5 Gb/sec (1X SDR)", "10 Gb/sec (4X)" → bytes/s,
// computed exactly (Gb/s × 125,000,000).
absl::StatusOr<uint64_t> ParseIbRateBytesPerSecond(absl::string_view text);

// First line of a text attribute, without trailing whitespace.
absl::string_view FirstLine(absl::string_view text);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_COMMON_PARSE_H_
