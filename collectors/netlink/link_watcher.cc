#include "collectors/netlink/link_watcher.h"

#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringside::collectors {
namespace {

constexpr uint8_t kOperUnknown = 0;
constexpr uint8_t kOperUp = 6;

absl::string_view OperName(uint8_t s) {
  static constexpr absl::string_view kNames[] = {"unknown", "notpresent", "down",   "lowerlayerdown",
                                                 "testing", "dormant",    "up"};
  return s < 7 ? kNames[s] : "invalid";
}

}  // namespace

std::vector<NetlinkLinkInfo> ParseLinkMessages(const uint8_t* data, size_t len,
                                               uint64_t* malformed) {
  std::vector<NetlinkLinkInfo> out;
  size_t off = 0;
  while (off + sizeof(nlmsghdr) <= len) {
    nlmsghdr hdr;
    std::memcpy(&hdr, data + off, sizeof(hdr));
    if (hdr.nlmsg_len < sizeof(nlmsghdr) || off + hdr.nlmsg_len > len) {
      if (malformed) ++*malformed;
      break;  // the rest of the datagram cannot be trusted
    }
    const size_t msg_end = off + hdr.nlmsg_len;
    if ((hdr.nlmsg_type == RTM_NEWLINK || hdr.nlmsg_type == RTM_DELLINK)) {
      const size_t body = off + NLMSG_HDRLEN;
      if (body + sizeof(ifinfomsg) > msg_end) {
        if (malformed) ++*malformed;
      } else {
        ifinfomsg ifi;
        std::memcpy(&ifi, data + body, sizeof(ifi));
        NetlinkLinkInfo info;
        info.seq = hdr.nlmsg_seq;
        info.ifindex = ifi.ifi_index;
        info.admin_up = (ifi.ifi_flags & IFF_UP) != 0;
        info.carrier = (ifi.ifi_flags & IFF_LOWER_UP) != 0;
        info.deleted = hdr.nlmsg_type == RTM_DELLINK;
        size_t a = body + NLMSG_ALIGN(sizeof(ifinfomsg));
        bool bad = false;
        while (a + sizeof(rtattr) <= msg_end) {
          rtattr rta;
          std::memcpy(&rta, data + a, sizeof(rta));
          if (rta.rta_len < sizeof(rtattr) || a + rta.rta_len > msg_end) {
            bad = true;
            break;
          }
          const uint8_t* payload = data + a + RTA_LENGTH(0);
          const size_t plen = rta.rta_len - RTA_LENGTH(0);
          switch (rta.rta_type) {
            case IFLA_IFNAME:
              info.name.assign(reinterpret_cast<const char*>(payload), strnlen(
                  reinterpret_cast<const char*>(payload), plen));
              break;
            case IFLA_OPERSTATE:
              if (plen >= 1) info.operstate = payload[0];
              break;
            case IFLA_CARRIER:
              if (plen >= 1) info.carrier = payload[0] != 0;
              break;
            case IFLA_CARRIER_UP_COUNT:
            case IFLA_CARRIER_DOWN_COUNT:
              if (plen >= 4) {
                uint32_t v;
                std::memcpy(&v, payload, 4);
                (rta.rta_type == IFLA_CARRIER_UP_COUNT ? info.carrier_up_count
                                                       : info.carrier_down_count) = v;
              }
              break;
            default:
              break;
          }
          a += RTA_ALIGN(rta.rta_len);
        }
        if (bad && malformed) ++*malformed;
        if (!bad) out.push_back(std::move(info));
      }
    }
    off += NLMSG_ALIGN(hdr.nlmsg_len);
  }
  return out;
}

LinkState LinkStateOf(const NetlinkLinkInfo& info) {
  if (info.deleted) return LinkState::kDown;
  if (info.operstate == kOperUp) return LinkState::kUp;
  if (info.operstate == kOperUnknown) {
    return info.admin_up && info.carrier ? LinkState::kUp : LinkState::kDown;
  }
  return LinkState::kDown;
}

