// absl::Time and absl::Duration in 8 bytes instead of 16, for fields of detector records kept per
// port or priority by the hundred thousand (a pause storm record holds eleven of them). Whole
// nanoseconds since the Unix epoch, with the infinite values as the int64 ends. They convert
// to and from absl's types implicitly, so a record's arithmetic and comparisons read as before.
//
// Exact for what the detectors store: sample times the aggregator builds from whole nanoseconds
// and differences of them. A time or duration past the int64 range of nanoseconds (about
// 292 years from 1970) or finer than a nanosecond would not be: such a time reads back as
// infinite, a sub-nanosecond part is dropped.
#ifndef RINGSIDE_ANALYSIS_COMPACT_TIME_H_
#define RINGSIDE_ANALYSIS_COMPACT_TIME_H_

#include <cstdint>
#include <limits>

#include "absl/time/time.h"

namespace ringside::analysis {

class CompactTime {
 public:
  constexpr CompactTime() = default;  // the Unix epoch, as a default absl::Time
  CompactTime(absl::Time t) : ns_(Encode(t)) {}  // NOLINT: implicit by design
  operator absl::Time() const { return Decode(ns_); }  // NOLINT: implicit by design

 private:
  static constexpr int64_t kPast = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kFuture = std::numeric_limits<int64_t>::max();
  static int64_t Encode(absl::Time t) {
    if (t == absl::InfinitePast()) return kPast;
    if (t == absl::InfiniteFuture()) return kFuture;
    return absl::ToUnixNanos(t);  // saturates at the ends, which read back as infinite
  }
  static absl::Time Decode(int64_t ns) {
    if (ns == kPast) return absl::InfinitePast();
    if (ns == kFuture) return absl::InfiniteFuture();
    return absl::FromUnixNanos(ns);
  }
  int64_t ns_ = 0;
};

class CompactDuration {
 public:
  constexpr CompactDuration() = default;  // zero
  CompactDuration(absl::Duration d) : ns_(Encode(d)) {}  // NOLINT: implicit by design
  operator absl::Duration() const { return Decode(ns_); }  // NOLINT: implicit by design

 private:
  static constexpr int64_t kMinus = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kPlus = std::numeric_limits<int64_t>::max();
  static int64_t Encode(absl::Duration d) {
    if (d == -absl::InfiniteDuration()) return kMinus;
    if (d == absl::InfiniteDuration()) return kPlus;
    return absl::ToInt64Nanoseconds(d);  // saturates at the ends, which read back as infinite
  }
  static absl::Duration Decode(int64_t ns) {
    if (ns == kMinus) return -absl::InfiniteDuration();
    if (ns == kPlus) return absl::InfiniteDuration();
    return absl::Nanoseconds(ns);
  }
  int64_t ns_ = 0;
};

static_assert(sizeof(CompactTime) == 8 && sizeof(CompactDuration) == 8);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_COMPACT_TIME_H_
