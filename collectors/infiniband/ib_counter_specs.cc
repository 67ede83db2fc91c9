#include "collectors/infiniband/ib_counter_specs.h"

#include <array>
#include <utility>

#include "absl/strings/strip.h"

namespace ringside::collectors {
namespace {

struct Entry {
  absl::string_view name;
  uint8_t width;
  Unit unit;
};

// PMA counters with a fixed width (reference §3.2).
constexpr std::array<Entry, 13> kPmaFixed = {{
    {"symbol_error", 16, Unit::kCount},
    {"link_error_recovery", 8, Unit::kCount},
    {"link_downed", 8, Unit::kCount},
    {"port_rcv_errors", 16, Unit::kCount},
    {"port_rcv_remote_physical_errors", 16, Unit::kCount},
    {"port_rcv_switch_relay_errors", 16, Unit::kCount},
    {"port_xmit_discards", 16, Unit::kCount},
    {"port_xmit_constraint_errors", 8, Unit::kCount},
    {"port_rcv_constraint_errors", 8, Unit::kCount},
    {"local_link_integrity_errors", 4, Unit::kCount},
    {"excessive_buffer_overrun_errors", 4, Unit::kCount},
    {"VL15_dropped", 16, Unit::kCount},
    {"port_xmit_wait", 32, Unit::kTicks},
}};

// Data and packet counters: 32-bit in the basic set, 64-bit with EXT_WIDTH.
constexpr std::array<Entry, 4> kPmaDataPackets = {{
    {"port_xmit_data", 0, Unit::kFourByteWords},
    {"port_rcv_data", 0, Unit::kFourByteWords},
    {"port_xmit_packets", 0, Unit::kPackets},
    {"port_rcv_packets", 0, Unit::kPackets},
}};

// Present only in the extended set, always 64-bit.
constexpr std::array<Entry, 5> kPma64 = {{
    {"unicast_xmit_packets", 64, Unit::kPackets},
    {"unicast_rcv_packets", 64, Unit::kPackets},
    {"multicast_xmit_packets", 64, Unit::kPackets},
    {"multicast_rcv_packets", 64, Unit::kPackets},
    // Not in the core PMA group; some drivers and fixtures have it (reference §3.2).
    {"port_rcv_discards", 16, Unit::kCount},
}};

constexpr std::array<Entry, 8> kPmaExt = {{
    {"port_xmit_data_64", 64, Unit::kFourByteWords},
    {"port_rcv_data_64", 64, Unit::kFourByteWords},
    {"port_xmit_packets_64", 64, Unit::kPackets},
    {"port_rcv_packets_64", 64, Unit::kPackets},
    {"port_unicast_xmit_packets", 64, Unit::kPackets},
    {"port_unicast_rcv_packets", 64, Unit::kPackets},
    {"port_multicast_xmit_packets", 64, Unit::kPackets},
    {"port_multicast_rcv_packets", 64, Unit::kPackets},
}};

// mlx5 hw_counters (reference §4.2; hw/mlx5/counters.c) with their register widths; the files are
// all 64-bit sums (see HwCounterSpec). The op counters (cc_*, rdma_tx/rx_*) are
// IB_STAT_FLAG_OPTIONAL: sysfs never shows them (only RDMA netlink does), so they are not here.
constexpr std::array<Entry, 32> kHw = {{
    // Q counters: 32-bit registers (basic, out_of_seq, retrans, extended_err, roce_accl).
    {"rx_write_requests", 32, Unit::kCount},
    {"rx_read_requests", 32, Unit::kCount},
    {"rx_atomic_requests", 32, Unit::kCount},
    {"out_of_buffer", 32, Unit::kCount},
    {"rx_dct_connect", 32, Unit::kCount},
    {"out_of_sequence", 32, Unit::kPackets},
    {"duplicate_request", 32, Unit::kPackets},
    {"rnr_nak_retry_err", 32, Unit::kCount},
    {"packet_seq_err", 32, Unit::kCount},
    {"implied_nak_seq_err", 32, Unit::kCount},
    {"local_ack_timeout_err", 32, Unit::kCount},
    {"resp_local_length_error", 32, Unit::kCount},
    {"resp_cqe_error", 32, Unit::kCount},
    {"req_cqe_error", 32, Unit::kCount},
    {"req_remote_invalid_request", 32, Unit::kCount},
    {"req_remote_access_errors", 32, Unit::kCount},
    {"resp_remote_access_errors", 32, Unit::kCount},
    {"resp_cqe_flush_error", 32, Unit::kCount},
    {"req_cqe_flush_error", 32, Unit::kCount},
    {"req_transport_retries_exceeded", 32, Unit::kCount},
    {"req_rnr_retries_exceeded", 32, Unit::kCount},
    {"roce_adp_retrans", 32, Unit::kCount},
    {"roce_adp_retrans_to", 32, Unit::kCount},
    {"roce_slow_restart", 32, Unit::kCount},
    {"roce_slow_restart_cnps", 32, Unit::kCount},
    {"roce_slow_restart_trans", 32, Unit::kCount},
    // Congestion (read from the _high offsets) and extended PPCNT: 64-bit registers.
    {"rp_cnp_ignored", 64, Unit::kPackets},
    {"rp_cnp_handled", 64, Unit::kPackets},
    {"np_ecn_marked_roce_packets", 64, Unit::kPackets},
    {"np_cnp_sent", 64, Unit::kPackets},
    {"rx_icrc_encapsulated", 64, Unit::kPackets},
    {"lifespan", 0, Unit::kMilliseconds},
}};

template <size_t N>
const Entry* Find(const std::array<Entry, N>& table, absl::string_view name) {
  for (const Entry& e : table) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

CounterSpec Make(const Entry& e, uint8_t width, bool saturates) {
  CounterSpec spec;
  spec.kind = SeriesKind::kCounter;
  spec.width = width;
  spec.unit = e.unit;
  spec.saturates = saturates;
  spec.known = true;
  return spec;
}

}  // namespace

CounterSpec PmaCounterSpec(absl::string_view name, bool extended_width) {
  if (const Entry* e = Find(kPmaFixed, name)) return Make(*e, e->width, true);
  if (const Entry* e = Find(kPmaDataPackets, name)) {
    return Make(*e, extended_width ? 64 : 32, true);
  }
  if (const Entry* e = Find(kPma64, name)) return Make(*e, e->width, true);
  CounterSpec unknown;  // a PMA name the reference does not list: assume 64-bit, saturating
  unknown.saturates = true;
  return unknown;
}

CounterSpec PmaExtCounterSpec(absl::string_view name) {
  if (const Entry* e = Find(kPmaExt, name)) return Make(*e, 64, false);
  return CounterSpec{};
}

CounterSpec HwCounterSpec(absl::string_view name) {
  absl::ConsumePrefix(&name, "vport_");  // switchdev mode
  if (const Entry* e = Find(kHw, name)) {
    if (e->unit == Unit::kMilliseconds) {
      CounterSpec spec = Make(*e, 0, false);
      spec.kind = SeriesKind::kGauge;
      return spec;
    }
    CounterSpec spec = Make(*e, 64, false);  // the file: a u64 sum
    if (e->width < 64) spec.term_width = e->width;
    return spec;
  }
  return CounterSpec{};
}

}  // namespace ringside::collectors
