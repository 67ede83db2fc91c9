// The netlink watcher's resynchronisation after an overflow, with the test as the kernel: the
// watcher adopts one end of a datagram socketpair, the test reads its RTM_GETLINK dump requests
// from the other end and answers with RTM_NEWLINK / NLMSG_DONE / NLMSG_ERROR datagrams.
#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "collectors/netlink/link_watcher.h"

namespace ringside::collectors {
namespace {

void Append(std::vector<uint8_t>& dgram, uint16_t type, uint32_t seq, const void* body,
            size_t body_len) {
  const size_t off = dgram.size();
  dgram.resize(off + NLMSG_SPACE(body_len), 0);
  auto* hdr = reinterpret_cast<nlmsghdr*>(dgram.data() + off);
  hdr->nlmsg_len = static_cast<uint32_t>(NLMSG_LENGTH(body_len));
  hdr->nlmsg_type = type;
  hdr->nlmsg_seq = seq;
  if (body_len > 0) std::memcpy(NLMSG_DATA(hdr), body, body_len);
}

// One RTM_NEWLINK (or DELLINK) with a name and operstate.
void AppendLink(std::vector<uint8_t>& dgram, uint32_t seq, int ifindex, const std::string& name,
                bool up, uint16_t type = RTM_NEWLINK) {
  std::vector<uint8_t> body(NLMSG_ALIGN(sizeof(ifinfomsg)), 0);
  auto* ifi = reinterpret_cast<ifinfomsg*>(body.data());
  ifi->ifi_index = ifindex;
  ifi->ifi_flags = up ? (IFF_UP | IFF_LOWER_UP) : IFF_UP;
  auto add = [&](uint16_t t, const void* data, size_t len) {
    const size_t off = body.size();
    body.resize(off + RTA_SPACE(len), 0);
    auto* rta = reinterpret_cast<rtattr*>(body.data() + off);
    rta->rta_type = t;
    rta->rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
    std::memcpy(RTA_DATA(rta), data, len);
  };
  add(IFLA_IFNAME, name.c_str(), name.size() + 1);
  const uint8_t oper = up ? 6 : 2;
  add(IFLA_OPERSTATE, &oper, 1);
  Append(dgram, type, seq, body.data(), body.size());
}

class FakeRtnetlink {
 public:
  FakeRtnetlink() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    watcher_end = sv[0];
    kernel_ = sv[1];
  }
  ~FakeRtnetlink() { ::close(kernel_); }

  // The dump requests the watcher sent since the last call: their sequence numbers.
  std::vector<uint32_t> DumpRequests() {
    std::vector<uint32_t> seqs;
    uint8_t buf[256];
    for (;;) {
      const ssize_t n = ::recv(kernel_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n < static_cast<ssize_t>(sizeof(nlmsghdr))) break;
      nlmsghdr hdr;
      std::memcpy(&hdr, buf, sizeof(hdr));
      EXPECT_EQ(hdr.nlmsg_type, RTM_GETLINK);
      EXPECT_TRUE(hdr.nlmsg_flags & NLM_F_DUMP);
      seqs.push_back(hdr.nlmsg_seq);
    }
    return seqs;
  }
  void Send(const std::vector<uint8_t>& dgram) {
    ASSERT_EQ(::send(kernel_, dgram.data(), dgram.size(), 0), static_cast<ssize_t>(dgram.size()));
  }
  // A whole dump answer: the links, then NLMSG_DONE.
  void Dump(uint32_t seq, const std::vector<std::pair<int, std::string>>& up_links) {
    std::vector<uint8_t> d;
    for (const auto& [index, name] : up_links) AppendLink(d, seq, index, name, true);
    int32_t zero = 0;
    Append(d, NLMSG_DONE, seq, &zero, sizeof(zero));
    Send(d);
  }
  void Refuse(uint32_t seq, int err) {
    nlmsgerr e{};
    e.error = -err;
    e.msg.nlmsg_type = RTM_GETLINK;
    e.msg.nlmsg_seq = seq;
    std::vector<uint8_t> d;
    Append(d, NLMSG_ERROR, seq, &e, sizeof(e));
    Send(d);
  }

