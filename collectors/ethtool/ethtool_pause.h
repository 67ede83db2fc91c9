// Pause time per sampling interval, from two samples of the ethtool collector.
//
// mlx5 counts how long a port was paused in µs: `rx_prio<p>_pause_duration` is the time the port
// could not send on priority p because its peer paused it (this host is a victim);
// `tx_prio<p>_pause_duration` the time it paused its peer (this host could not absorb the traffic:
// a possible storm origin). `rx_global_pause_duration` / `tx_global_pause_duration` are the same
// for 802.3x global pause. The growth of such a counter over an interval, divided by the interval's
// wall time, is µs paused per second; divided by 10^6, the fraction of the interval the port was
// paused (reference/ib-roce-counters.md §5.3). The pause_storm detector's rule is "paused >= 50 %
// of the time for >= 3 consecutive samples".
#ifndef RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_PAUSE_H_
#define RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_PAUSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "collectors/common/series.h"

namespace ringside::collectors {

enum class PauseDirection : uint8_t {
  kRx,  // pauses received: the peer stopped this port sending
  kTx,  // pauses sent: this port stopped its peer
};

// One port's pause time on one priority over one interval.
struct PauseInterval {
  std::string device;
  PauseDirection direction = PauseDirection::kRx;
  int priority = -1;                     // 0..7; -1 for 802.3x global pause
  absl::Duration interval;               // wall time between the two samples
  uint64_t paused_us = 0;                // growth of the *_pause_duration counter
  std::optional<uint64_t> pause_frames;  // growth of the matching *_pause counter, if reported
  double paused_us_per_second = 0;       // paused_us / interval in seconds
  double paused_fraction = 0;            // paused_us_per_second / 10^6, at most 1
};

// Every pause-duration series (unit µs, named <rx|tx>_prio<p>_pause_duration or
// <rx|tx>_global_pause_duration) present with a good value in both samples, ordered by device,
// direction and priority (global first). Series are matched by (device, counter), so the two
// samples may come from different tables (a rediscovery in between). A counter that went
// backwards (driver reload, counter reset) gives no interval. Empty unless `later` is later.
// The fraction is capped at 1: a device counter sampled a little later than the wall clock can
// show slightly more than the interval.
std::vector<PauseInterval> PauseDurationPerInterval(const CollectorSnapshot& earlier,
                                                    const CollectorSnapshot& later);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_PAUSE_H_
