// SnapshotLinks (daemon/aggregator/metrics/link_snapshot.h): the worst links chosen in two passes
// over the detector's records are the ones a full copy and sort would choose, with the same count
// and the same ports without a peer.
#include "daemon/aggregator/metrics/link_snapshot.h"

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "analysis/fabric_analysis.h"
#include "daemon/aggregator/metrics/analysis_metrics.h"
#include "gtest/gtest.h"

namespace ringside::daemon {
namespace {

using analysis::LinkState;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

using Key = std::tuple<int, uint32_t, absl::Time>;  // health, flaps, last change

class LinkSnapshotTest : public testing::Test {
 protected:
  void Event(const std::string& node, const char* source, const std::string& device,
             const char* port, LinkState from, LinkState to) {
    analysis::LinkEvent e;
    e.node = node;
    e.source = source;
    e.device = device;
    e.port = port;
    e.time = now_;
    e.from = from;
    e.to = to;
    analysis_.OnEvent(e);
  }

  // 30 nodes: 8 RDMA ports and one netdev each; some ports down, some flapping a few times, the
  // rest up, each event at its own time so that the order has few ties.
  void Fleet() {
    for (int n = 0; n < 30; ++n) {
      const std::string node = absl::StrCat("n", n);
      for (int d = 0; d < 8; ++d) {
        const std::string dev = absl::StrCat("mlx5_", d);
        now_ += absl::Milliseconds(7);
        Event(node, "verbs", dev, "1", LinkState::kDown, LinkState::kUp);
        const int cycles = (n * 8 + d) % 11 == 0 ? 1 + (n + d) % 3 : 0;
        for (int c = 0; c < cycles; ++c) {
          now_ += absl::Seconds(2);
          Event(node, "verbs", dev, "1", LinkState::kUp, LinkState::kDown);
          now_ += absl::Seconds(2);
          Event(node, "verbs", dev, "1", LinkState::kDown, LinkState::kUp);
        }
        if ((n * 8 + d) % 17 == 0) {
          now_ += absl::Milliseconds(3);
          Event(node, "verbs", dev, "1", LinkState::kUp, LinkState::kDown);
        }
      }
      now_ += absl::Milliseconds(5);
      Event(node, "netlink", "eth0", "", LinkState::kDown, LinkState::kUp);
    }
  }

  // What /metrics would rank each link by, from a full copy (the oracle).
  std::vector<Key> AllKeys(const LinkFlags& flags) const {
    std::vector<Key> keys;
    for (const analysis::LinkView& v : analysis_.Links(now_)) {
      auto f = flags.find(LinkKeyOf(v));
      const int bits = f == flags.end() ? 0 : f->second;
      const int health = v.state == LinkState::kDown ? 3 : (bits & 2) ? 2 : (bits & 1) ? 1 : 0;
      keys.emplace_back(health, v.flaps_in_window, v.last_change);
    }
    std::sort(keys.begin(), keys.end(), std::greater<>());
    return keys;
  }

  absl::Time now_ = kT0;
  analysis::FabricAnalysis analysis_{analysis::FabricAnalysisOptions{}, nullptr};
};

TEST_F(LinkSnapshotTest, KeepsWhatAFullSortKeeps) {
  Fleet();
  LinkFlags flags;
  flags[LinkKeyOf("infiniband", "n3", "mlx5_2", "1")] = 1;  // degraded
  flags[LinkKeyOf("infiniband", "n4", "mlx5_5", "1")] = 2;  // flapping (by incident)
  const std::vector<Key> all = AllKeys(flags);
  ASSERT_EQ(all.size(), 30u * 9u);
  // The fleet has every health code and several flap counts, so the cut falls among them.
  EXPECT_EQ(std::get<0>(all.front()), 3);
  for (size_t max : {size_t{0}, size_t{1}, size_t{5}, size_t{13}, size_t{40}, size_t{269},
                     size_t{270}, size_t{1000}}) {
    SCOPED_TRACE(max);
    const LinkSnapshot s = SnapshotLinks(analysis_, now_, max, flags, TopologyState{});
    EXPECT_EQ(s.total, all.size());
    EXPECT_EQ(s.ports_without_peer, all.size());  // no topology, no LLDP: none placed
    ASSERT_EQ(s.worst.size(), std::min(max, all.size()));
    std::vector<LinkHealthView> worst = s.worst;
    std::sort(worst.begin(), worst.end(), WorseLink);
    for (size_t i = 0; i < worst.size(); ++i) {
      EXPECT_EQ(Key(worst[i].health, worst[i].view.flaps_in_window, worst[i].view.last_change),
                all[i])
          << i;
    }
  }
  const LinkSnapshot s = SnapshotLinks(analysis_, now_, 1000, flags, TopologyState{});
  for (const LinkHealthView& l : s.worst) {
    if (l.view.node == "n3" && l.view.device == "mlx5_2") EXPECT_EQ(l.health, 1);
    if (l.view.node == "n4" && l.view.device == "mlx5_5") EXPECT_EQ(l.health, 2);
    if (l.view.state == LinkState::kDown) EXPECT_EQ(l.health, 3);
  }
}

TEST_F(LinkSnapshotTest, NetdevPlacedByItsLldpNeighbour) {
  Fleet();
  auto peers = std::make_shared<std::vector<LldpPortPeer>>();
  for (int n = 0; n < 10; ++n) {
    LldpPortPeer p;
    p.node = absl::StrCat("n", n);
    p.netdev = "eth0";
    p.switch_name = "leaf-01";
    p.switch_port = absl::StrCat("Ethernet", n);
    peers->push_back(p);
  }
  TopologyState t;
  t.lldp_peers = peers;
  const LinkSnapshot s = SnapshotLinks(analysis_, now_, 10, LinkFlags{}, t);
  EXPECT_EQ(s.total, 270u);
  EXPECT_EQ(s.ports_without_peer, 260u);  // ten netdevs have a neighbour
  // The same count as PeerOfLink gives link by link.
  size_t without = 0;
  for (const analysis::LinkView& v : analysis_.Links(now_)) {
    if (!PeerOfLink(t, v.node, v.source, v.device, v.port)) ++without;
  }
  EXPECT_EQ(without, s.ports_without_peer);
}

TEST_F(LinkSnapshotTest, NoLinks) {
  const LinkSnapshot s = SnapshotLinks(analysis_, now_, 20, LinkFlags{}, TopologyState{});
  EXPECT_EQ(s.total, 0u);
  EXPECT_TRUE(s.worst.empty());
  EXPECT_EQ(s.ports_without_peer, 0u);
}

}  // namespace
}  // namespace ringside::daemon