  int watcher_end = -1;  // owned by the watcher once adopted

 private:
  int kernel_ = -1;
};

const absl::Time kT = absl::FromUnixSeconds(1000);

// Adopted, with eth0..eth2 up learnt from the first dump.
std::unique_ptr<NetlinkLinkWatcher> Started(FakeRtnetlink& k, NetlinkWatcherOptions o = {}) {
  auto w = NetlinkLinkWatcher::Adopt(k.watcher_end, o);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return nullptr;
  std::vector<uint32_t> req = k.DumpRequests();
  EXPECT_EQ(req.size(), 1u);
  k.Dump(req.at(0), {{2, "eth0"}, {3, "eth1"}, {4, "eth2"}});
  std::vector<LinkEvent> out;
  (*w)->Drain(kT, out);
  EXPECT_TRUE(out.empty());  // learning, not transitions
  EXPECT_FALSE((*w)->dump_in_flight());
  return std::move(*w);
}

// Deleted while notifications were lost: absent from the resync dump, so reported down and
// forgotten (it used to stay known, up, forever).
TEST(NetlinkResyncTest, LinksMissingFromACompleteResyncDumpAreForgotten) {
  FakeRtnetlink k;
  auto w = Started(k);
  ASSERT_NE(w, nullptr);
  w->Overflowed(kT);
  std::vector<uint32_t> req = k.DumpRequests();
  ASSERT_EQ(req.size(), 1u);
  k.Dump(req[0], {{2, "eth0"}, {4, "eth2"}});  // eth1 went away during the overflow
  std::vector<LinkEvent> out;
  w->Drain(kT + absl::Seconds(1), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].device, "eth1");
  EXPECT_EQ(out[0].from, LinkState::kUp);
  EXPECT_EQ(out[0].to, LinkState::kDown);
  EXPECT_TRUE(absl::StrContains(out[0].detail, "resync dump")) << out[0].detail;
  EXPECT_EQ(w->vanished(), 1u);
  // Forgotten: a new eth1 (same index) is learnt fresh, and a later dump without it says nothing.
  w->Overflowed(kT);
  req = k.DumpRequests();
  ASSERT_EQ(req.size(), 1u);
  k.Dump(req[0], {{2, "eth0"}, {4, "eth2"}});
  out.clear();
  w->Drain(kT + absl::Seconds(2), out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(w->vanished(), 1u);
}

// EBUSY (a dump already running on the socket) refuses the resync: it is asked again, and that
// dump's answer is applied.
TEST(NetlinkResyncTest, RefusedResyncDumpIsRequestedAgain) {
  FakeRtnetlink k;
  NetlinkWatcherOptions o;
  o.dump_retry = absl::Milliseconds(200);
  auto w = Started(k, o);
  ASSERT_NE(w, nullptr);
  w->Overflowed(kT);
  std::vector<uint32_t> req = k.DumpRequests();
  ASSERT_EQ(req.size(), 1u);
  k.Refuse(req[0], EBUSY);
  std::vector<LinkEvent> out;
  w->Drain(kT, out);
  EXPECT_EQ(w->dump_errors(), 1u);
  EXPECT_TRUE(w->resync_owed());
  EXPECT_FALSE(w->dump_in_flight());
  w->Tick(kT + absl::Milliseconds(100));  // not yet
  EXPECT_TRUE(k.DumpRequests().empty());
  w->Tick(kT + absl::Milliseconds(200));
  req = k.DumpRequests();
  ASSERT_EQ(req.size(), 1u);
  // eth1 went down while the notifications were lost: the retried dump says so.
  std::vector<uint8_t> d;
  AppendLink(d, req[0], 2, "eth0", true);
  AppendLink(d, req[0], 3, "eth1", false);
  AppendLink(d, req[0], 4, "eth2", true);
  int32_t zero = 0;
  Append(d, NLMSG_DONE, req[0], &zero, sizeof(zero));
  k.Send(d);
  w->Drain(kT + absl::Seconds(1), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].device, "eth1");
  EXPECT_EQ(out[0].to, LinkState::kDown);
  EXPECT_FALSE(w->resync_owed());
  EXPECT_EQ(w->vanished(), 0u);
}

