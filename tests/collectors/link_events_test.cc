// Unit tests of the link-event sources' translations (no device needed) and of the log.
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "collectors/netlink/link_watcher.h"
#include "collectors/verbs/port_events.h"
#include "daemon/agent/link_events.h"

namespace ringside::collectors {
namespace {

// Builds one RTM_NEWLINK message with the given attributes.
std::vector<uint8_t> NewLink(int ifindex, const char* name, uint8_t operstate, unsigned flags,
                             int type = RTM_NEWLINK) {
  std::vector<uint8_t> buf(NLMSG_SPACE(sizeof(ifinfomsg)) + 64, 0);
  auto* hdr = reinterpret_cast<nlmsghdr*>(buf.data());
  hdr->nlmsg_type = static_cast<uint16_t>(type);
  auto* ifi = reinterpret_cast<ifinfomsg*>(NLMSG_DATA(hdr));
  ifi->ifi_index = ifindex;
  ifi->ifi_flags = flags;
  size_t off = NLMSG_SPACE(sizeof(ifinfomsg));
  auto add = [&](uint16_t t, const void* data, size_t len) {
    auto* rta = reinterpret_cast<rtattr*>(buf.data() + off);
    rta->rta_type = t;
    rta->rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
    std::memcpy(RTA_DATA(rta), data, len);
    off += RTA_SPACE(len);
  };
  add(IFLA_IFNAME, name, std::strlen(name) + 1);
  add(IFLA_OPERSTATE, &operstate, 1);
  hdr->nlmsg_len = static_cast<uint32_t>(off);
  buf.resize(off);
  return buf;
}

TEST(NetlinkParseTest, ReadsNameOperstateAndCarrier) {
  auto msg = NewLink(7, "ens1f0np0", 6, IFF_UP | IFF_LOWER_UP);
  uint64_t bad = 0;
  auto infos = ParseLinkMessages(msg.data(), msg.size(), &bad);
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(infos[0].ifindex, 7);
  EXPECT_EQ(infos[0].name, "ens1f0np0");
  EXPECT_EQ(infos[0].operstate, 6);
  EXPECT_TRUE(infos[0].carrier);
  EXPECT_EQ(LinkStateOf(infos[0]), LinkState::kUp);
  auto down = NewLink(7, "ens1f0np0", 2, IFF_UP);
  EXPECT_EQ(LinkStateOf(ParseLinkMessages(down.data(), down.size(), &bad)[0]), LinkState::kDown);
  // A driver reporting IF_OPER_UNKNOWN: up when admin up with carrier.
  auto unknown = NewLink(3, "lo", 0, IFF_UP | IFF_LOWER_UP);
  EXPECT_EQ(LinkStateOf(ParseLinkMessages(unknown.data(), unknown.size(), &bad)[0]),
            LinkState::kUp);
  auto del = NewLink(7, "ens1f0np0", 6, IFF_UP | IFF_LOWER_UP, RTM_DELLINK);
  EXPECT_EQ(LinkStateOf(ParseLinkMessages(del.data(), del.size(), &bad)[0]), LinkState::kDown);
}

TEST(NetlinkParseTest, MalformedMessagesAreCountedNotTrusted) {
  auto msg = NewLink(7, "eth0", 6, IFF_UP);
  uint64_t bad = 0;
  // Length field past the end of the datagram.
  auto truncated = msg;
  truncated.resize(msg.size() - 8);
  EXPECT_TRUE(ParseLinkMessages(truncated.data(), truncated.size(), &bad).empty());
  EXPECT_EQ(bad, 1u);
  // An attribute whose length runs past its message.
  auto broken = msg;
  auto* rta = reinterpret_cast<rtattr*>(broken.data() + NLMSG_SPACE(sizeof(ifinfomsg)));
  rta->rta_len = 200;
  EXPECT_TRUE(ParseLinkMessages(broken.data(), broken.size(), &bad).empty());
  EXPECT_EQ(bad, 2u);
  // Garbage.
  std::vector<uint8_t> junk(100, 0xff);
  EXPECT_TRUE(ParseLinkMessages(junk.data(), junk.size(), &bad).empty());
  EXPECT_EQ(bad, 3u);
}

TEST(VerbsTranslateTest, PortErrAndActiveAreTransitions) {
  absl::Time t = absl::FromUnixSeconds(5);
  auto err = TranslateVerbsEvent("mlx5_3", IBV_EVENT_PORT_ERR, 1, t);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->device, "mlx5_3");
  EXPECT_EQ(err->port, "1");
  EXPECT_EQ(err->to, LinkState::kDown);
  EXPECT_EQ(err->source, "verbs");
  EXPECT_EQ(err->time, t);
  auto active = TranslateVerbsEvent("mlx5_3", IBV_EVENT_PORT_ACTIVE, 1, t);
  ASSERT_TRUE(active.has_value());
  EXPECT_EQ(active->to, LinkState::kUp);
  auto fatal = TranslateVerbsEvent("mlx5_3", IBV_EVENT_DEVICE_FATAL, 0, t);
  ASSERT_TRUE(fatal.has_value());
  EXPECT_EQ(fatal->to, LinkState::kDown);
  EXPECT_FALSE(TranslateVerbsEvent("mlx5_3", IBV_EVENT_LID_CHANGE, 1, t).has_value());
  EXPECT_FALSE(TranslateVerbsEvent("mlx5_3", IBV_EVENT_QP_FATAL, 0, t).has_value());
}

// No RDMA device on this machine: the watcher opens empty, not with an error.
TEST(VerbsTranslateTest, NoDevicesIsEmpty) {
  auto w = VerbsPortWatcher::Open();
  ASSERT_TRUE(w.ok());
  std::vector<LinkEvent> out;
  (*w)->Drain(absl::Now(), out);
  EXPECT_TRUE(out.empty());
}

TEST(LinkEventLogTest, RingKeepsSequenceAndCountsEvictions) {
  daemon::LinkEventLog log(3);
  std::vector<LinkEvent> events;
  for (int i = 0; i < 5; ++i) {
    LinkEvent e;
    e.source = "netlink";
    e.device = "eth0";
    e.to = i % 2 ? LinkState::kUp : LinkState::kDown;
    events.push_back(e);
  }
  log.Append(events);
  auto all = log.Since(0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].seq, 3u);
  EXPECT_EQ(all[2].seq, 5u);
  EXPECT_EQ(log.evicted(), 2u);
  EXPECT_EQ(log.Since(4).size(), 1u);
  uint64_t total = 0;
  for (const auto& c : log.Counts()) total += c.count;
  EXPECT_EQ(total, 5u);  // counts are not lost with the ring
}

}  // namespace
}  // namespace ringside::collectors
