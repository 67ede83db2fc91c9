// Issue #16 item 3 as processes: an agent routing by --shard-map with no --topology lands on the
// aggregator shard of the leaf its own LLDP neighbour names, and moves when its port is recabled to
// a leaf of another shard. Real lldpd daemons in namespaces this test makes (tests/testing/
// lldp_lab.h): a host namespace whose h0 is cabled (a veth pair) to leaf A, then to leaf B; two
// real ringside-aggregator processes on 127.0.0.1, one per shard; a real ringside-agent reading the
// host namespace's lldpd through its socket, with a sysfs tree that maps h0 to the RDMA device
// mlx5_0 (h0 is a RoCE port). Skips when namespaces cannot be made or lldpd is not installed.
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "analysis/shard_map.h"
#include "tests/testing/lldp_lab.h"
#include "tests/testing/process.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using testing::BinaryPath;

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

int PortFromLog(const std::string& log, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex(pattern))) return 0;
  return std::stoi(m[1].str());
}

// ringside_aggregator_node_stale{node} on an aggregator's /metrics: -1 when it does not list the
// node.
double NodeStale(int http_port, const std::string& node) {
  testing::PromText text = testing::ParsePromText(testing::HttpGet(http_port, "/metrics"));
  auto s = text.Find("ringside_aggregator_node_stale", {{"node", node}});
  return s.empty() ? -1 : s[0].value;
}

// ringside_aggregator_topology_links{leaf}: host ports under the leaf in the aggregator's
// topology; 0 when it does not list the leaf.
double LeafLinks(int http_port, const std::string& leaf) {
  testing::PromText text = testing::ParsePromText(testing::HttpGet(http_port, "/metrics"));
  auto s = text.Find("ringside_aggregator_topology_links", {{"leaf", leaf}});
  return s.empty() ? 0 : s[0].value;
}

double TopologyEvents(int http_port) {
  testing::PromText text = testing::ParsePromText(testing::HttpGet(http_port, "/metrics"));
  auto s = text.Find("ringside_aggregator_topology_events_total", {});
  return s.empty() ? -1 : s[0].value;
}

bool Eventually(const std::function<bool()>& pred, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return pred();
}

class LldpShardTest : public ::testing::Test {
 protected:
  struct Aggregator {
    std::unique_ptr<testing::Process> process;
    std::unique_ptr<testing::TempDir> state;
    int grpc = 0;
    int http = 0;
  };

  void SetUp() override {
    if (!testing::LldpLab::LldpdInstalled()) {
      GTEST_SKIP() << "lldpd is not installed (apt-get install lldpd)";
    }
    lab_ = std::make_unique<testing::LldpLab>(dir_.path());
    const std::pair<std::string*, const char*> namespaces[] = {
        {&host_, "rs-sh"}, {&sw_a_, "rs-sa"}, {&sw_b_, "rs-sb"}};
    for (auto [ns, tag] : namespaces) {
      absl::StatusOr<std::string> made = lab_->AddNamespace(tag);
      if (absl::IsFailedPrecondition(made.status())) GTEST_SKIP() << made.status();
      ASSERT_TRUE(made.ok()) << made.status();
      *ns = *made;
    }
    ChooseLeaves();
  }

  void TearDown() override { lab_.reset(); }

  // Two leaves on different shards, the first not on the shard the node's name would pick, so
  // placement by LLDP is visible. Shards are placed by their names, not their addresses.
  void ChooseLeaves() {
    absl::StatusOr<analysis::ShardMap> names =
        analysis::ShardMap::Parse("shard-0 127.0.0.1:1\nshard-1 127.0.0.1:2\n");
    ASSERT_TRUE(names.ok());
    by_name_ = names->ShardOfKey("node:" + node_);
    for (int i = 1; i < 100 && (leaf_a_.empty() || leaf_b_.empty()); ++i) {
      const std::string leaf = absl::StrCat("leaf-", i);
      const size_t s = names->ShardOfKey("leaf:" + leaf);
      if (leaf_a_.empty() && s != by_name_) leaf_a_ = leaf;
      if (leaf_b_.empty() && s == by_name_) leaf_b_ = leaf;
    }
    ASSERT_FALSE(leaf_a_.empty() || leaf_b_.empty());
    shard_a_ = 1 - by_name_;
    shard_b_ = by_name_;
  }

