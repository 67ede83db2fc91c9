// What the names of a NIC's driver statistics tell: each stat's unit, kind and traffic priority,
// and which of the counters that matter for RoCE fabrics the NIC has at all (its capabilities).
// Names are the mlx5 ones (reference/ib-roce-counters.md §5.2); other drivers simply lack them.
#ifndef RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_NAMES_H_
#define RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_NAMES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "collectors/common/series.h"
#include "collectors/ethtool/ethtool_ioctl.h"

namespace ringside::collectors {

// The priority N of a per-priority stat: a "prio<N>" token ("rx_prio3_pause" → 3,
// "tx_prio0_bytes" → 0), N in 0..15; -1 when the name has none.
int8_t EthtoolPriority(absl::string_view name);

// The name with its "prio<N>" token written "prio<N>" literally ("rx_prio3_pause" →
// "rx_prio<N>_pause"), so one catalog entry covers all priorities; the name itself otherwise.
std::string EthtoolNameTemplate(absl::string_view name);

// *_pause_duration → µs; *_bytes, *_bytes_phy → bytes, except the size bins (a number before the
// suffix: rx_64_bytes_phy, rx_65_to_127_bytes_phy, ...), which count packets; *_packets,
// *_packets_phy → packets; anything else → count.
Unit EthtoolUnit(absl::string_view name);

// Every driver stat is a 64-bit counter except a few known levels: veth's peer_ifindex and mlx5's
// outbound_pci_stalled_rd/_wr (percent of the last second).
SeriesKind EthtoolKind(absl::string_view name);

// Counters mlx5 fills from 32-bit sources, which wrap at 2^32 inside the u64 ethtool reports:
// link_down_events_phy, *_pci_signal_integrity, outbound_pci_stalled_*_events.
bool EthtoolCounterIs32Bit(absl::string_view name);

// The SeriesDef of one stat of one interface.
SeriesDef EthtoolSeriesDef(const std::string& ifname, const std::string& name);

// Which of the counters that answer "is this port paused, pausing, flapping or dropping" a NIC
// reports. Priority sets are bit masks (bit p = priority p).
struct EthtoolCapabilities {
  uint8_t pfc_pause = 0;             // rx_prio<p>_pause / tx_prio<p>_pause (PFC enabled on p)
  uint8_t pfc_pause_duration = 0;    // rx_prio<p>_pause_duration / tx_prio<p>_pause_duration (µs)
  uint8_t pfc_pause_transition = 0;  // rx_prio<p>_pause_transition
  uint8_t ecn_marks = 0;             // rx_prio<p>_marked: packets the device ECN-marked on p
  bool global_pause = false;         // rx_global_pause / tx_global_pause (802.3x mode)
  bool global_pause_duration = false;  // rx_global_pause_duration / tx_global_pause_duration
  bool pause_storm_events = false;     // tx_pause_storm_warning_events / _error_events
  bool link_down_events = false;       // link_down_events_phy
  bool rx_discards_phy = false;
  bool tx_discards_phy = false;
  bool ring_ecn_marks = false;  // rx<i>_ecn_mark
  bool any_pause() const {
    return pfc_pause != 0 || pfc_pause_duration != 0 || global_pause || global_pause_duration;
  }
};

EthtoolCapabilities EthtoolCapabilitiesFromNames(const std::vector<std::string>& names);

// How far the collector got with an interface's statistics.
enum class EthtoolSupport : uint8_t {
  kSupported,    // the driver has statistics (capabilities below say which)
  kUnsupported,  // no statistics at all (loopback, bridges, EOPNOTSUPP)
  kError,        // the string set could not be read (see the cycle's errors)
};

// The "ethtool_caps" info record of one interface, so a missing counter is stated once per
// discovery instead of failing every cycle. Labels:
//   stats                  supported | unsupported | error
//   n_stats                number of driver stats
//   pfc_priorities         priorities with PFC pause frame counters: "3", "0,3", or "none"
//   pfc_duration_priorities, pfc_transition_priorities, ecn_mark_priorities  likewise
//   global_pause, global_pause_duration, pause_storm_events, link_down_events,
//   rx_discards_phy, tx_discards_phy, ring_ecn_marks        "true" | "false"
//   pause_config           "rx=on,tx=on,autoneg=off", "unsupported" (no pause on the device) or
//                          "unknown" (a text dump has no configuration)
//   duplicate_names        (only when the driver repeats a name) how many repeats were dropped
InfoRecord EthtoolCapabilitiesRecord(const std::string& ifname, EthtoolSupport support,
                                     size_t n_stats, const EthtoolCapabilities& caps,
                                     absl::string_view pause_config, size_t duplicate_names);

// "rx=on,tx=off,autoneg=off".
std::string FormatPauseConfig(const EthtoolPauseParam& p);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_NAMES_H_
