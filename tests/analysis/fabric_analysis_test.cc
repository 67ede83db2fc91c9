#include "analysis/fabric_analysis.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "analysis/sqlite_incident_store.h"
#include "tests/analysis/fabric_sim.h"
#include "tests/testing/temp_dir.h"

namespace ringside::analysis {
namespace {

using testing::SimCounter;

const char* const kNodes[] = {"node-a", "node-b", "node-c", "node-d"};

// Four nodes, four ranks each; node-b's RoCE port (eth0 = mlx5_3) stops taking traffic at
// `storm_from` and pauses the leaf; rank 5 on node-b then arrives late at every all-reduce.
class Cluster {
 public:
  explicit Cluster(absl::Time start) : t_(start), collective_clock_(absl::ToUnixNanos(start)) {
    for (const char* n : kNodes) {
      rx_.push_back(std::make_unique<SimCounter>(n, "ethtool", "eth0", "",
                                                 "rx_prio3_pause_duration", 64, false, 0, 3));
      tx_.push_back(std::make_unique<SimCounter>(n, "ethtool", "eth0", "",
                                                 "tx_prio3_pause_duration", 64, false, 0, 3));
    }
  }

  // One input as one agent's stream delivers it: a counter step or a collective record.
  struct Input {
    int node = 0;  // whose stream
    std::optional<CounterStep> step;
    std::optional<CollectiveObservation> collective;
  };

  // One second: the agents' samples, then the collectives that completed in it.
  void Second(FabricAnalysis& a, bool storm) {
    for (const Input& in : Inputs(storm)) Deliver(a, in);
  }
  static void Deliver(FabricAnalysis& a, const Input& in) {
    if (in.step) a.OnCounter(*in.step);
    if (in.collective) a.OnCollective(*in.collective);
  }
  // The same second as inputs, in the order each node's agent sends them.
  std::vector<Input> Inputs(bool storm) {
    std::vector<Input> out;
    t_ += absl::Seconds(1);
    for (int n = 0; n < 4; ++n) {
      const bool origin = storm && n == 1;
      const bool victim = storm && (n == 0 || n == 2);
      out.push_back({n, rx_[n]->Step(t_, victim ? 900'000 : 1'000), std::nullopt});
      out.push_back({n, tx_[n]->Step(t_, origin ? 970'000 : 1'000), std::nullopt});
    }
    std::normal_distribution<double> jitter(0, 0.0005);
    while (collective_clock_ < absl::ToUnixNanos(t_)) {
      int64_t latest = 0;
      std::vector<int64_t> arrive(16);
      for (int r = 0; r < 16; ++r) {
        const double compute = 0.1 * (storm && r == 5 ? 1.3 : 1.0) + std::abs(jitter(rng_));
        arrive[r] = collective_clock_ + static_cast<int64_t>(compute * 1e9);
        latest = std::max(latest, arrive[r]);
      }
      const int64_t done = latest + 5'000'000;
      for (int r = 0; r < 16; ++r) {
        CollectiveObservation o;
        o.job = "job-1";
        o.comm_id = 7;
        o.comm_name = "dp";
        o.rank = r;
        o.nranks = 16;
        o.global_rank = r;
        o.function = "AllReduce";
        o.seq = seq_;
        o.bytes = 1 << 26;
        o.start_ns = arrive[r];
        o.stop_ns = done;
        o.host = kNodes[r / 4];
        out.push_back({r / 4, std::nullopt, std::move(o)});
      }
      ++seq_;
      collective_clock_ = done;
    }
    return out;
  }
  absl::Time now() const { return t_; }

 private:
  absl::Time t_;
  int64_t collective_clock_;
  uint64_t seq_ = 0;
  std::mt19937_64 rng_{11};
  std::vector<std::unique_ptr<SimCounter>> rx_, tx_;
};

class FabricAnalysisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Topology> t =
        Topology::Parse("node-a leaf-1\nnode-b leaf-1\nnode-c leaf-1\nnode-d leaf-2\n");
    ASSERT_TRUE(t.ok());
    topology_ = *std::move(t);
  }
  std::unique_ptr<FabricAnalysis> Make(IncidentStore* store) {
    auto a = std::make_unique<FabricAnalysis>(FabricAnalysisOptions{}, store, &topology_);
    for (const char* n : kNodes) a->MapNetdev(n, "eth0", "mlx5_3", "1");
    return a;
  }
  static const Incident* Find(const FabricAnalysis& a, IncidentKind kind) {
    for (const Incident* inc : a.incidents().Open()) {
      if (inc->kind == kind) return inc;
    }
    return nullptr;
  }

