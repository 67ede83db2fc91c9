// bfloat16: the upper 16 bits of an IEEE float32 (sign, 8-bit exponent, 7-bit mantissa). It keeps
// float32's range (about 1e-38 to 3e38, so byte rates of 400 Gb/s links and error rates of 1e-12
// alike) with 8 significant bits: a finite value rounds to nearest (ties to even) with a relative
// error of at most 2^-8 (0.4 %). NaN stays NaN and infinities stay infinite. Used for the rate
// windows of the aggregator's series state (analysis/series_state.h), where 8 rates in 16 bytes
// leave room for the rest of a series in 64 bytes.
#ifndef RINGSIDE_ANALYSIS_BFLOAT16_H_
#define RINGSIDE_ANALYSIS_BFLOAT16_H_

#include <bit>
#include <cstdint>

namespace ringside::analysis {

// Relative rounding error bound of FloatToBFloat16 for finite, normal values.
inline constexpr float kBFloat16RelativeError = 1.0f / 256;

constexpr uint16_t FloatToBFloat16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // NaN: keep it a (quiet) NaN
  }
  // Round to nearest, ties to even; a value past the largest finite bfloat16 becomes infinite,
  // as float32 arithmetic would.
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

constexpr float BFloat16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_BFLOAT16_H_
