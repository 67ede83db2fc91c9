// The series one port of a healthy node sends each second, shared by ringside-ingest-bench and
// ringside-detector-bench so both measure the same load.
#ifndef RINGSIDE_BENCH_PORT_SERIES_H_
#define RINGSIDE_BENCH_PORT_SERIES_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"

#include "ringside/v1/ingest.pb.h"

namespace ringside::bench {

// What one port of a healthy node sends each second: InfiniBand PMA counters, mlx5 hw_counters,
// ethtool PFC per priority, port state and netdev carrier counts — the series the detectors read,
// with healthy increments (traffic moves, errors stay, pauses stay far below the storm rule), so
// "detectors on" pays for real routing and detector work.
struct PortSeries {
  const char* source;
  const char* counter;
  int priority;
  ringside::v1::SeriesKind kind;
  uint32_t width;
  const char* unit;
  uint64_t step;  // counters: increase per second; states and gauges: the value
};
inline constexpr ringside::v1::SeriesKind kC = ringside::v1::SERIES_KIND_COUNTER;
inline constexpr ringside::v1::SeriesKind kS = ringside::v1::SERIES_KIND_STATE;
inline const std::vector<PortSeries> kPortSeries = {
    {"infiniband", "symbol_error", -1, kC, 16, "count", 0},
    {"infiniband", "link_error_recovery", -1, kC, 8, "count", 0},
    {"infiniband", "link_downed", -1, kC, 8, "count", 0},
    {"infiniband", "port_rcv_errors", -1, kC, 16, "count", 0},
    {"infiniband", "port_rcv_remote_physical_errors", -1, kC, 16, "count", 0},
    {"infiniband", "port_rcv_switch_relay_errors", -1, kC, 16, "count", 0},
    {"infiniband", "port_xmit_discards", -1, kC, 16, "count", 0},
    {"infiniband", "port_xmit_constraint_errors", -1, kC, 8, "count", 0},
    {"infiniband", "port_rcv_constraint_errors", -1, kC, 8, "count", 0},
    {"infiniband", "local_link_integrity_errors", -1, kC, 4, "count", 0},
    {"infiniband", "excessive_buffer_overrun_errors", -1, kC, 4, "count", 0},
    {"infiniband", "VL15_dropped", -1, kC, 16, "count", 0},
    {"infiniband", "port_xmit_data", -1, kC, 64, "4-byte-words", 2'500'000'000},
    {"infiniband", "port_rcv_data", -1, kC, 64, "4-byte-words", 2'400'000'000},
    {"infiniband", "port_xmit_packets", -1, kC, 64, "packets", 2'400'000},
    {"infiniband", "port_rcv_packets", -1, kC, 64, "packets", 2'300'000},
    {"infiniband", "unicast_xmit_packets", -1, kC, 64, "packets", 2'400'000},
    {"infiniband", "unicast_rcv_packets", -1, kC, 64, "packets", 2'300'000},
    {"infiniband", "multicast_xmit_packets", -1, kC, 64, "packets", 3},
    {"infiniband", "multicast_rcv_packets", -1, kC, 64, "packets", 3},
    {"infiniband", "port_xmit_wait", -1, kC, 64, "ticks", 20'000},
    {"infiniband_hw", "np_ecn_marked_roce_packets", -1, kC, 32, "packets", 10},
    {"infiniband_hw", "np_cnp_sent", -1, kC, 32, "packets", 10},
    {"infiniband_hw", "rp_cnp_handled", -1, kC, 32, "packets", 10},
    {"infiniband_hw", "rp_cnp_ignored", -1, kC, 32, "packets", 0},
    {"infiniband_hw", "out_of_buffer", -1, kC, 32, "count", 0},
    {"infiniband_hw", "out_of_sequence", -1, kC, 32, "count", 0},
    {"infiniband_hw", "packet_seq_err", -1, kC, 32, "count", 0},
    {"infiniband_hw", "local_ack_timeout_err", -1, kC, 32, "count", 0},
    {"infiniband_hw", "duplicate_request", -1, kC, 32, "count", 0},
    {"infiniband_hw", "rnr_nak_retry_err", -1, kC, 32, "count", 0},
    {"ethtool", "rx_prio0_pause", 0, kC, 64, "packets", 0},
    {"ethtool", "tx_prio0_pause", 0, kC, 64, "packets", 0},
    {"ethtool", "rx_prio3_pause", 3, kC, 64, "packets", 40},
    {"ethtool", "tx_prio3_pause", 3, kC, 64, "packets", 40},
    {"ethtool", "rx_prio3_pause_duration", 3, kC, 64, "microseconds", 2'000},
    {"ethtool", "tx_prio3_pause_duration", 3, kC, 64, "microseconds", 2'000},
    {"ethtool", "rx_prio3_pause_transition", 3, kC, 64, "count", 20},
    {"ethtool", "rx_prio5_pause", 5, kC, 64, "packets", 0},
    {"ethtool", "tx_prio5_pause", 5, kC, 64, "packets", 0},
    {"ethtool", "rx_prio5_pause_duration", 5, kC, 64, "microseconds", 0},
    {"ethtool", "tx_prio5_pause_duration", 5, kC, 64, "microseconds", 0},
    {"ethtool", "rx_pause_ctrl_phy", -1, kC, 64, "packets", 0},
    {"ethtool", "tx_pause_ctrl_phy", -1, kC, 64, "packets", 0},
    {"ethtool", "tx_pause_storm_warning_events", -1, kC, 64, "count", 0},
    {"ethtool", "tx_pause_storm_error_events", -1, kC, 64, "count", 0},
    {"ethtool", "link_down_events_phy", -1, kC, 64, "count", 0},
    {"ethtool", "rx_discards_phy", -1, kC, 64, "packets", 0},
    {"ethtool", "tx_discards_phy", -1, kC, 64, "packets", 0},
    {"ethtool", "rx_prio3_ecn_mark", 3, kC, 64, "packets", 5},
    {"infiniband_port", "state", -1, kS, 0, "state", 4},
    {"infiniband_port", "phys_state", -1, kS, 0, "state", 5},
    {"netdev", "carrier_changes", -1, kC, 64, "count", 0},
    {"netdev", "carrier_up_count", -1, kC, 64, "count", 0},
    {"netdev", "carrier_down_count", -1, kC, 64, "count", 0},
    {"netdev", "rx_bytes", -1, kC, 64, "bytes", 10'000'000'000},
    {"netdev", "tx_bytes", -1, kC, 64, "bytes", 10'000'000'000},
    {"netdev", "rx_packets", -1, kC, 64, "packets", 2'400'000},
    {"netdev", "tx_packets", -1, kC, 64, "packets", 2'400'000},
    {"netdev", "operstate", -1, kS, 0, "state", 6},
};

// Series 0..n-1 of one agent: kPortSeries over and over, the k-th repetition being port k (an RDMA
// device mlx5_<k> port 1, and netdev eth<k> for the ethtool and netdev series).
inline void AddPortSeriesDefs(int n_series, ringside::v1::SeriesDefs* defs) {
  for (int s = 0; s < n_series; ++s) {
    const PortSeries& ps = kPortSeries[s % kPortSeries.size()];
    const int port = s / static_cast<int>(kPortSeries.size());
    auto* d = defs->add_defs();
    d->set_id(s);
    d->set_source(ps.source);
    const bool is_netdev =
        std::string_view(ps.source) == "ethtool" || std::string_view(ps.source) == "netdev";
    d->set_device(is_netdev ? absl::StrCat("eth", port) : absl::StrCat("mlx5_", port));
    d->set_port(is_netdev ? "" : "1");
    d->set_counter(ps.counter);
    d->set_priority(ps.priority);
    d->set_kind(ps.kind);
    d->set_width(ps.kind == ringside::v1::SERIES_KIND_COUNTER ? ps.width : 0);
    d->set_unit(ps.unit);
  }
}

// The next second's values: counters advance by their step, states hold their value.
inline void AdvancePortSeries(ringside::v1::SampleBatch* b) {
  for (int s = 0; s < b->values_size(); ++s) {
    const PortSeries& ps = kPortSeries[s % kPortSeries.size()];
    b->set_values(s, ps.kind == ringside::v1::SERIES_KIND_COUNTER ? b->values(s) + ps.step
                                                                  : ps.step);
  }
}

}  // namespace ringside::bench

#endif  // RINGSIDE_BENCH_PORT_SERIES_H_
