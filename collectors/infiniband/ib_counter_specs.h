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
  uint8_t term_width = 0;  // SeriesDef::term_width
};

// A file in ports/<n>/counters/. `extended_width` says the port answers with the 64-bit (EXT_WIDTH)
// data and packet counters; otherwise those are 32-bit. PMA counters saturate, they never wrap.
CounterSpec PmaCounterSpec(absl::string_view name, bool extended_width);

// A file in ports/<n>/counters_ext/ (mlx4, kernels before 4.5): all 64-bit.
CounterSpec PmaExtCounterSpec(absl::string_view name);

// A file in ports/<n>/hw_counters/: a 64-bit counter whatever the hardware register's width.
// The kernel prints a u64 sum (core/sysfs.c print_hw_stat): the port's Q counter (32-bit in mlx5)
// plus every bound per-QP counter and the history of freed ones, so after `rdma statistic qp set
// ... auto` a "32-bit" Q counter passes 2^32 - 1 without wrapping. `lifespan` is a gauge in ms.
// Switchdev names (`vport_<name>`) are their base name's. Unknown names: 64-bit counters. Q counters
// carry term_width 32: a drop of about 2^32 is the port's Q counter wrapping.
CounterSpec HwCounterSpec(absl::string_view name);
CounterSpec HwCounterSpec(absl::string_view name);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_INFINIBAND_IB_COUNTER_SPECS_H_
