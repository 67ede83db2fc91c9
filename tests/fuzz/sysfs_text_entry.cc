// SysfsText: the sysfs attribute parsers (collectors/common/parse.h) on arbitrary text, with their
// documented promises checked.
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "collectors/common/parse.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"

namespace ringside::fuzz {

namespace c = ringside::collectors;

bool SysfsText(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  bool accepted = false;

  absl::StatusOr<uint64_t> u = c::ParseUint64(text);
  if (u.ok()) {
    accepted = true;
    FUZZ_CHECK(c::ParseUint64(absl::StrCat(*u, "\n")).value() == *u);  // round trip
  } else {
    FUZZ_CHECK(u.status().code() == absl::StatusCode::kDataLoss);
  }
  absl::StatusOr<int64_t> i = c::ParseInt64(text);
  if (i.ok()) {
    accepted = true;
    FUZZ_CHECK(c::ParseInt64(absl::StrCat(*i)).value() == *i);
  }
  absl::StatusOr<c::IdAndName> id = c::ParseIdAndName(text);
  if (id.ok()) {
    accepted = true;
    FUZZ_CHECK(id->name.size() <= size);
  }
  absl::StatusOr<uint64_t> rate = c::ParseIbRateBytesPerSecond(text);
  if (rate.ok()) accepted = true;
  (void)c::IsNotAvailableText(text);
  const absl::string_view first = c::FirstLine(text);
  FUZZ_CHECK(first.size() <= size);
  FUZZ_CHECK(first.empty() || (first.data() >= text.data() &&
                               first.data() + first.size() <= text.data() + text.size()));
  return accepted;
}

}  // namespace ringside::fuzz
