// Bit width, unit and overflow behaviour of every known InfiniBand counter file, from
// shared/reference/ib-roce-counters.md (§3.2 PMA counters, §3.3 counters_ext, §4.2 mlx5
// hw_counters).
#ifndef RINGSIDE_COLLECTORS_INFINIBAND_IB_COUNTER_SPECS_H_
#define RINGSIDE_COLLECTORS_INFINIBAND_IB_COUNTER_SPECS_H_

#include <cstdint>
#include <string_view>

#include "absl/strings/string_view.h"
#include "collectors/common/series.h"

namespace ringside::collectors {

struct CounterSpec {
  SeriesKind kind = SeriesKind::kCounter;
  uint8_t width = 64;
  Unit unit = Unit::kCount;
  bool saturates = false;
  bool known = false;  // false: a name not in the reference; defaults applied
};

// A file in ports/<n>/counters/. `extended_width` says the port answers with the 64-bit (EXT_WIDTH)
// data and packet counters; otherwise those are 32-bit. PMA counters saturate, they never wrap.
CounterSpec PmaCounterSpec(absl::string_view name, bool extended_width);

// A file in ports/<n>/counters_ext/ (mlx4, kernels before 4.5): all 64-bit.
CounterSpec PmaExtCounterSpec(absl::string_view name);

// A file in ports/<n>/hw_counters/. mlx5 Q counters are 32-bit and wrap; congestion and optional
// counters are 64-bit; `lifespan` is a gauge in ms. Unknown names: 64-bit counters.
CounterSpec HwCounterSpec(absl::string_view name);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_INFINIBAND_IB_COUNTER_SPECS_H_