absl::StatusOr<std::unique_ptr<NetlinkLinkWatcher>> NetlinkLinkWatcher::Open(
    NetlinkWatcherOptions options) {
  int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return absl::InternalError(absl::StrCat("netlink socket: ", std::strerror(errno)));
  // SO_RCVBUF is capped by net.core.rmem_max; SO_RCVBUFFORCE is not, with CAP_NET_ADMIN.
  int rcvbuf = options.receive_buffer_bytes;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) != 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  }
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = RTMGRP_LINK;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat("netlink bind RTMGRP_LINK: ", std::strerror(err)));
  }
  absl::StatusOr<std::unique_ptr<NetlinkLinkWatcher>> w = Adopt(fd, options);
  if (!w.ok()) return w.status();
  // Learn the current state: the dump's answers are applied without producing events.
  std::vector<LinkEvent> ignored;
  for (int i = 0; i < 200; ++i) {  // bounded: the dump arrives within a few reads
    (*w)->Drain(absl::Now(), ignored);
    if (!(*w)->dump_in_flight_) break;
    ::usleep(1000);
  }
  return w;
}

absl::StatusOr<std::unique_ptr<NetlinkLinkWatcher>> NetlinkLinkWatcher::Adopt(
    int fd, NetlinkWatcherOptions options) {
  std::unique_ptr<NetlinkLinkWatcher> w(new NetlinkLinkWatcher(fd, options));
  int granted = 0;
  socklen_t len = sizeof(granted);
  if (::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &granted, &len) == 0) {
    w->rcvbuf_bytes_ = granted / 2;  // the kernel reports twice the size, for its bookkeeping
  }
  if (absl::Status s = w->RequestDump(); !s.ok()) return s;
  w->dump_in_flight_ = true;
  w->dump_seq_ = w->seq_;
  return w;
}

