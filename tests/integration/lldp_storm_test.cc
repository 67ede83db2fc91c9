// Issue #16 end to end with no --topology file: the leaf comes from LLDP alone. One "leaf-1" switch
// namespace and four host namespaces this test creates, a real lldpd in each; a veth from each
// host to leaf-1 (swp1..swp4) whose host end is named as the RoCE netdev the simulated node's
// agent reports (ens1f0np0, mlx5_0's netdev). The simulator's cluster (sim/cluster.h) runs a real
// ringside-aggregator without --topology and one real ringside-agent per node (in this namespace;
// only their LLDP collector reads the host namespace's lldpd, by its socket), with generated sysfs
// trees, ethtool dumps rewritten every step (write and rename), and a 4-rank job driving the real
// NCCL plugin.
//
// node-01's port sends PFC pauses on priority 3 (tx rising fast), node-02's and node-03's are
// paused (rx); node-04, under the same leaf, is not paused but its rank computes 60 % slower
// meanwhile. The aggregator's Query API then shows: its topology from LLDP (1 leaf, 4 hosts, in
// its log); exactly one pause_storm incident, its entity node-01's port, node-02 and node-03 in
// its spread as members of the leaf (no inferred spread); and the straggler of node-04's rank,
// caused by that storm through the leaf (scope "leaf": node-04 had no paused port, so only the
// topology ties them). With the agents' LLDP off, the same run gives an inferred spread and a
// "host" cause (docs/lldp.md). Skips without root, network namespaces or lldpd.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "sim/cluster.h"
#include "sim/scenario.h"
#include "sim/sim_names.h"
#include "tests/testing/lldp_lab.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using json = nlohmann::json;
using testing::BinaryPath;

constexpr int kNodes = 4;

class LldpStormTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    if (!testing::LldpLab::LldpdInstalled()) {
      GTEST_SKIP() << "lldpd is not installed (apt-get install lldpd)";
    }
    lab_ = std::make_unique<testing::LldpLab>(dir_.path());
    absl::StatusOr<std::string> leaf = lab_->AddNamespace("rs-sl");
    if (absl::IsFailedPrecondition(leaf.status())) GTEST_SKIP() << leaf.status();
    ASSERT_TRUE(leaf.ok()) << leaf.status();
    leaf_ns_ = *leaf;
    for (int i = 0; i < kNodes; ++i) {
      absl::StatusOr<std::string> host = lab_->AddNamespace(absl::StrCat("rs-sh", i + 1));
      ASSERT_TRUE(host.ok()) << host.status();
      hosts_.push_back(*host);
      absl::Status s = lab_->Cable(*host, sim::RailNetdev(0), leaf_ns_, absl::StrCat("swp", i + 1),
                                   i == 0 ? "192.0.2.1/24" : "");
      ASSERT_TRUE(s.ok()) << s;
    }
    absl::Status s = lab_->StartLldpd(leaf_ns_, "swp*", "leaf-1");
    ASSERT_TRUE(s.ok()) << s;
    for (int i = 0; i < kNodes; ++i) {
      s = lab_->StartLldpd(hosts_[i], sim::RailNetdev(0), sim::SimNodeName(i, kNodes));
      ASSERT_TRUE(s.ok()) << s;
    }
    // Every host's lldpd knows leaf-1 before the agents start (lldpd sends every second).
    for (int i = 0; i < kNodes; ++i) {
      s = lab_->WaitForNeighbor(hosts_[i], sim::RailNetdev(0), "leaf-1", absl::Seconds(30));
      ASSERT_TRUE(s.ok()) << s;
    }
  }

  void TearDown() override {
    if (cluster_) cluster_->Stop();
    cluster_.reset();
    lab_.reset();
  }

  // GET /api/v1/incidents (the Query API's JSON: an array, newest first).
  json Incidents() {
    const std::string body =
        testing::HttpGet(cluster_->http_port(), "/api/v1/incidents?limit=1000");
    json j = json::parse(body, nullptr, false);
    return j.is_array() ? j : json::array();
  }
  static std::vector<json> OfKind(const json& incidents, const std::string& kind) {
    std::vector<json> out;
    for (const json& i : incidents) {
      if (i.value("kind", "") == kind) out.push_back(i);
    }
    return out;
  }
  // Steps the cluster (as ringside-sim's runner does) until `pred` or `until` (simulation time).
  template <typename Pred>
  bool RunUntil(absl::Duration until, Pred pred) {
    while (true) {
      const absl::Duration t = absl::Now() - cluster_->t0();
      cluster_->Step(t);
      if (pred()) return true;
      if (t >= until) return false;
      absl::SleepFor(absl::Milliseconds(250));
    }
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::LldpLab> lab_;
  std::string leaf_ns_;
  std::vector<std::string> hosts_;
  sim::Scenario scenario_;
  std::unique_ptr<sim::Cluster> cluster_;
};