  void StartAggregators() {
    StartAggregator(agg_[0]);
    StartAggregator(agg_[1]);
    map_path_ = dir_.path() + "/shards.txt";
    WriteFile(map_path_, absl::StrCat("shard-0 127.0.0.1:", agg_[0].grpc, "\nshard-1 127.0.0.1:",
                                      agg_[1].grpc, "\n"));
  }

  std::unique_ptr<testing::Process> StartAgent(std::vector<std::string> extra) {
    std::vector<std::string> argv = {
        BinaryPath("daemon/ringside-agent"), "--listen=127.0.0.1:0", "--interval=200ms",
        "--node-name=" + node_, "--sysfs-root=" + SysfsTree(), "--shard-map=" + map_path_,
        "--lldp-socket=" + lab_->Socket(host_), "--lldp-interval=500ms",
        "--ethtool-source=off", "--nvml-library=", "--link-events=false",
        "--collectives-socket=", "--upload-flush-timeout=1s"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<testing::Process>(argv, dir_.path());
  }

  void StopAll(testing::Process& agent) {
    agent.Signal(SIGTERM);
    EXPECT_EQ(agent.Wait(absl::Seconds(15)), 0) << agent.Stderr();
    for (Aggregator& a : agg_) {
      a.process->Signal(SIGTERM);
      EXPECT_EQ(a.process->Wait(absl::Seconds(15)), 0) << a.process->Stderr();
    }
  }

  void StartAggregator(Aggregator& a) {
    a.state = std::make_unique<testing::TempDir>();
    a.process = std::make_unique<testing::Process>(
        std::vector<std::string>{BinaryPath("daemon/ringside-aggregator"),
                                 "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
                                 "--state-dir=" + a.state->path(), "--stale-after=3s"},
        a.state->path());
    ASSERT_TRUE(a.process->WaitForStderr("HTTP (/metrics", absl::Seconds(20)))
        << a.process->Stderr();
    const std::string err = a.process->Stderr();
    a.grpc = PortFromLog(err, "ingest \\(gRPC\\) listening on \\S+ \\(port ([0-9]+)\\)");
    a.http = PortFromLog(err, "HTTP \\S+ \\S+ \\S+ listening on \\S+ \\(port ([0-9]+)\\)");
    ASSERT_GT(a.grpc, 0) << err;
    ASSERT_GT(a.http, 0) << err;
  }

  // A sysfs tree in which h0 is the netdev of mlx5_0 port 1 (a RoCE port).
  std::string SysfsTree() {
    const std::filesystem::path root = std::filesystem::path(dir_.path()) / "sys";
    WriteFile(root / "class/net/h0/statistics/rx_bytes", "0\n");
    WriteFile(root / "class/net/h0/operstate", "up\n");
    const std::filesystem::path port = root / "class/infiniband/mlx5_0/ports/1";
    WriteFile(port / "gid_attrs/ndevs/0", "h0\n");
    WriteFile(port / "link_layer", "Ethernet\n");
    WriteFile(port / "state", "4: ACTIVE\n");
    WriteFile(port / "counters/port_rcv_data", "0\n");
    return root.string();
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::LldpLab> lab_;
  std::string host_, sw_a_, sw_b_;
  const std::string node_ = "host-1";
  std::string leaf_a_, leaf_b_;
  size_t by_name_ = 0, shard_a_ = 0, shard_b_ = 0;
  Aggregator agg_[2];
  std::string map_path_;
};

TEST_F(LldpShardTest, AgentLandsOnTheShardOfItsLldpLeafAndMovesWhenRecabled) {
  ASSERT_TRUE(lab_->Cable(host_, "h0", sw_a_, "swp1").ok());
  ASSERT_TRUE(lab_->StartLldpd(host_, "h0", node_).ok());
  ASSERT_TRUE(lab_->StartLldpd(sw_a_, "swp*", leaf_a_).ok());
  ASSERT_TRUE(lab_->StartLldpd(sw_b_, "swp*", leaf_b_).ok());
  ASSERT_TRUE(lab_->WaitForNeighbor(host_, "h0", leaf_a_, absl::Seconds(20)).ok());
  StartAggregators();
  std::unique_ptr<testing::Process> agent_process = StartAgent({});
  testing::Process& agent = *agent_process;
  const std::string placed =
      absl::StrCat("shard shard-", shard_a_, " of 2 (placed by leaf:", leaf_a_, ")");
  ASSERT_TRUE(agent.WaitForStderr(placed, absl::Seconds(30))) << agent.Stderr();
  ASSERT_TRUE(Eventually([&] { return NodeStale(agg_[shard_a_].http, node_) == 0; },
                         absl::Seconds(20)))
      << agg_[shard_a_].process->Stderr();
  EXPECT_EQ(NodeStale(agg_[shard_b_].http, node_), -1);  // the other shard never heard of it
  // The shard has the node's port under its LLDP leaf.
  EXPECT_TRUE(Eventually([&] { return LeafLinks(agg_[shard_a_].http, leaf_a_) == 1; },
                         absl::Seconds(10)))
      << agg_[shard_a_].process->Stderr();

  // Recabled: h0 now goes to leaf B, a switch of the other shard.
  ASSERT_TRUE(lab_->Uncable(host_, "h0").ok());
  ASSERT_TRUE(lab_->Cable(host_, "h0", sw_b_, "swp3").ok());
  const absl::Time recabled = absl::Now();
  const std::string moved = absl::StrCat("shard moved from shard-", shard_a_, " to shard-",
                                         shard_b_, " (placed by leaf:", leaf_b_, ")");
  ASSERT_TRUE(agent.WaitForStderr(moved, absl::Seconds(30))) << agent.Stderr();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - recabled);
  RecordProperty("move_logged_after_recabling_seconds", absl::StrCat(seconds));
  std::fprintf(stderr, "move logged %.2f s after the recabling (lldpd tx-interval 1 s)\n", seconds);
  ASSERT_TRUE(Eventually([&] { return NodeStale(agg_[shard_b_].http, node_) == 0; },
                         absl::Seconds(20)))
      << agg_[shard_b_].process->Stderr();
  // The old replica's uploader flushed and closed its session.
  EXPECT_TRUE(agent.WaitForStderr(
      absl::StrCat("upload to 127.0.0.1:", agg_[shard_a_].grpc,
                   " retired (the node moved to another shard), everything acknowledged"),
      absl::Seconds(10)))
      << agent.Stderr();
  // The old shard hears the node's counters no more, but is told so (a collectives-only Hello):
  // it never lists the node as stale, through more than twice its --stale-after (3 s).
  EXPECT_TRUE(agent.WaitForStderr(
      absl::StrCat("connected to 127.0.0.1:", agg_[shard_a_].grpc), absl::Seconds(10)));
  const absl::Time watch_until = absl::Now() + absl::Seconds(8);
  while (absl::Now() < watch_until) {
    ASSERT_NE(NodeStale(agg_[shard_a_].http, node_), 1)
        << "the old shard judges a node that moved away stale\n"
        << agg_[shard_a_].process->Stderr();
    absl::SleepFor(absl::Milliseconds(250));
  }
  EXPECT_EQ(NodeStale(agg_[shard_b_].http, node_), 0);
  // The new shard has the port under leaf B; the old shard let the node's LLDP ports go when the
  // collectives-only Hello came (they would name leaf A, or leaf B on a shard that does not own
  // it), and recorded no topology event for it: the cable did not go, the node did.
  EXPECT_TRUE(Eventually([&] { return LeafLinks(agg_[shard_b_].http, leaf_b_) == 1; },
                         absl::Seconds(10)))
      << agg_[shard_b_].process->Stderr();
  EXPECT_EQ(LeafLinks(agg_[shard_a_].http, leaf_a_), 0) << agg_[shard_a_].process->Stderr();
  EXPECT_EQ(LeafLinks(agg_[shard_a_].http, leaf_b_), 0) << agg_[shard_a_].process->Stderr();
  EXPECT_EQ(TopologyEvents(agg_[shard_a_].http), 0) << agg_[shard_a_].process->Stderr();
  EXPECT_TRUE(agg_[shard_a_].process->WaitForStderr(
      absl::StrCat("topology: ", node_, "'s counters moved to another shard"), absl::Seconds(1)));

  // The agent's /metrics: where it is and that it moved once.
  const int agent_port = PortFromLog(agent.Stderr(), "serving /metrics on \\S+ \\(port ([0-9]+)\\)");
  ASSERT_GT(agent_port, 0);
  testing::PromText text = testing::ParsePromText(testing::HttpGet(agent_port, "/metrics"));
  auto info = text.Find("ringside_agent_shard_info", {{"node", node_}});
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].labels["shard"], absl::StrCat("shard-", shard_b_));
  EXPECT_EQ(info[0].labels["placed_by"], "leaf:" + leaf_b_);
  auto moves = text.Find("ringside_agent_shard_moves_total", {{"node", node_}});
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].value, 1);
  // What the agent keeps with the old shard is the collectives-only uploader: connected, and no
  // sample batch ever put in its buffer.
  const std::string old_target = absl::StrCat("127.0.0.1:", agg_[shard_a_].grpc);
  auto connected = text.Find("ringside_agent_upload_connected", {{"aggregator", old_target}});
  ASSERT_EQ(connected.size(), 1u);
  EXPECT_EQ(connected[0].value, 1);
  auto samples = text.Find("ringside_agent_upload_messages_enqueued_total",
                           {{"aggregator", old_target}, {"type", "samples"}});
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].value, 0);

  StopAll(agent);
}

