// NetlinkLink: rtnetlink link datagrams through ParseLinkMessages and, in order, through a
// NetlinkLinkWatcher on a socketpair whose other end this entry plays the kernel on.
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectors/common/link_event.h"
#include "collectors/netlink/link_watcher.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"
#include "tests/fuzz/fuzz_input.h"

namespace ringside::fuzz {
namespace {

namespace c = ringside::collectors;

// Drains what the watcher sent the "kernel" (its dump requests), checking each is one.
void ReadRequests(int fd) {
  alignas(nlmsghdr) uint8_t buf[256];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) return;
    FUZZ_CHECK(static_cast<size_t>(n) >= sizeof(nlmsghdr));
    nlmsghdr hdr;
    std::memcpy(&hdr, buf, sizeof(hdr));
    FUZZ_CHECK(hdr.nlmsg_type == RTM_GETLINK);
    FUZZ_CHECK(hdr.nlmsg_len == static_cast<uint32_t>(n));
  }
}

}  // namespace

bool NetlinkLink(const uint8_t* data, size_t size) {
  int fds[2];
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, fds) == 0);
  absl::StatusOr<std::unique_ptr<c::NetlinkLinkWatcher>> w = c::NetlinkLinkWatcher::Adopt(fds[0]);
  FUZZ_CHECK(w.ok());
  c::NetlinkLinkWatcher& watcher = **w;
  const int kernel = fds[1];

  FuzzInput in(data, size);
  absl::Time now = absl::FromUnixSeconds(1700000000);
  uint64_t parsed = 0, malformed = 0;
  std::vector<c::LinkEvent> events;
  std::vector<uint8_t> gram;
  while (!in.empty()) {
    const uint8_t op = in.U8();
    gram.resize(std::min<size_t>(in.U16(), in.remaining()));
    in.Fill(gram.data(), gram.size());

    uint64_t bad = 0;
    const std::vector<c::NetlinkLinkInfo> infos = c::ParseLinkMessages(gram.data(), gram.size(), &bad);
    // Each link message is at least a header and an ifinfomsg.
    FUZZ_CHECK(infos.size() * (NLMSG_HDRLEN + sizeof(ifinfomsg)) <= gram.size());
    FUZZ_CHECK(bad <= gram.size() / sizeof(nlmsghdr) + 1);
    for (const c::NetlinkLinkInfo& info : infos) {
      FUZZ_CHECK(info.name.size() <= gram.size());
      FUZZ_CHECK(info.name.find('\0') == std::string::npos);
      const c::LinkState s = c::LinkStateOf(info);
      FUZZ_CHECK(s == c::LinkState::kUp || s == c::LinkState::kDown);
      if (info.deleted) FUZZ_CHECK(s == c::LinkState::kDown);
    }
    parsed += infos.size();
    malformed += bad;

    if (op & 1) watcher.Overflowed(now);
    ReadRequests(kernel);
    if (!gram.empty()) {
      // A datagram the socket cannot take (too large) is one the kernel would not send either.
      (void)::send(kernel, gram.data(), gram.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    const size_t before = events.size();
    watcher.Drain(now, events);
    // At most one real and 1000 inferred transition pairs per message, and one per interface a
    // dump forgets; a datagram holds at most size/32 messages.
    FUZZ_CHECK(events.size() - before <= (gram.size() / 32 + 1) * 2001 + 4096);
    for (size_t i = before; i < events.size(); ++i) {
      const c::LinkEvent& e = events[i];
      FUZZ_CHECK(e.from != e.to);
      FUZZ_CHECK(e.to == c::LinkState::kUp || e.to == c::LinkState::kDown);
      FUZZ_CHECK(e.source == "netlink");
      FUZZ_CHECK(e.time == now);
    }
    FUZZ_CHECK(!(watcher.dump_in_flight() && watcher.resync_owed()));
    now += absl::Milliseconds(100);
    if (op & 2) watcher.Tick(now + absl::Seconds(1));
    if (events.size() > 100000) events.clear();
  }
  ReadRequests(kernel);
  ::close(kernel);
  return parsed > 0 && malformed == 0;
}

}  // namespace ringside::fuzz