TEST_F(LldpStormTest, StormUnderAnLldpLeafNamesOriginVictimsAndTheStragglerItCaused) {
  scenario_.name = "lldp_storm";
  scenario_.nodes = kNodes;
  scenario_.gpus = 1;
  scenario_.nvlinks = 2;
  // The simulator pauses the other nodes of the origin's own leaf: node-02 and node-03, not
  // node-04. (Its own leaf is only the simulator's; the aggregator knows only what LLDP says:
  // all four under leaf-1.)
  scenario_.nodes_per_leaf = 3;
  scenario_.interval = absl::Seconds(1);
  scenario_.background_noise = false;
  scenario_.compute = absl::Milliseconds(80);
  scenario_.collective = absl::Milliseconds(10);
  scenario_.seed = 16;
  scenario_.duration = absl::Seconds(120);
  sim::FaultSpec storm;
  storm.kind = sim::FaultKind::kPauseStorm;
  storm.node = 0;
  storm.device = sim::RailDevice(0);
  storm.rank = 3;  // node-04's only rank computes slower while the storm lasts
  storm.slowdown_pct = 60;
  storm.start = absl::Seconds(10);
  storm.duration = absl::Seconds(60);
  scenario_.faults.push_back(storm);

  sim::ClusterOptions co;
  co.agent_bin = BinaryPath("daemon/ringside-agent");
  co.aggregator_bin = BinaryPath("daemon/ringside-aggregator");
  co.plugin = BinaryPath("collectors/nccl_plugin/libringside_nccl.so");
  co.nvml_library = BinaryPath("sim/nvml/libnvidia-ml.so.1");
  co.work_dir = dir_.path() + "/cluster";
  std::filesystem::create_directories(co.work_dir);
  co.topology_file = false;
  for (int i = 0; i < kNodes; ++i) {
    co.agent_args.push_back(
        {"--lldp-socket=" + lab_->Socket(hosts_[i]), "--lldp-interval=500ms"});
  }
  absl::StatusOr<std::unique_ptr<sim::Cluster>> c = sim::Cluster::Start(scenario_, co);
  ASSERT_TRUE(c.ok()) << c.status();
  cluster_ = *std::move(c);
  const std::string origin = scenario_.NodeName(0);
  const std::string straggler_node = scenario_.NodeName(3);

  // The topology, from the agents' LLDP records, before the storm starts.
  ASSERT_TRUE(RunUntil(storm.start - absl::Seconds(1), [&] {
    return absl::StrContains(cluster_->aggregator_log(0, 0), "1 leaves, 4 hosts");
  })) << cluster_->aggregator_log(0, 0);
  EXPECT_TRUE(absl::StrContains(cluster_->aggregator_log(0, 0), "topology from LLDP"))
      << cluster_->aggregator_log(0, 0);

  // The storm with both victims in its spread, and the straggler caused by it.
  ASSERT_TRUE(RunUntil(storm.start + absl::Seconds(40), [&] {
    const json list = Incidents();
    std::vector<json> storms = OfKind(list, "pause_storm");
    std::vector<json> stragglers = OfKind(list, "straggler");
    if (storms.empty() || stragglers.empty()) return false;
    if (storms[0]["evidence"].value("spread_ports", 0.0) < 2) return false;
    const json& causes = stragglers[0]["causes"];
    return causes.is_array() && !causes.empty() && causes[0].value("kind", "") == "pause_storm";
  })) << Incidents().dump(1) << "\n"
      << cluster_->aggregator_log(0, 0);

  const json list = Incidents();
  std::vector<json> storms = OfKind(list, "pause_storm");
  ASSERT_EQ(storms.size(), 1u) << list.dump(1);
  const json& st = storms[0];
  // The origin: node-01's port, priority 3, sending pauses.
  EXPECT_EQ(st["entity"].value("node", ""), origin) << st.dump(1);
  EXPECT_EQ(st["entity"].value("device", ""), sim::RailDevice(0)) << st.dump(1);
  EXPECT_EQ(st["entity"].value("priority", ""), "3") << st.dump(1);
  EXPECT_TRUE(absl::StrContains(st.value("summary", ""), origin + " mlx5_0 sends pauses"))
      << st.dump(1);
  // The victims: node-02 and node-03 as members of the leaf (spread), none inferred; not node-04
  // (not paused) and not the origin.
  const json& ev = st["evidence"];
  std::vector<std::string> spread;
  for (const auto& [k, v] : ev.items()) {
    EXPECT_FALSE(absl::StartsWith(k, "inferred_spread/")) << "inferred, not from the topology: " << k;
    if (absl::StartsWith(k, "spread/")) spread.push_back(k.substr(7, k.find('/', 7) - 7));
  }
  EXPECT_EQ(spread, (std::vector<std::string>{scenario_.NodeName(1), scenario_.NodeName(2)}))
      << st.dump(1);
  EXPECT_EQ(ev.value("spread_ports", 0.0), 2.0) << st.dump(1);
  EXPECT_FALSE(ev.contains("inferred_spread_ports")) << st.dump(1);
  EXPECT_FALSE(absl::StrContains(st.value("summary", ""), "inferred")) << st.dump(1);

  // The straggler: node-04's rank, caused by the storm through the leaf.
  std::vector<json> stragglers = OfKind(list, "straggler");
  ASSERT_EQ(stragglers.size(), 1u) << list.dump(1);
  const json& sg = stragglers[0];
  EXPECT_EQ(sg["entity"].value("rank", ""), "3") << sg.dump(1);
  EXPECT_EQ(sg["entity"].value("node", ""), straggler_node) << sg.dump(1);
  const json& cause = sg["causes"][0];
  EXPECT_EQ(cause.value("kind", ""), "pause_storm") << sg.dump(1);
  EXPECT_EQ(cause.value("scope", ""), "leaf") << sg.dump(1);
  EXPECT_EQ(cause.value("key", ""), st.value("key", "")) << sg.dump(1);
  // The storm's blast radius lists the job, by the leaf (node-04's rank among its ranks).
  bool lists_rank = false;
  for (const json& a : st["affected"]) {
    if (a.value("job", "") != scenario_.job_id) continue;
    for (const json& r : a["ranks"]) lists_rank = lists_rank || r.dump() == "3";
  }
  EXPECT_TRUE(lists_rank) << st.dump(1);

  // The CLI (Query API over gRPC) shows the same single storm.
  testing::RunResult cli = testing::Run(
      {BinaryPath("daemon/ringside"), "incidents",
       absl::StrCat("--aggregator=127.0.0.1:", cluster_->grpc_port()), "--timeout=5s", "-o",
       "json"},
      "", absl::Seconds(30));
  ASSERT_EQ(cli.exit_code, 0) << cli.out << cli.err;
  json cj = json::parse(cli.out, nullptr, false);
  const json& cli_list = cj.is_object() && cj.contains("incidents") ? cj["incidents"] : cj;
  ASSERT_TRUE(cli_list.is_array()) << cli.out;
  std::vector<json> cli_storms = OfKind(cli_list, "pause_storm");
  ASSERT_EQ(cli_storms.size(), 1u) << cli.out;
  EXPECT_EQ(cli_storms[0].value("key", ""), st.value("key", ""));
}

}  // namespace
}  // namespace ringside