// lldpd on the host starts only after the agent did: with no lldpd socket, waiting mends nothing,
// so the agent places itself by name at once (not after its 30 s --shard-placement-wait), says
// so, and moves to its leaf's shard as soon as LLDP names it.
TEST_F(LldpShardTest, AgentWithoutLldpdIsPlacedByNameAtOnceAndMovesWhenLldpNamesItsLeaf) {
  ASSERT_TRUE(lab_->Cable(host_, "h0", sw_a_, "swp1").ok());
  ASSERT_TRUE(lab_->StartLldpd(sw_a_, "swp*", leaf_a_).ok());
  StartAggregators();
  const absl::Time started = absl::Now();
  std::unique_ptr<testing::Process> agent = StartAgent({"--shard-placement-wait=30s"});
  ASSERT_TRUE(agent->WaitForStderr("shard placement: no LLDP (no lldpd socket at ",
                                   absl::Seconds(30)))
      << agent->Stderr();
  EXPECT_LT(absl::Now() - started, absl::Seconds(15)) << "the agent waited for an absent lldpd";
  ASSERT_TRUE(agent->WaitForStderr(
      absl::StrCat("shard shard-", by_name_, " of 2 (placed by node:", node_, ")"),
      absl::Seconds(10)))
      << agent->Stderr();
  ASSERT_TRUE(Eventually([&] { return NodeStale(agg_[by_name_].http, node_) == 0; },
                         absl::Seconds(20)));

  ASSERT_TRUE(lab_->StartLldpd(host_, "h0", node_).ok());
  ASSERT_TRUE(agent->WaitForStderr(absl::StrCat("shard moved from shard-", by_name_, " to shard-",
                                                shard_a_, " (placed by leaf:", leaf_a_, ")"),
                                   absl::Seconds(40)))
      << agent->Stderr();
  EXPECT_TRUE(Eventually([&] { return NodeStale(agg_[shard_a_].http, node_) == 0; },
                         absl::Seconds(20)));
  StopAll(*agent);
}

}  // namespace
}  // namespace ringside
