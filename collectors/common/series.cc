#include "collectors/common/series.h"

namespace ringside::collectors {

absl::string_view UnitName(Unit unit) {
  switch (unit) {
    case Unit::kCount:
      return "count";
    case Unit::kPackets:
      return "packets";
    case Unit::kBytes:
      return "bytes";
    case Unit::kFourByteWords:
      return "4-byte-words";
    case Unit::kTicks:
      return "ticks";
    case Unit::kMicroseconds:
      return "microseconds";
    case Unit::kMilliseconds:
      return "milliseconds";
    case Unit::kBytesPerSecond:
      return "bytes-per-second";
    case Unit::kEnum:
      return "enum";
    case Unit::kPackedBer:
      return "packed-ber";
    case Unit::kNanoseconds:
      return "nanoseconds";
    case Unit::kMegahertz:
      return "megahertz";
    case Unit::kCelsius:
      return "celsius";
    case Unit::kMilliwatts:
      return "milliwatts";
    case Unit::kPercent:
      return "percent";
  }
  return "unknown";
}

absl::string_view KindName(SeriesKind kind) {
  switch (kind) {
    case SeriesKind::kCounter:
      return "counter";
    case SeriesKind::kGauge:
      return "gauge";
    case SeriesKind::kState:
      return "state";
  }
  return "unknown";
}

}  // namespace ringside::collectors