  Topology topology_;
  ringside::testing::TempDir tmp_;
};

TEST_F(FabricAnalysisTest, APauseStormMakesRankFiveAStragglerAndIsNamedAsItsCause) {
  auto store = SqliteIncidentStore::Open(tmp_.path());
  ASSERT_TRUE(store.ok()) << store.status();
  Cluster cluster(testing::T0());
  {
    auto a = Make(store->get());
    ASSERT_TRUE(a->Start(cluster.now()).ok());
    for (int s = 0; s < 10; ++s) {
      cluster.Second(*a, false);
      ASSERT_TRUE(a->Flush(cluster.now()).ok());
    }
    EXPECT_TRUE(a->incidents().Open().empty());
    std::vector<IncidentChange> changes;
    for (int s = 0; s < 15; ++s) {
      cluster.Second(*a, true);
      ASSERT_TRUE(a->Flush(cluster.now(), &changes).ok());
    }
    const Incident* storm = Find(*a, IncidentKind::kPauseStorm);
    ASSERT_NE(storm, nullptr);
    EXPECT_EQ(storm->entity.at("node"), "node-b");
    EXPECT_EQ(storm->entity.at("device"), "mlx5_3");
    EXPECT_EQ(storm->entity.at("priority"), "3");
    ASSERT_EQ(storm->affected.size(), 1u);
    EXPECT_EQ(storm->affected[0].job, "job-1");
    EXPECT_EQ(storm->affected[0].ranks.size(), 12u);  // nodes a, b, c of leaf-1
    const Incident* straggler = Find(*a, IncidentKind::kStraggler);
    ASSERT_NE(straggler, nullptr);
    EXPECT_EQ(straggler->entity.at("rank"), "5");
    EXPECT_EQ(straggler->entity.at("node"), "node-b");
    ASSERT_FALSE(straggler->causes.empty());
    EXPECT_EQ(straggler->causes[0].incident_id, storm->id);
    EXPECT_EQ(straggler->causes[0].summary, "pause_storm on node-b mlx5_3 prio 3");
    EXPECT_EQ(a->incidents().Open().size(), 2u) << IncidentJson(*a->incidents().Open().back());
  }
  // The aggregator restarts in the middle of it: nothing is raised twice.
  auto a = Make(store->get());
  ASSERT_TRUE(a->Start(cluster.now()).ok());
  ASSERT_EQ(a->incidents().Open().size(), 2u);
  const uint64_t next = a->incidents().next_id();
  for (int s = 0; s < 10; ++s) {
    cluster.Second(*a, true);
    ASSERT_TRUE(a->Flush(cluster.now()).ok());
  }
  EXPECT_EQ(a->incidents().next_id(), next);  // no new incident
  EXPECT_EQ(a->incidents().Open().size(), 2u);
  // It ends: the storm resolves; the straggler detector lets rank 5 go.
  for (int s = 0; s < 60; ++s) {
    cluster.Second(*a, false);
    ASSERT_TRUE(a->Flush(cluster.now()).ok());
  }
  EXPECT_TRUE(a->incidents().Open().empty());
  IncidentQuery all;
  EXPECT_EQ((*store)->List(all)->size(), 2u);
}