// An overflow while the resync dump runs: that dump cannot prove a deletion (it is redone), and
// an acknowledgement (NLMSG_ERROR 0) or another request's answer does not end it.
TEST(NetlinkResyncTest, OverflowDuringTheDumpRedoesIt) {
  FakeRtnetlink k;
  auto w = Started(k);
  ASSERT_NE(w, nullptr);
  w->Overflowed(kT);
  std::vector<uint32_t> req = k.DumpRequests();
  ASSERT_EQ(req.size(), 1u);
  w->Overflowed(kT);  // again, before the dump is done: no second request yet
  EXPECT_TRUE(k.DumpRequests().empty());
  k.Refuse(req[0] + 100, EBUSY);  // not ours
  k.Dump(req[0], {{2, "eth0"}});  // partial picture
  std::vector<LinkEvent> out;
  w->Drain(kT, out);
  EXPECT_TRUE(out.empty()) << "a dump overlapping an overflow forgot " << out.size() << " links";
  EXPECT_EQ(w->dump_errors(), 0u);
  std::vector<uint32_t> again = k.DumpRequests();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_NE(again[0], req[0]);
  k.Dump(again[0], {{2, "eth0"}, {3, "eth1"}, {4, "eth2"}});
  w->Drain(kT, out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(w->vanished(), 0u);
  EXPECT_EQ(w->overflows(), 2u);
}

// A link created during the dump, whose notification arrived but which the dump had passed, is
// not forgotten at NLMSG_DONE.
TEST(NetlinkResyncTest, NotificationsDuringTheDumpCountAsListed) {
  FakeRtnetlink k;
  auto w = Started(k);
  ASSERT_NE(w, nullptr);
  w->Overflowed(kT);
  std::vector<uint32_t> req = k.DumpRequests();
  ASSERT_EQ(req.size(), 1u);
  std::vector<uint8_t> note;
  AppendLink(note, 0, 9, "veth9", true);
  k.Send(note);
  k.Dump(req[0], {{2, "eth0"}, {3, "eth1"}, {4, "eth2"}});
  std::vector<LinkEvent> out;
  w->Drain(kT, out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(w->vanished(), 0u);
  // veth9 is known now: its deletion is a transition.
  std::vector<uint8_t> del;
  AppendLink(del, 0, 9, "veth9", true, RTM_DELLINK);
  k.Send(del);
  w->Drain(kT, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].device, "veth9");
  EXPECT_EQ(out[0].to, LinkState::kDown);
}

// The receive buffer granted is read back; asking more than a non-netlink socket allows without
// privileges shows as capped (SO_RCVBUF is capped by net.core.rmem_max).
TEST(NetlinkResyncTest, ReceiveBufferIsReadBackAndCappedIsSeen) {
  FakeRtnetlink k;
  int small = 4096;
  ASSERT_EQ(::setsockopt(k.watcher_end, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
  NetlinkWatcherOptions o;
  o.receive_buffer_bytes = 1 << 30;
  auto w = NetlinkLinkWatcher::Adopt(k.watcher_end, o);
  ASSERT_TRUE(w.ok());
  EXPECT_GT((*w)->receive_buffer_bytes(), 0);
  EXPECT_LT((*w)->receive_buffer_bytes(), 1 << 30);
  EXPECT_TRUE((*w)->receive_buffer_capped());
}

}  // namespace
}  // namespace ringside::collectors
