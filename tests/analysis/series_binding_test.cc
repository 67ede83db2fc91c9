// The aggregator's fast path into the detectors (FabricAnalysis::Bind, CounterStep::prepared,
// port_token and hint, the detectors' port memos) must decide exactly what the path from names
// decides:
// the same incidents, on the same entities, at the same times — also when series of several ports
// interleave, when a netdev is mapped to its RDMA port after its series were bound, and when a
// port goes stale, is forgotten and comes back. And an identity handle that is reused is told
// apart by its generation, so nothing cached under the old tuple is taken for the new one.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/fabric_analysis.h"
#include "analysis/series_identity.h"
#include "tests/analysis/fabric_sim.h"

namespace ringside::analysis {
namespace {

using testing::SimCounter;
using testing::SimState;

// One series of the simulated cluster and what a test wants it to count or show each second.
struct Series {
  std::string node;
  std::variant<std::unique_ptr<SimCounter>, std::unique_ptr<SimState>> sim;
  std::string source, device, port, counter;
  int32_t priority = -1;
};

// Two analyses fed the same inputs: `named` from the names alone, `bound` through bindings as
// the aggregator feeds it (each series bound once, a number per node).
class Twin {
 public:
  Twin() : named_(FabricAnalysisOptions{}, nullptr), bound_(FabricAnalysisOptions{}, nullptr) {
    EXPECT_TRUE(named_.Start(testing::T0()).ok());
    EXPECT_TRUE(bound_.Start(testing::T0()).ok());
  }

  int AddCounter(const std::string& node, const std::string& source, const std::string& device,
                 const std::string& port, const std::string& counter, int32_t priority = -1) {
    Series s{node, std::make_unique<SimCounter>(node, source, device, port, counter, 64, false, 0,
                                                priority),
             source, device, port, counter, priority};
    series_.push_back(std::move(s));
    return Bind();
  }
  int AddState(const std::string& node, const std::string& source, const std::string& device,
               const std::string& port, const std::string& counter) {
    Series s{node, std::make_unique<SimState>(node, source, device, port, counter), source, device,
             port, counter};
    series_.push_back(std::move(s));
    return Bind();
  }

  void Count(int i, absl::Time t, uint64_t inc) {
    CounterStep step = std::get<0>(series_[i].sim)->Step(t, inc);
    named_.OnCounter(step);
    const SeriesBinding& b = bindings_[i];
    if (b.route == SeriesRoute::kNone) return;
    step.prepared = b.prepared;
    step.port_token = PortToken(NodeNumber(series_[i].node), b);
    step.hint = &hints_[i];
    bound_.OnCounter(step, b.route);
  }
  void Show(int i, absl::Time t, double v) {
    StateSample s = std::get<1>(series_[i].sim)->At(t, v);
    named_.OnState(s);
    const SeriesBinding& b = bindings_[i];
    if (b.route == SeriesRoute::kNone) return;
    s.prepared = b.prepared;
    s.port_token = PortToken(NodeNumber(series_[i].node), b);
    s.hint = &hints_[i];
    bound_.OnState(s);
  }
  void MapNetdev(const std::string& node, const std::string& netdev, const std::string& device,
                 const std::string& port) {
    named_.MapNetdev(node, netdev, device, port);
    bound_.MapNetdev(node, netdev, device, port);
  }
  // Flushes both and checks they changed the same incidents the same way.
  void Flush(absl::Time now) {
    std::vector<IncidentChange> a, b;
    ASSERT_TRUE(named_.Flush(now, &a).ok());
    ASSERT_TRUE(bound_.Flush(now, &b).ok());
    ASSERT_EQ(Describe(a), Describe(b)) << "at " << absl::FormatTime(now);
    for (const IncidentChange& c : a) changes_.push_back(c);
  }

  const std::vector<IncidentChange>& changes() const { return changes_; }
  FabricAnalysis& bound() { return bound_; }
  size_t size() const { return series_.size(); }
  bool IsCounter(int i) const { return series_[i].sim.index() == 0; }