// Two replicas of one shard get the same streams, but the agents' streams interleave differently
// at each (one replica also hears them late and flushes on its own beat): every incident gets the
// same stable key on both, so Alertmanager sees one alert (issue #14).
TEST_F(FabricAnalysisTest, ReplicasFedTheSameDataInAnotherOrderRaiseTheSameKeys) {
  Cluster cluster(testing::T0());
  std::vector<std::vector<Cluster::Input>> seconds;
  std::vector<absl::Time> ends;
  for (int s = 0; s < 85; ++s) {
    seconds.push_back(cluster.Inputs(s >= 10 && s < 25));
    ends.push_back(cluster.now());
  }
  using Keys = std::set<std::pair<std::string, std::string>>;  // (change, key)
  auto keys_of = [](const std::vector<IncidentChange>& changes) {
    Keys keys;
    for (const IncidentChange& c : changes) {
      keys.insert({std::string(IncidentChangeTypeName(c.type)), StableIncidentKey(c.incident)});
    }
    return keys;
  };

  // Replica A: each second in the order generated, flushed at its end.
  auto a = Make(nullptr);
  ASSERT_TRUE(a->Start(testing::T0()).ok());
  std::vector<IncidentChange> changes_a;
  for (size_t s = 0; s < seconds.size(); ++s) {
    for (const Cluster::Input& in : seconds[s]) Cluster::Deliver(*a, in);
    ASSERT_TRUE(a->Flush(ends[s], &changes_a).ok());
  }

  // Replica B: the four streams interleaved at random (each stream keeps its own order), a
  // second's inputs split across two of its flushes, which come every 700 ms of arrival time.
  auto b = Make(nullptr);
  ASSERT_TRUE(b->Start(testing::T0()).ok());
  std::vector<IncidentChange> changes_b;
  std::mt19937_64 rng(5);
  std::vector<Cluster::Input> arrivals;
  for (const auto& second : seconds) {
    std::vector<std::vector<const Cluster::Input*>> streams(4);
    for (const Cluster::Input& in : second) streams[in.node].push_back(&in);
    std::vector<size_t> next(4, 0);
    for (size_t left = second.size(); left > 0; --left) {
      int n;
      do {
        n = static_cast<int>(rng() % 4);
      } while (next[n] == streams[n].size());
      arrivals.push_back(*streams[n][next[n]++]);
    }
  }
  const absl::Time last = ends.back() + absl::Seconds(2);
  size_t delivered = 0;
  for (absl::Time t = testing::T0() + absl::Milliseconds(700); t <= last;
       t += absl::Milliseconds(700)) {
    // Deliver what had "arrived" by t: inputs spread evenly over the run, 1.3 s late.
    const double frac = std::clamp(absl::ToDoubleSeconds(t - testing::T0() - absl::Seconds(1.3)) /
                                       absl::ToDoubleSeconds(ends.back() - testing::T0()),
                                   0.0, 1.0);
    const size_t upto = t + absl::Milliseconds(700) > last
                            ? arrivals.size()
                            : static_cast<size_t>(frac * static_cast<double>(arrivals.size()));
    for (; delivered < upto; ++delivered) Cluster::Deliver(*b, arrivals[delivered]);
    ASSERT_TRUE(b->Flush(t, &changes_b).ok());
  }
  ASSERT_EQ(delivered, arrivals.size());

  const Keys ka = keys_of(changes_a);
  std::set<std::string> kinds;
  for (const IncidentChange& c : changes_a) {
    if (c.type == IncidentChangeType::kOpened) kinds.insert(std::string(IncidentKindName(c.incident.kind)));
  }
  EXPECT_TRUE(kinds.count("pause_storm")) << "the scenario raised no pause storm";
  EXPECT_TRUE(kinds.count("straggler")) << "the scenario raised no straggler";
  Keys opened_a, opened_b;
  for (const auto& k : ka) {
    if (k.first == "opened") opened_a.insert(k);
  }
  for (const auto& k : keys_of(changes_b)) {
    if (k.first == "opened") opened_b.insert(k);
  }
  EXPECT_EQ(opened_a, opened_b);
  // The local ids are this replica's own business; the keys are not.
  std::map<std::string, Incident> by_key_a, by_key_b;
  for (const IncidentChange& c : changes_a) by_key_a[StableIncidentKey(c.incident)] = c.incident;
  for (const IncidentChange& c : changes_b) by_key_b[StableIncidentKey(c.incident)] = c.incident;
  for (const auto& [key, inc] : by_key_a) {
    ASSERT_TRUE(by_key_b.count(key)) << IncidentJson(inc);
    EXPECT_EQ(by_key_b[key].entity, inc.entity);
    EXPECT_EQ(by_key_b[key].opened, inc.opened);
  }
}

TEST(RouteTest, SeriesRoutes) {
  EXPECT_EQ(RouteOf("infiniband", "symbol_error"), SeriesRoute::kLink);
  EXPECT_EQ(RouteOf("infiniband_port", "state"), SeriesRoute::kLink);
  EXPECT_EQ(RouteOf("netdev", "carrier_down_count"), SeriesRoute::kLink);
  EXPECT_EQ(RouteOf("nvlink", "replay_errors"), SeriesRoute::kLink);
  EXPECT_EQ(RouteOf("ethtool", "tx_prio3_pause_duration"), SeriesRoute::kPauseStorm);
  EXPECT_EQ(RouteOf("ethtool", "tx_pause_storm_error_events"), SeriesRoute::kPauseStorm);
  EXPECT_EQ(RouteOf("ethtool", "rx_prio3_pause_transition"), SeriesRoute::kNone);
  EXPECT_EQ(RouteOf("infiniband_hw", "np_cnp_sent"), SeriesRoute::kCongestion);
  EXPECT_EQ(RouteOf("ethtool", "rx_prio0_marked"), SeriesRoute::kCongestion);
  EXPECT_EQ(RouteOf("infiniband", "port_rcv_data"), SeriesRoute::kNone);
}

}  // namespace
}  // namespace ringside::analysis
