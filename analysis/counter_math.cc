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

Delta ComputeDelta(uint64_t prev, uint64_t cur, uint8_t width, bool saturates) {
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
  return {cur, DeltaKind::kReset};
}

}  // namespace ringside::analysis
