// Width-aware counter arithmetic: the delta between two raw readings of one counter, told apart
// as a normal increase, a wrap past the counter's width, a reset (driver reload, perfquery -R),
// or saturation (IB PMA counters stick at all-ones).
#ifndef RINGSIDE_ANALYSIS_COUNTER_MATH_H_
#define RINGSIDE_ANALYSIS_COUNTER_MATH_H_

#include <cstdint>
#include "absl/strings/string_view.h"

namespace ringside::analysis {

enum class DeltaKind : uint8_t {
  kNormal,     // cur >= prev, below saturation
  kWrap,       // a wrapping counter passed its maximum: delta = max - prev + 1 + cur
  kReset,      // the value dropped with no wrap: a new baseline; delta = cur (counted since reset)
  kSaturated,  // a saturating counter is at all-ones: delta is a lower bound, rates stop
  kInvalid,    // cur exceeds the counter's width: the width is wrong or the value is garbage
};

absl::string_view DeltaKindName(DeltaKind kind);

struct Delta {
  uint64_t value = 0;
  DeltaKind kind = DeltaKind::kNormal;
};

// The largest value a `width`-bit counter holds (width 1..64; 0 is treated as 64).
constexpr uint64_t CounterMax(uint8_t width) {
  return (width == 0 || width >= 64) ? UINT64_MAX : ((uint64_t{1} << width) - 1);
}

// prev and cur are consecutive raw readings. `saturates`: the counter sticks at its maximum
// (IB PMA) instead of wrapping (mlx5 Q counters, netdev statistics).
//
// A decrease is a wrap only when prev was in the top quarter of the range and cur is in the bottom
// quarter; anything else is a reset. For 64-bit counters that makes every decrease a reset unless
// the counter really was near 2^64.
//
// `term_width` (0: none): the counter is a sum of wrapping counters of that many bits (mlx5
// hw_counters: the port's 32-bit Q counter plus those of bound QPs, printed as a u64). A drop of
// more than 2^(term_width-1) and at most 2^term_width is then one term wrapping (kWrap), not a
// reset.
Delta ComputeDelta(uint64_t prev, uint64_t cur, uint8_t width, bool saturates,
                   uint8_t term_width = 0);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_COUNTER_MATH_H_
