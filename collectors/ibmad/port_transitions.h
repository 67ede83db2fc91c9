// Link transitions of scanned ports, inferred from two consecutive scans.
//
// A fabric scan sees a port's PortInfo state only when it reads it, so a transition is stamped
// with the time of the scan that first saw the new state, and is seen at scan granularity: a
// flap that starts and ends between two scans leaves the state unchanged. For those, the port's
// LinkDownedCounter (which the PMA increments each time the link goes down) tells how many downs
// were missed; each becomes an inferred down→up pair, like the netlink watcher's
// carrier_down_count inference.
#ifndef RINGSIDE_COLLECTORS_IBMAD_PORT_TRANSITIONS_H_
#define RINGSIDE_COLLECTORS_IBMAD_PORT_TRANSITIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "collectors/common/link_event.h"

namespace ringside::collectors {

// Up: ACTIVE (4) or ACTIVE_DEFER (5), the states in which the port carries traffic. Down: DOWN,
// INIT and ARMED (the link is not usable; a port that retrained after a failure sits in INIT
// until the SM activates it). Unknown: 0 or out of range.
LinkState LinkStateOfPortState(uint8_t state);

// One scan's reading of one port; `has_*` false when that query failed.
struct PortReading {
  bool has_state = false;
  uint8_t state = 0;
  uint8_t phys_state = 0;
  bool has_link_downed = false;
  uint64_t link_downed = 0;  // 8-bit PMA LinkDownedCounter, saturates at 255
};

class PortTransitionTracker {
 public:
  // At most this many inferred down→up pairs per port and scan (a counter jump past it is still
  // a flapping port; the exact count stays in the link_downed series).
  static constexpr uint64_t kMaxInferredPairs = 8;

  // Feeds one scan's reading of (device, port) made at `now`; appends the transitions since the
  // previous reading to `out`. The first reading of a port only sets the baseline. A failed state
  // query keeps the last known state (the node may just be unreachable from here for a while).
  void Observe(const std::string& device, const std::string& port, const PortReading& reading,
               absl::Time now, std::vector<LinkEvent>& out);

  // Forgets ports not seen since `before` (nodes removed from the targets).
  void ForgetOlderThan(absl::Time before);

 private:
  struct Known {
    bool has_state = false;
    uint8_t state = 0;
    uint8_t phys_state = 0;
    bool has_link_downed = false;
    uint64_t link_downed = 0;
    absl::Time last_seen;
  };
  std::map<std::pair<std::string, std::string>, Known> known_;
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_IBMAD_PORT_TRANSITIONS_H_
