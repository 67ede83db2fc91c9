// The agent's data model: what a series is, and one sampling cycle's values.
//
// A collector describes each series once (SeriesDef: where it comes from, its kind, bit width and
// unit) and then fills raw values into a Snapshot every cycle. Raw values are exactly what the
// source reports (a counter in 4-byte words stays in words); scaling to base units happens only
// at exposition, so the aggregator and the analysis see the source's own arithmetic (width,
// saturation) untouched.
#ifndef RINGSIDE_COLLECTORS_COMMON_SERIES_H_
#define RINGSIDE_COLLECTORS_COMMON_SERIES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringside::collectors {

// COUNTER: cumulative, only grows until it wraps, saturates or is reset.
// GAUGE: a level (speed, MTU, lifespan).
// STATE: an enumerated state whose changes matter (IB port state, operstate).
enum class SeriesKind : uint8_t { kCounter = 0, kGauge = 1, kState = 2 };

// The unit of the raw value as the source reports it.
enum class Unit : uint8_t {
  kCount = 0,       // events, errors, frames
  kPackets,         // packets
  kBytes,           // octets
  kFourByteWords,   // IB PMA data counters: octets divided by 4
  kTicks,           // port_xmit_wait: device-defined ticks
  kMicroseconds,    // pause durations
  kMilliseconds,    // hw_counters/lifespan
  kBytesPerSecond,  // link rate, converted from the sysfs text
  kEnum,            // a state id
  kPackedBer,       // NVML packed bit-error rate: mantissa in bits 8-11, exponent in bits
                    // 0-7, BER = mantissa x 10^-exponent (DecodeNvlinkBer)
  kNanoseconds,     // NVML throttle-time counters
  kMegahertz,       // GPU clocks
  kCelsius,         // GPU temperature
  kMilliwatts,      // GPU power and power limit
  kPercent,         // GPU utilisation
};

absl::string_view UnitName(Unit unit);
absl::string_view KindName(SeriesKind kind);

// Where a series comes from. Source names: "infiniband" (PMA counters/ and counters_ext/),
// "infiniband_hw" (hw_counters/), "infiniband_port" (port attributes), "netdev".
struct SeriesDef {
  std::string source;
  std::string device;   // mlx5_0, eth0
  std::string port;     // "1" for an IB port; empty for a netdev
  std::string counter;  // the kernel's own name: "port_rcv_data", "rx_bytes", "state"
  SeriesKind kind = SeriesKind::kCounter;
  uint8_t width = 64;   // bits of the counter as the hardware keeps it; 0 if not a counter
  Unit unit = Unit::kCount;
  // For counters that saturate at all-ones rather than wrap (IB PMA counters).
  bool saturates = false;
  // The traffic priority of a per-priority series (ethtool `rx_prio3_pause` → 3); -1 if none.
  int8_t priority = -1;
  // A counter of `width` bits that is a sum of wrapping counters of `term_width` bits (mlx5
  // hw_counters: the port's 32-bit Q counter plus the bound per-QP ones, printed as a u64). A
  // drop of more than 2^(term_width-1) and at most 2^term_width is one term wrapping, not a reset.
  // 0: not a sum.
  uint8_t term_width = 0;
};

// One value in one cycle.
enum class ValueStatus : uint8_t {
  kOk = 0,
  kUnavailable,  // the source says it has no value ("N/A (no PMA)", speed -1): not an error
  kError,        // the read or parse failed; counted as a read error
  // A valid value read in an earlier cycle and carried over, because its source is read less
  // often than every cycle (NVML's expensive calls, --nvml-slow-interval): /metrics shows it, but
  // it is not uploaded again as a new sample, so rates over uploaded samples stay exact.
  kStale,
};

struct Value {
  uint64_t raw = 0;
  ValueStatus status = ValueStatus::kUnavailable;
};

// Non-numeric facts about a device or port (firmware, board, link layer, netdev mapping), for
// info metrics and for joining sources. Keyed by (source, device, port).
struct InfoRecord {
  std::string source;  // "infiniband_device", "infiniband_port", "netdev"
  std::string device;
  std::string port;
  std::map<std::string, std::string> labels;
};

// The set of series a collector currently has. Shared, immutable once published: it only changes
// when a collector rediscovers its devices.
struct SeriesTable {
  std::vector<SeriesDef> defs;
  std::vector<InfoRecord> info;
};

// One collector's output for one cycle.
struct CollectorSnapshot {
  std::string collector;
  std::shared_ptr<const SeriesTable> table;
  std::vector<Value> values;  // parallel to table->defs
  absl::Time timestamp;
  absl::Duration duration;    // wall time the collection took
  uint64_t read_errors = 0;   // this cycle
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_COMMON_SERIES_H_