NetlinkLinkWatcher::~NetlinkLinkWatcher() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status NetlinkLinkWatcher::RequestDump() {
  struct {
    nlmsghdr hdr;
    ifinfomsg ifi;
  } req{};
  req.hdr.nlmsg_len = sizeof(req);
  req.hdr.nlmsg_type = RTM_GETLINK;
  req.hdr.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.hdr.nlmsg_seq = ++seq_;
  req.ifi.ifi_family = AF_UNSPEC;
  // No address: a netlink socket sends to its default destination, the kernel (port 0).
  if (::send(fd_, &req, sizeof(req), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
    return absl::InternalError(absl::StrCat("netlink RTM_GETLINK dump: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

void NetlinkLinkWatcher::StartDump(absl::Time now) {
  if (!RequestDump().ok()) {
    resync_owed_ = true;
    retry_at_ = now + options_.dump_retry;
    return;
  }
  resync_owed_ = false;
  dump_in_flight_ = true;
  dump_seq_ = seq_;
  dump_seen_.clear();
  overflow_during_dump_ = false;
}

void NetlinkLinkWatcher::Overflowed(absl::Time now) {
  ++overflows_;
  if (dump_in_flight_) {
    overflow_during_dump_ = true;  // redone when this one is done
    return;
  }
  StartDump(now);
}

void NetlinkLinkWatcher::Tick(absl::Time now) {
  if (resync_owed_ && !dump_in_flight_ && now >= retry_at_) StartDump(now);
}

void NetlinkLinkWatcher::DumpDone(absl::Time received, std::vector<LinkEvent>& out) {
  dump_in_flight_ = false;
  if (overflow_during_dump_) {
    StartDump(received);  // notifications were lost while it ran: it proves nothing, redo it
    return;
  }
  // A complete dump: whatever it did not list is gone (deleted while notifications were lost).
  for (auto it = known_.begin(); it != known_.end();) {
    if (dump_seen_.count(it->first) != 0) {
      ++it;
      continue;
    }
    if (it->second.state != LinkState::kDown) {
      LinkEvent e;
      e.time = received;
      e.source = "netlink";
      e.device = it->second.name;
      e.from = it->second.state;
      e.to = LinkState::kDown;
      e.detail = "deleted (absent from the resync dump)";
      out.push_back(std::move(e));
    }
    ++vanished_;
    it = known_.erase(it);
  }
  dump_seen_.clear();
}

void NetlinkLinkWatcher::Receive(const uint8_t* data, size_t len, absl::Time received,
                                 std::vector<LinkEvent>& out) {
  for (const NetlinkLinkInfo& info : ParseLinkMessages(data, len, &malformed_)) {
    // During a dump, notifications count as listed too: they are newer than the dump's start.
    if (dump_in_flight_) dump_seen_.insert(info.ifindex);
    Apply(info, received, out);
  }
  // The dump's end, or its refusal, follows its RTM_NEWLINKs in the stream.
  size_t off = 0;
  while (off + sizeof(nlmsghdr) <= len) {
    nlmsghdr hdr;
    std::memcpy(&hdr, data + off, sizeof(hdr));
    if (hdr.nlmsg_len < sizeof(nlmsghdr) || off + hdr.nlmsg_len > len) break;
    if (dump_in_flight_ && hdr.nlmsg_seq == dump_seq_) {
      if (hdr.nlmsg_type == NLMSG_DONE) {
        DumpDone(received, out);
      } else if (hdr.nlmsg_type == NLMSG_ERROR) {
        int32_t error = 0;
        if (hdr.nlmsg_len >= NLMSG_HDRLEN + sizeof(error)) {
          std::memcpy(&error, data + off + NLMSG_HDRLEN, sizeof(error));
        }
        if (error != 0) {  // refused (EBUSY: a dump already runs): ask again later
          ++dump_errors_;
          dump_in_flight_ = false;
          dump_seen_.clear();
          resync_owed_ = true;
          retry_at_ = received + options_.dump_retry;
        }
      }
    }
    off += NLMSG_ALIGN(hdr.nlmsg_len);
  }
}

void NetlinkLinkWatcher::Apply(const NetlinkLinkInfo& info, absl::Time received,
                               std::vector<LinkEvent>& out) {
  const LinkState now_state = LinkStateOf(info);
  auto [it, fresh] = known_.try_emplace(info.ifindex);
  Known& k = it->second;
  if (!info.name.empty()) k.name = info.name;
  const LinkState before = k.state;
  auto emit = [&](LinkState from, LinkState to, std::string detail) {
    LinkEvent e;
    e.time = received;
    e.source = "netlink";
    e.device = k.name;
    e.from = from;
    e.to = to;
    e.detail = std::move(detail);
    out.push_back(std::move(e));
  };
  if (!fresh && k.up_count >= 0 && info.carrier_up_count >= 0 && info.carrier_down_count >= 0) {
    // Whole down→up cycles the kernel counted but whose messages we never saw (coalesced or
    // lost): recorded as inferred pairs, before the transition this message shows.
    int64_t missed_downs = info.carrier_down_count - k.down_count;
    int64_t missed_ups = info.carrier_up_count - k.up_count;
    if (before == LinkState::kUp && now_state == LinkState::kDown) --missed_downs;
    if (before == LinkState::kDown && now_state == LinkState::kUp) --missed_ups;
    int64_t cycles = std::min(missed_downs, missed_ups);
    for (int64_t i = 0; i < cycles && i < 1000; ++i) {
      emit(LinkState::kUp, LinkState::kDown, "inferred from carrier_down_count");
      emit(LinkState::kDown, LinkState::kUp, "inferred from carrier_up_count");
    }
  }
  if (info.carrier_up_count >= 0) k.up_count = info.carrier_up_count;
  if (info.carrier_down_count >= 0) k.down_count = info.carrier_down_count;
  k.state = now_state;
  if (!fresh && before != now_state) {
    emit(before, now_state,
         absl::StrCat("operstate ", OperName(info.operstate), ", carrier ", info.carrier ? 1 : 0,
                      info.deleted ? ", deleted" : ""));
  }
  if (info.deleted) known_.erase(it);
}

void NetlinkLinkWatcher::Drain(absl::Time received, std::vector<LinkEvent>& out) {
  alignas(nlmsghdr) uint8_t buf[64 * 1024];
  for (int i = 0; i < 10000; ++i) {  // bounded per call; the socket is non-blocking
    ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {  // the kernel dropped messages: count, then resynchronise
        Overflowed(received);
        continue;
      }
      return;  // EAGAIN: nothing more
    }
    if (n == 0) return;
    Receive(buf, static_cast<size_t>(n), received, out);
  }
}

}  // namespace ringside::collectors
