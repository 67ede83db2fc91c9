// Link transitions through the real netlink path: a veth pair in a network namespace this test
// creates (and always deletes), taken down and up three times within one sampling interval, is
// recorded as three down and three up transitions, in order, with increasing times.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/agent/link_events.h"
#include "tests/testing/process.h"

namespace ringside {
namespace {

using collectors::LinkEvent;
using collectors::LinkState;

int Sh(const std::string& cmd) {
  return testing::Run({"/bin/sh", "-c", cmd}, "", absl::Seconds(20)).exit_code;
}

class LinkEventsNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ns_ = absl::StrCat("rs-le-", getpid());
    if (Sh("ip netns add " + ns_) != 0) GTEST_SKIP() << "cannot create a network namespace";
    created_ = true;
    ASSERT_EQ(Sh(absl::StrCat("ip -n ", ns_, " link add rsa type veth peer name rsb && ip -n ", ns_,
                              " link set rsa up && ip -n ", ns_, " link set rsb up")),
              0);
  }
  void TearDown() override {
    if (created_) Sh("ip netns del " + ns_);
  }

  // Opens the watcher inside the namespace: this thread joins it, opens the socket (which stays
  // bound to that namespace), and comes back.
  std::unique_ptr<collectors::NetlinkLinkWatcher> OpenInNamespace(
      collectors::NetlinkWatcherOptions options = {}) {
    int self = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int target = ::open(absl::StrCat("/var/run/netns/", ns_).c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(self, 0);
    EXPECT_GE(target, 0);
    EXPECT_EQ(::setns(target, CLONE_NEWNET), 0);
    auto w = collectors::NetlinkLinkWatcher::Open(options);
    EXPECT_EQ(::setns(self, CLONE_NEWNET), 0);
    ::close(self);
    ::close(target);
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? std::move(*w) : nullptr;
  }

  std::string ns_;
  bool created_ = false;
};

TEST_F(LinkEventsNetnsTest, ThreeFlapsWithinOneIntervalAreThreeTransitions) {
  daemon::LinkEventLog log;
  auto watcher = OpenInNamespace();
  ASSERT_NE(watcher, nullptr);
  daemon::LinkEventReader reader(&log, std::move(watcher), nullptr);
  reader.Start();
  absl::SleepFor(absl::Milliseconds(50));

  const absl::Time start = absl::Now();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Sh(absl::StrCat("ip -n ", ns_, " link set rsa down")), 0);
    ASSERT_EQ(Sh(absl::StrCat("ip -n ", ns_, " link set rsa up")), 0);
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_LT(took, absl::Seconds(1)) << "the flaps should fit in one 1 s sampling interval";

  std::vector<LinkEvent> rsa;
  for (int i = 0; i < 200 && rsa.size() < 6; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    rsa.clear();
    for (const auto& e : log.Since(0)) {
      if (e.event.device == "rsa") rsa.push_back(e.event);
    }
  }
  ASSERT_EQ(rsa.size(), 6u);
  for (size_t i = 0; i < rsa.size(); ++i) {
    EXPECT_EQ(rsa[i].source, "netlink");
    EXPECT_EQ(rsa[i].to, i % 2 == 0 ? LinkState::kDown : LinkState::kUp) << i;
    if (i > 0) EXPECT_GT(rsa[i].time, rsa[i - 1].time) << i;
    EXPECT_GE(rsa[i].time, start);
  }
  // Counted per link and direction for /metrics.
  uint64_t downs = 0, ups = 0;
  for (const auto& c : log.Counts()) {
    if (c.device != "rsa") continue;
    (c.to == LinkState::kDown ? downs : ups) += c.count;
  }
  EXPECT_EQ(downs, 3u);
  EXPECT_EQ(ups, 3u);
}

// Deleting the interface is a transition to down, not silence.
TEST_F(LinkEventsNetnsTest, DeletedInterfaceGoesDown) {
  daemon::LinkEventLog log;
  auto watcher = OpenInNamespace();
  ASSERT_NE(watcher, nullptr);
  daemon::LinkEventReader reader(&log, std::move(watcher), nullptr);
  reader.Start();
  ASSERT_EQ(Sh(absl::StrCat("ip -n ", ns_, " link del rsa")), 0);
  bool seen = false;
  for (int i = 0; i < 200 && !seen; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    for (const auto& e : log.Since(0)) {
      seen |= e.event.device == "rsa" && e.event.to == LinkState::kDown;
    }
  }
  EXPECT_TRUE(seen);
}

// The real kernel overflows a small receive buffer (ENOBUFS) while nobody reads; the interface
// deleted meanwhile loses its RTM_DELLINK with the rest. The resync dump, closed by NLMSG_DONE,
// no longer lists it, so it is forgotten instead of staying known forever.
TEST_F(LinkEventsNetnsTest, InterfaceDeletedDuringAnOverflowIsForgotten) {
  collectors::NetlinkWatcherOptions o;
  o.receive_buffer_bytes = 4096;  // SO_RCVBUFFORCE as root: exactly this small
  auto watcher = OpenInNamespace(o);
  ASSERT_NE(watcher, nullptr);
  std::vector<LinkEvent> out;
  watcher->Drain(absl::Now(), out);
  // Fill the queue with flaps of rsb (each a >1 KiB RTM_NEWLINK), then delete the rsa/rsb pair.
  std::string flaps;
  for (int i = 0; i < 20; ++i) {
    flaps += absl::StrCat("ip -n ", ns_, " link set rsb down; ip -n ", ns_, " link set rsb up; ");
  }
  ASSERT_EQ(Sh(flaps), 0);
  ASSERT_EQ(Sh(absl::StrCat("ip -n ", ns_, " link del rsa")), 0);
  for (int i = 0; i < 200 && (watcher->overflows() == 0 || watcher->dump_in_flight()); ++i) {
    watcher->Drain(absl::Now(), out);
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_GE(watcher->overflows(), 1u) << "a 4 KiB buffer did not overflow";
  EXPECT_FALSE(watcher->dump_in_flight());
  EXPECT_EQ(watcher->dump_errors(), 0u);
  // Both ends of the pair are gone from the watcher's view: by a DELLINK that made it through,
  // or by their absence from the dump.
  LinkState rsa = LinkState::kUnknown, rsb = LinkState::kUnknown;
  for (const LinkEvent& e : out) {
    if (e.device == "rsa") rsa = e.to;
    if (e.device == "rsb") rsb = e.to;
  }
  EXPECT_NE(rsa, LinkState::kUp);
  EXPECT_NE(rsb, LinkState::kUp);
  EXPECT_GE(watcher->vanished(), 1u) << "no deletion was lost: the test did not test the resync";
}

}  // namespace
}  // namespace ringside
