// A link-state transition seen by an event source (netlink RTM_NEWLINK, libibverbs async events,
// a fabric scan) or inferred from two samples. Events keep the time they were observed, so a flap
// shorter than the sampling interval is still recorded with its order and timing.
#ifndef RINGSIDE_COLLECTORS_COMMON_LINK_EVENT_H_
#define RINGSIDE_COLLECTORS_COMMON_LINK_EVENT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringside::collectors {

enum class LinkState : uint8_t { kUnknown = 0, kDown = 1, kUp = 2 };

absl::string_view LinkStateName(LinkState s);

struct LinkEvent {
  absl::Time time;        // when the source reported it (see each source for how close that is)
  std::string source;     // "netlink", "verbs", "ibmad", "sysfs"
  std::string device;     // netdev name, RDMA device, or switch GUID/LID for a fabric scan
  std::string port;       // RDMA/switch port; empty for a netdev
  LinkState from = LinkState::kUnknown;
  LinkState to = LinkState::kUnknown;
  std::string detail;     // e.g. "operstate down, carrier 0" or "IBV_EVENT_PORT_ERR"
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_COMMON_LINK_EVENT_H_
