// Watches RTM_NEWLINK/RTM_DELLINK on a NETLINK_ROUTE socket (group RTMGRP_LINK) and turns every
// carrier or operational-state change of an interface into a LinkEvent.
//
// Netlink messages carry no timestamp (SO_TIMESTAMP gives none on netlink sockets), so each event
// is stamped with the time it was read; the agent reads from a thread blocked on fd(), which puts
// the stamp within microseconds of the kernel's notification. A flap much shorter than the
// sampling interval still produces its own messages, each stamped in order. The kernel's own
// carrier up/down counts (IFLA_CARRIER_UP_COUNT/DOWN_COUNT) reveal transitions whose messages were
// coalesced or lost (socket overflow), which are then recorded as "inferred".
//
// Overflow (ENOBUFS: notifications were dropped) is answered with a fresh RTM_GETLINK dump applied
// as a diff. The dump's NLMSG_DONE closes it: interfaces known before but absent from a complete
// dump were deleted while messages were lost, and are reported down and forgotten. A dump the
// kernel refuses (NLMSG_ERROR, e.g. EBUSY while another dump runs on the socket) or one during
// which the socket overflowed again is requested again. The receive buffer asked for may be capped
// by net.core.rmem_max (SO_RCVBUFFORCE needs CAP_NET_ADMIN): receive_buffer_capped() says so.
#ifndef RINGSIDE_COLLECTORS_NETLINK_LINK_WATCHER_H_
#define RINGSIDE_COLLECTORS_NETLINK_LINK_WATCHER_H_

#include <cstdint>
#include <map>
#include <set>
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
  uint32_t seq = 0;       // nlmsg_seq: 0 for notifications, the request's for dump answers
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

struct NetlinkWatcherOptions {
  // SO_RCVBUF asked for (SO_RCVBUFFORCE first); the kernel doubles it for bookkeeping.
  int receive_buffer_bytes = 4 << 20;
  // A refused resync dump is requested again after this long (from Tick()).
  absl::Duration dump_retry = absl::Milliseconds(200);
};

class NetlinkLinkWatcher {
 public:
  // Opens the socket in the calling thread's network namespace, subscribes, and learns the
  // current state of every interface (a dump), so the first change is a real transition.
  static absl::StatusOr<std::unique_ptr<NetlinkLinkWatcher>> Open(
      NetlinkWatcherOptions options = {});
  // Takes any socket whose peer speaks rtnetlink (tests: one end of a socketpair, with the test
  // as the kernel) and sends the first dump request; nothing is read yet.
  static absl::StatusOr<std::unique_ptr<NetlinkLinkWatcher>> Adopt(
      int fd, NetlinkWatcherOptions options = {});
  ~NetlinkLinkWatcher();

  int fd() const { return fd_; }
  // Reads every pending message without blocking; appends transitions stamped `received`.
  // An overflow (ENOBUFS) is counted and answered with a fresh dump.
  void Drain(absl::Time received, std::vector<LinkEvent>& out);
  // What Drain does on ENOBUFS: count it, and resynchronise with a dump (now, or when the dump in
  // flight is done).
  void Overflowed(absl::Time now);
  // Requests a resync dump that is still owed (refused earlier), once its retry time has come.
  void Tick(absl::Time now);

  uint64_t overflows() const { return overflows_; }
  uint64_t malformed() const { return malformed_; }
  // Dumps the kernel refused with NLMSG_ERROR.
  uint64_t dump_errors() const { return dump_errors_; }
  // Interfaces forgotten because a complete resync dump no longer listed them.
  uint64_t vanished() const { return vanished_; }
  bool dump_in_flight() const { return dump_in_flight_; }
  bool resync_owed() const { return resync_owed_; }
  // The receive buffer the kernel granted (what SO_RCVBUF reads back, halved), and whether it is
  // less than asked for.
  int receive_buffer_bytes() const { return rcvbuf_bytes_; }
  bool receive_buffer_capped() const { return rcvbuf_bytes_ < options_.receive_buffer_bytes; }
  int receive_buffer_wanted() const { return options_.receive_buffer_bytes; }

 private:
  NetlinkLinkWatcher(int fd, NetlinkWatcherOptions options) : fd_(fd), options_(options) {}
  absl::Status RequestDump();
  void StartDump(absl::Time now);
  void Receive(const uint8_t* data, size_t len, absl::Time received, std::vector<LinkEvent>& out);
  void DumpDone(absl::Time received, std::vector<LinkEvent>& out);
  void Apply(const NetlinkLinkInfo& info, absl::Time received, std::vector<LinkEvent>& out);

  struct Known {
    std::string name;
    LinkState state = LinkState::kUnknown;
    int64_t up_count = -1;
    int64_t down_count = -1;
  };
  int fd_;
  NetlinkWatcherOptions options_;
  uint32_t seq_ = 1;
  std::map<int, Known> known_;
  uint64_t overflows_ = 0;
  uint64_t malformed_ = 0;
  uint64_t dump_errors_ = 0;
  uint64_t vanished_ = 0;
  int rcvbuf_bytes_ = 0;
  // The dump in flight: its sequence number, the interfaces it listed so far, and whether the
  // socket overflowed while it ran (then it cannot say what was deleted, and is redone).
  bool dump_in_flight_ = false;
  uint32_t dump_seq_ = 0;
  std::set<int> dump_seen_;
  bool overflow_during_dump_ = false;
  bool resync_owed_ = false;  // a resync dump is due (refused, or failed to send)
  absl::Time retry_at_ = absl::InfinitePast();
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NETLINK_LINK_WATCHER_H_