  static std::vector<std::string> Describe(const std::vector<IncidentChange>& cs) {
    std::vector<std::string> out;
    for (const IncidentChange& c : cs) {
      std::string e;
      for (const auto& [k, v] : c.incident.entity) absl::StrAppend(&e, k, "=", v, " ");
      out.push_back(absl::StrCat(IncidentChangeTypeName(c.type), " ",
                                 IncidentKindName(c.incident.kind), " ", e,
                                 absl::FormatTime(c.incident.opened), " ",
                                 c.incident.resolved ? absl::FormatTime(*c.incident.resolved) : "-",
                                 " ", c.incident.summary));
    }
    return out;
  }

 private:
  int Bind() {
    const Series& s = series_.back();
    bindings_.push_back(bound_.Bind(s.source, s.device, s.port, s.counter, s.priority));
    hints_.emplace_back();
    return static_cast<int>(series_.size()) - 1;
  }
  uint32_t NodeNumber(const std::string& node) {
    auto [it, fresh] = nodes_.try_emplace(node, static_cast<uint32_t>(nodes_.size() + 1));
    return it->second;
  }

  FabricAnalysis named_, bound_;
  std::vector<Series> series_;
  std::vector<SeriesBinding> bindings_;
  std::vector<RecordHint> hints_;  // per series, as the aggregator keeps them per node and slot
  std::map<std::string, uint32_t> nodes_;
  std::vector<IncidentChange> changes_;
};

std::vector<std::string> KindsOf(const std::vector<IncidentChange>& cs) {
  std::vector<std::string> kinds;
  for (const IncidentChange& c : cs) {
    if (c.type == IncidentChangeType::kOpened) {
      kinds.push_back(std::string(IncidentKindName(c.incident.kind)));
    }
  }
  std::sort(kinds.begin(), kinds.end());
  kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());
  return kinds;
}

// Four nodes with an InfiniBand port and a RoCE port each; a flap, a pause storm, a degraded link
// and ECN congestion on different nodes; every second the series come in a shuffled order, so
// runs of one port are short and the memos miss as often as they hit.
TEST(SeriesBindingTest, BoundStepsRaiseTheSameIncidentsAsNamedOnes) {
  Twin twin;
  struct NodeSeries {
    int symbol, downed, recovery, state, xmit_data;                // mlx5_0 (InfiniBand)
    int tx3, rx3, tx3_frames, storm_warn, carrier, ecn, cnp, rx0;  // eth0 = mlx5_1 (RoCE)
  };
  std::vector<NodeSeries> ns;
  for (int n = 0; n < 4; ++n) {
    const std::string node = absl::StrCat("node-", n);
    twin.MapNetdev(node, "eth0", "mlx5_1", "1");
    NodeSeries s;
    s.symbol = twin.AddCounter(node, "infiniband", "mlx5_0", "1", "symbol_error");
    s.downed = twin.AddCounter(node, "infiniband", "mlx5_0", "1", "link_downed");
    s.recovery = twin.AddCounter(node, "infiniband", "mlx5_0", "1", "link_error_recovery");
    s.state = twin.AddState(node, "infiniband_port", "mlx5_0", "1", "state");
    s.xmit_data = twin.AddCounter(node, "infiniband", "mlx5_0", "1", "port_xmit_data");
    s.tx3 = twin.AddCounter(node, "ethtool", "eth0", "", "tx_prio3_pause_duration", 3);
    s.rx3 = twin.AddCounter(node, "ethtool", "eth0", "", "rx_prio3_pause_duration", 3);
    s.tx3_frames = twin.AddCounter(node, "ethtool", "eth0", "", "tx_prio3_pause", 3);
    s.storm_warn = twin.AddCounter(node, "ethtool", "eth0", "", "tx_pause_storm_warning_events");
    s.carrier = twin.AddCounter(node, "netdev", "eth0", "", "carrier_changes");
    s.ecn = twin.AddCounter(node, "infiniband_hw", "mlx5_1", "1", "np_ecn_marked_roce_packets");
    s.cnp = twin.AddCounter(node, "infiniband_hw", "mlx5_1", "1", "np_cnp_sent");
    s.rx0 = twin.AddCounter(node, "ethtool", "eth0", "", "rx_prio0_pause", 0);
    ns.push_back(s);
  }
  std::mt19937_64 rng(5);
  std::vector<int> order(twin.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  for (int sec = 1; sec <= 400; ++sec) {
    const absl::Time t = testing::T0() + absl::Seconds(sec);
    std::shuffle(order.begin(), order.end(), rng);
    for (int i : order) {
      if (!twin.IsCounter(i)) continue;
      uint64_t inc = 0;
      for (int n = 0; n < 4; ++n) {
        const NodeSeries& s = ns[n];
        if (i == s.xmit_data) inc = 1'000'000'000;
        // node-0: mlx5_0 flaps twice (a down counted at 20 s and 30 s).
        if (n == 0 && i == s.downed && (sec == 20 || sec == 30)) inc = 1;
        // node-1: eth0 sends pauses nearly all the time from 100 s to 160 s (the origin); the
        // others are paused by it.
        const bool storm = sec >= 100 && sec < 160;
        if (i == s.tx3) inc = storm && n == 1 ? 970'000 : 2'000;
        if (i == s.rx3) inc = storm && n != 1 ? 900'000 : 2'000;
        if (i == s.tx3_frames) inc = storm && n == 1 ? 50'000 : 40;
        // node-2: mlx5_0 takes symbol errors at 50 a second from 200 s to 260 s.
        if (n == 2 && i == s.symbol && sec >= 200 && sec < 260) inc = 50;
        // node-3: RoCE port marks ECN and sends CNPs at 20,000 a second from 300 s to 330 s.
        if (n == 3 && (i == s.ecn || i == s.cnp) && sec >= 300 && sec < 330) inc = 20'000;
      }
      twin.Count(i, t, inc);
    }
    for (int n = 0; n < 4; ++n) {
      const bool down = n == 0 && (sec == 20 || sec == 30);
      twin.Show(ns[n].state, t, down ? 1 : 4);  // 1 DOWN, 4 ACTIVE
    }
    twin.Flush(t);
  }
  EXPECT_EQ(KindsOf(twin.changes()),
            (std::vector<std::string>{"congestion", "link_degraded", "link_down", "link_flapping",
                                      "pause_storm"}));
}

// A netdev's series bound while it is only a netdev, then mapped to its RDMA port: its steps go to
// the RDMA port's link from then on (the memos follow the directory's version).
TEST(SeriesBindingTest, MappingANetdevAfterBindingMovesItsStepsToTheRdmaPort) {
  Twin twin;
  const int carrier = twin.AddCounter("node-a", "netdev", "eth2", "", "carrier_changes");
  const int state = twin.AddState("node-a", "infiniband_port", "mlx5_2", "1", "state");
  for (int sec = 1; sec <= 5; ++sec) {
    const absl::Time t = testing::T0() + absl::Seconds(sec);
    twin.Count(carrier, t, 0);
    twin.Show(state, t, 4);
    twin.Flush(t);
  }
  twin.MapNetdev("node-a", "eth2", "mlx5_2", "1");
  for (int sec = 6; sec <= 60; ++sec) {
    const absl::Time t = testing::T0() + absl::Seconds(sec);
    twin.Count(carrier, t, sec == 10 || sec == 20 ? 2 : 0);  // down and up: two changes
    twin.Show(state, t, 4);
    twin.Flush(t);
  }
  bool seen = false;
  for (const IncidentChange& c : twin.changes()) {
    if (c.type != IncidentChangeType::kOpened) continue;
    seen = true;
    // The downs were counted by eth2's carrier: they reached mlx5_2's link (which was made by
    // the state series before the mapping, so it does not carry the netdev's name).
    EXPECT_EQ(c.incident.entity.at("device"), "mlx5_2");
    EXPECT_EQ(c.incident.entity.count("netdev") ? c.incident.entity.at("netdev") : "eth2", "eth2");
  }
  EXPECT_TRUE(seen);
}

// A port that goes silent is forgotten after stale_after; when its series come back under the
// same token they make a new record, and a flap there is raised as on a port never seen.
TEST(SeriesBindingTest, AForgottenPortThatComesBackStartsAfresh) {
  Twin twin;
  const int downed = twin.AddCounter("node-a", "infiniband", "mlx5_0", "1", "link_downed");
  const int state = twin.AddState("node-a", "infiniband_port", "mlx5_0", "1", "state");
  auto second = [&](int sec, bool down) {
    const absl::Time t = testing::T0() + absl::Seconds(sec);
    twin.Count(downed, t, down ? 1 : 0);
    twin.Show(state, t, down ? 1 : 4);
    twin.Flush(t);
  };
  for (int sec = 1; sec <= 10; ++sec) second(sec, false);
  EXPECT_EQ(twin.bound().Links(testing::T0() + absl::Seconds(10)).size(), 1u);
  twin.Flush(testing::T0() + absl::Hours(2));  // long silent: forgotten
  EXPECT_EQ(twin.bound().Links(testing::T0() + absl::Hours(2)).size(), 0u);
  const int back = 7200;
  for (int sec = back + 1; sec <= back + 60; ++sec) {
    second(sec, sec == back + 10 || sec == back + 20);
  }
  EXPECT_EQ(twin.bound().Links(testing::T0() + absl::Seconds(back + 60)).size(), 1u);
  EXPECT_EQ(KindsOf(twin.changes()), (std::vector<std::string>{"link_down", "link_flapping"}));
}

TEST(SeriesBindingTest, SeriesThatNoDetectorReadsAreNotNumbered) {
  FabricAnalysis a(FabricAnalysisOptions{}, nullptr);
  const SeriesBinding data = a.Bind("infiniband", "mlx5_0", "1", "port_xmit_data", -1);
  EXPECT_EQ(data.route, SeriesRoute::kNone);
  EXPECT_EQ(PortToken(1, data), 0u);
  const SeriesBinding sym = a.Bind("infiniband", "mlx5_0", "1", "symbol_error", -1);
  const SeriesBinding state = a.Bind("infiniband_port", "mlx5_0", "1", "state", -1);
  const SeriesBinding other = a.Bind("infiniband", "mlx5_1", "1", "symbol_error", -1);
  EXPECT_EQ(sym.route, SeriesRoute::kLink);
  EXPECT_EQ(sym.port, state.port);  // one port, whichever source reports it
  EXPECT_NE(sym.port, other.port);
  EXPECT_NE(PortToken(1, sym), PortToken(2, sym));  // and per node
  const SeriesBinding pause = a.Bind("ethtool", "eth0", "", "tx_prio3_pause_duration", 3);
  EXPECT_EQ(pause.route, SeriesRoute::kPauseStorm);
  EXPECT_GE(pause.prepared, 0);
  // A priority no switch has cannot be packed: the detector reads the names instead.
  const SeriesBinding odd = a.Bind("ethtool", "eth0", "", "tx_prio3_pause_duration", 1 << 30);
  EXPECT_EQ(odd.route, SeriesRoute::kPauseStorm);
  EXPECT_EQ(odd.prepared, -1);
}

TEST(SeriesIdentityGenerationTest, AReusedHandleHasANewGeneration) {
  SeriesIdentityPool pool;
  const uint32_t h = pool.Acquire({"infiniband", "mlx5_0", "1", "symbol_error", "count", -1});
  const uint32_t g = pool.Get(h).generation;
  EXPECT_GT(g, 0u);
  pool.Release(h);
  const uint32_t h2 = pool.Acquire({"ethtool", "eth0", "", "tx_prio3_pause", "packets", 3});
  ASSERT_EQ(h2, h);  // the freed handle is reused ...
  EXPECT_NE(pool.Get(h2).generation, g);  // ... under another generation
  EXPECT_EQ(*pool.Get(h2).counter, "tx_prio3_pause");
  // Acquiring a tuple already held keeps its generation.
  const uint32_t h3 = pool.Acquire({"ethtool", "eth0", "", "tx_prio3_pause", "packets", 3});
  EXPECT_EQ(h3, h2);
  EXPECT_EQ(pool.Get(h3).generation, pool.Get(h2).generation);
}

}  // namespace
}  // namespace ringside::analysis
