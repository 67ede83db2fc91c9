#include "analysis/counter_math.h"

namespace ringside::analysis {

absl::string_view DeltaKindName(DeltaKind kind) {
  switch (kind) {
    case DeltaKind::kNormal:
      return "normal";
    case DeltaKind::kWrap:
      return "wrap";
    case DeltaKind::kReset:
      return "reset";
    case DeltaKind::kSaturated:
      return "saturated";
    case DeltaKind::kInvalid:
      return "invalid";
  }
  return "unknown";
}

Delta ComputeDelta(uint64_t prev, uint64_t cur, uint8_t width, bool saturates,
                   uint8_t term_width) {
  const uint64_t max = CounterMax(width);
  if (cur > max || prev > max) return {0, DeltaKind::kInvalid};
  if (saturates && cur == max) {
    return {cur >= prev ? cur - prev : 0, DeltaKind::kSaturated};
  }
  if (cur >= prev) return {cur - prev, DeltaKind::kNormal};
  const uint64_t quarter = max / 4;
  if (!saturates && prev > max - quarter && cur < quarter) {
    return {(max - prev) + 1 + cur, DeltaKind::kWrap};
  }
  const uint8_t bits = (width == 0 || width > 64) ? 64 : width;
  if (!saturates && term_width > 0 && term_width < bits) {
    const uint64_t term = uint64_t{1} << term_width;
    const uint64_t drop = prev - cur;
    if (drop > term / 2 && drop <= term) return {cur + term - prev, DeltaKind::kWrap};
  }
  return {cur, DeltaKind::kReset};
}

}  // namespace ringside::analysis
