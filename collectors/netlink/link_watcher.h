// Watches RTM_NEWLINK/RTM_DELLINK on a NETLINK_ROUTE socket (group RTMGRP_LINK) and turns every
// carrier or operational-state change of an interface into a LinkEvent.
//
// Netlink messages carry no timestamp (SO_TIMESTAMP gives none on netlink sockets), so each event
// is stamped with the time it was read; the agent reads from a thread blocked on fd(), which puts
// the stamp within microseconds of the kernel's notification. A flap much shorter than the
// sampling interval still produces its own messages, each stamped in order. The kernel's own
// carrier up/down counts (IFLA_CARRIER_UP_COUNT/DOWN_COUNT) reveal transitions whose messages were
// coalesced or lost (socket overflow), which are then recorded as "inferred".
#ifndef RINGSIDE_COLLECTORS_NETLINK_LINK_WATCHER_H_
#define RINGSIDE_COLLECTORS_NETLINK_LINK_WATCHER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectors/common/link_event.h"

namespace ringside::collectors {

// What one RTM_NEWLINK says about an interface.
struct NetlinkLinkInfo {
  int ifindex = 0;
  std::string name;
  uint8_t operstate = 0;  // IF_OPER_*: 2 down, 6 up, ...
  bool carrier = false;   // IFF_LOWER_UP / IFLA_CARRIER
  bool admin_up = false;  // IFF_UP
  bool deleted = false;   // RTM_DELLINK
  int64_t carrier_up_count = -1;    // -1: attribute absent
  int64_t carrier_down_count = -1;
};

// Parses one netlink datagram (several messages) into link infos. Malformed messages are skipped
// and counted in `malformed`.
std::vector<NetlinkLinkInfo> ParseLinkMessages(const uint8_t* data, size_t len,
                                               uint64_t* malformed);

// Up when the interface is operationally up (or, for drivers that report IF_OPER_UNKNOWN, when it
// is administratively up with carrier); down otherwise.
LinkState LinkStateOf(const NetlinkLinkInfo& info);

class NetlinkLinkWatcher {
 public:
  // Opens the socket in the calling thread's network namespace, subscribes, and learns the
  // current state of every interface (a dump), so the first change is a real transition.
  static absl::StatusOr<std::unique_ptr<NetlinkLinkWatcher>> Open();
  ~NetlinkLinkWatcher();

  int fd() const { return fd_; }
  // Reads every pending message without blocking; appends transitions stamped `received`.
  // An overflow (ENOBUFS) is counted and answered with a fresh dump.
  void Drain(absl::Time received, std::vector<LinkEvent>& out);

  uint64_t overflows() const { return overflows_; }
  uint64_t malformed() const { return malformed_; }

 private:
  explicit NetlinkLinkWatcher(int fd) : fd_(fd) {}
  absl::Status RequestDump();
  void Apply(const NetlinkLinkInfo& info, absl::Time received, std::vector<LinkEvent>& out);

  struct Known {
    std::string name;
    LinkState state = LinkState::kUnknown;
    int64_t up_count = -1;
    int64_t down_count = -1;
  };
  int fd_;
  uint32_t seq_ = 1;
  std::map<int, Known> known_;
  uint64_t overflows_ = 0;
  uint64_t malformed_ = 0;
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NETLINK_LINK_WATCHER_H_
