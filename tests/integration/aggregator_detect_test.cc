// The detectors running inside ringside-aggregator on what a real agent sends: a port of a
// generated tree taken down and up twice opens link_down, then link_flapping, in the aggregator's
// log, and the incidents are kept in <state-dir>/incidents.db.
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sim/sysfs_tree.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using testing::BinaryPath;

// The gRPC port the aggregator logged, or "" when it did not start.
std::string IngestPort(testing::Process& agg) {
  if (!agg.WaitForStderr("ingest (gRPC) listening", absl::Seconds(30))) return "";
  std::smatch m;
  const std::string err = agg.Stderr();
  if (!std::regex_search(err, m,
                         std::regex("ingest \\(gRPC\\) listening on \\S+ \\(port ([0-9]+)\\)"))) {
    return "";
  }
  return m[1].str();
}

// A real agent on `tree` streaming every 100 ms, sysfs only, to the aggregator on 127.0.0.1 at
// each of `ports` (two: both replicas of a shard).
std::unique_ptr<testing::Process> StartAgent(const std::string& tree, const std::string& node,
                                             const std::vector<std::string>& ports,
                                             const std::string& cwd) {
  std::string targets;
  for (const std::string& p : ports) {
    absl::StrAppend(&targets, targets.empty() ? "" : ",", "127.0.0.1:", p);
  }
  return std::make_unique<testing::Process>(
      std::vector<std::string>{BinaryPath("daemon/ringside-agent"), "--sysfs-root=" + tree,
                               "--node-name=" + node, "--aggregator=" + targets,
                               "--interval=100ms", "--listen=", "--nvml-library=",
                               "--ethtool-source=off", "--link-events=false",
                               "--collectives-socket=", "--upload-backoff-max=500ms"},
      cwd);
}

// A replica of the shard: aggregator on loopback with a fixed gRPC port (0: any) and an HTTP port.
struct Replica {
  std::unique_ptr<testing::Process> proc;
  std::string grpc;
  int http = 0;
};
Replica StartReplica(const std::string& state, const std::string& cwd,
                     const std::string& grpc_port = "0", const std::string& peers = "") {
  Replica r;
  std::vector<std::string> argv = {BinaryPath("daemon/ringside-aggregator"),
                                   "--listen=127.0.0.1:" + grpc_port, "--http-listen=127.0.0.1:0",
                                   "--state-dir=" + state};
  if (!peers.empty()) argv.push_back("--peers=" + peers);
  r.proc = std::make_unique<testing::Process>(argv, cwd);
  r.grpc = IngestPort(*r.proc);
  if (!r.proc->WaitForStderr("HTTP (/metrics", absl::Seconds(20))) return r;
  std::smatch m;
  const std::string err = r.proc->Stderr();
  if (std::regex_search(err, m,
                        std::regex("HTTP \\S+ \\S+ \\S+ listening on \\S+ \\(port ([0-9]+)\\)"))) {
    r.http = std::stoi(m[1].str());
  }
  return r;
}

// kind → key of every incident a replica holds (open or resolved).
std::map<std::string, std::set<std::string>> KeysByKind(int http_port) {
  std::map<std::string, std::set<std::string>> out;
  const std::string body = testing::HttpGet(http_port, "/api/v1/incidents?limit=100");
  std::regex one("\"id\":[0-9]+,\"key\":\"([0-9a-f]{16})\",\"kind\":\"([a-z_]+)\"");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), one); it != std::sregex_iterator();
       ++it) {
    out[(*it)[2].str()].insert((*it)[1].str());
  }
  return out;
}

// Two replicas of one shard (issue #14): the agent streams everything to both. Replica B is down
// while the port flaps and comes back later with an empty state dir: it gets what it missed from
// the agent's buffer for it, raises the same incidents as A, with the same keys (so Alertmanager
// would see one alert), and A was never held up by B being down.
TEST(AggregatorDetectTest, ReplicasOfAShardRaiseTheSameIncidentsWithTheSameKeys) {
  testing::TempDir dir;
  testing::TempDir tree;
  sim::SysfsTreeWriter w(tree.path());
  ASSERT_TRUE(w.AddHca(sim::HcaSpec{}).ok());
  Replica a = StartReplica(dir.path() + "/a", dir.path());
  ASSERT_FALSE(a.grpc.empty()) << a.proc->Stderr();
  ASSERT_GT(a.http, 0) << a.proc->Stderr();
  // B: started once to learn a free port, then killed before the agent starts.
  Replica b = StartReplica(dir.path() + "/b-first", dir.path());
  ASSERT_FALSE(b.grpc.empty()) << b.proc->Stderr();
  const std::string b_port = b.grpc;
  b.proc->Signal(SIGKILL);
  b.proc->Wait(absl::Seconds(10));

  auto agent = StartAgent(tree.path(), "flappy", {a.grpc, b_port}, dir.path());
  absl::SleepFor(absl::Seconds(1));
  auto flap = [&] {
    ASSERT_TRUE(w.SetPortState("mlx5_0", 1, 1, 2).ok());
    absl::SleepFor(absl::Milliseconds(500));
    ASSERT_TRUE(w.SetPortState("mlx5_0", 1, 4, 5).ok());
    absl::SleepFor(absl::Milliseconds(500));
  };
  flap();
  flap();
  ASSERT_TRUE(a.proc->WaitForStderr("opened: link_flapping", absl::Seconds(20)))
      << a.proc->Stderr() << agent->Stderr();

  // B comes back on its port with nothing: the agent resends what B never acknowledged.
  b = StartReplica(dir.path() + "/b", dir.path(), b_port);
  ASSERT_EQ(b.grpc, b_port) << b.proc->Stderr();
  ASSERT_TRUE(b.proc->WaitForStderr("opened: link_flapping", absl::Seconds(30)))
      << b.proc->Stderr() << agent->Stderr();
  std::map<std::string, std::set<std::string>> ka, kb;
  // Compare once both have settled on the same set (the flapping incident may still be updating).
  for (int i = 0; i < 50; ++i) {
    ka = KeysByKind(a.http);
    kb = KeysByKind(b.http);
    if (ka == kb && ka.count("link_flapping")) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_TRUE(ka.count("link_down")) << testing::HttpGet(a.http, "/api/v1/incidents");
  ASSERT_TRUE(ka.count("link_flapping")) << testing::HttpGet(a.http, "/api/v1/incidents");
  EXPECT_EQ(ka, kb) << "A: " << testing::HttpGet(a.http, "/api/v1/incidents")
                    << "\nB: " << testing::HttpGet(b.http, "/api/v1/incidents");

  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(20)), 0) << agent->Stderr();
  for (Replica* r : {&a, &b}) {
    r->proc->Signal(SIGTERM);
    EXPECT_EQ(r->proc->Wait(absl::Seconds(20)), 0) << r->proc->Stderr();
  }
}

// A replica replaced with an empty state dir while a link is down (a rolling upgrade that lost its
// volume): the agent has nothing left to resend it, so only its peer knows the incident. With
// --peers it takes the open incident over before alerting — same key, so the alert it sends is the
// one Alertmanager already has — and resolves it when the link comes back.
TEST(AggregatorDetectTest, AReplacedReplicaTakesOverItsPeersOpenIncidents) {
  testing::TempDir dir;
  testing::TempDir tree;
  sim::SysfsTreeWriter w(tree.path());
  ASSERT_TRUE(w.AddHca(sim::HcaSpec{}).ok());
  Replica a = StartReplica(dir.path() + "/a", dir.path());
  Replica b = StartReplica(dir.path() + "/b-old", dir.path());
  ASSERT_GT(a.http, 0) << a.proc->Stderr();
  ASSERT_GT(b.http, 0) << b.proc->Stderr();
  const std::string b_port = b.grpc;
  auto agent = StartAgent(tree.path(), "downy", {a.grpc, b_port}, dir.path());
  absl::SleepFor(absl::Seconds(1));
  ASSERT_TRUE(w.SetPortState("mlx5_0", 1, 1, 2).ok());  // down, and it stays down
  ASSERT_TRUE(a.proc->WaitForStderr("opened: link_down", absl::Seconds(20))) << a.proc->Stderr();
  ASSERT_TRUE(b.proc->WaitForStderr("opened: link_down", absl::Seconds(20))) << b.proc->Stderr();
  const std::map<std::string, std::set<std::string>> before = KeysByKind(a.http);
  ASSERT_EQ(before.count("link_down"), 1u);
  absl::SleepFor(absl::Milliseconds(500));  // the agent's buffer for B is acknowledged

  b.proc->Signal(SIGKILL);
  b.proc->Wait(absl::Seconds(10));
  b = StartReplica(dir.path() + "/b-new", dir.path(), b_port, "127.0.0.1:" + a.grpc);
  ASSERT_EQ(b.grpc, b_port) << b.proc->Stderr();
  EXPECT_TRUE(absl::StrContains(b.proc->Stderr(), "took over 1 open incidents from the peers"))
      << b.proc->Stderr();
  const std::string open_b = testing::HttpGet(b.http, "/api/v1/incidents?open=1");
  EXPECT_TRUE(absl::StrContains(open_b, *before.at("link_down").begin())) << open_b;

  ASSERT_TRUE(w.SetPortState("mlx5_0", 1, 4, 5).ok());  // up again
  ASSERT_TRUE(a.proc->WaitForStderr("resolved: link_down", absl::Seconds(20))) << a.proc->Stderr();
  ASSERT_TRUE(b.proc->WaitForStderr("resolved: link_down", absl::Seconds(20))) << b.proc->Stderr();
  EXPECT_EQ(KeysByKind(b.http), before) << testing::HttpGet(b.http, "/api/v1/incidents");
  EXPECT_EQ(testing::HttpGet(b.http, "/api/v1/incidents?open=1"), "[]\n");

  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(20)), 0) << agent->Stderr();
  for (Replica* r : {&a, &b}) {
    r->proc->Signal(SIGTERM);
    EXPECT_EQ(r->proc->Wait(absl::Seconds(20)), 0) << r->proc->Stderr();
  }
}

TEST(AggregatorDetectTest, FlappingPortOpensLinkDownThenLinkFlapping) {
  testing::TempDir dir;
  testing::TempDir tree;
  sim::SysfsTreeWriter w(tree.path());
  ASSERT_TRUE(w.AddHca(sim::HcaSpec{}).ok());
  testing::Process agg({BinaryPath("daemon/ringside-aggregator"), "--listen=127.0.0.1:0",
                        "--http-listen=", "--state-dir=" + dir.path() + "/state"},
                       dir.path());
  const std::string port = IngestPort(agg);
  ASSERT_FALSE(port.empty()) << agg.Stderr();
  std::unique_ptr<testing::Process> agent = StartAgent(tree.path(), "flappy", {port}, dir.path());
  absl::SleepFor(absl::Seconds(1));
  auto flap = [&] {
    ASSERT_TRUE(w.SetPortState("mlx5_0", 1, 1, 2).ok());
    absl::SleepFor(absl::Milliseconds(500));
    ASSERT_TRUE(w.SetPortState("mlx5_0", 1, 4, 5).ok());
    absl::SleepFor(absl::Milliseconds(500));
  };
  flap();
  ASSERT_TRUE(agg.WaitForStderr("opened: link_down", absl::Seconds(20))) << agg.Stderr();
  flap();
  ASSERT_TRUE(agg.WaitForStderr("opened: link_flapping", absl::Seconds(20))) << agg.Stderr();
  const std::string log = agg.Stderr();
  EXPECT_NE(log.find("device=mlx5_0"), std::string::npos) << log;
  EXPECT_NE(log.find("node=flappy"), std::string::npos) << log;
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(20)), 0);
  agg.Signal(SIGTERM);
  EXPECT_EQ(agg.Wait(absl::Seconds(20)), 0) << agg.Stderr();
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/state/incidents.db"));
}

// A RoCE port going down is seen twice by the agent: the RDMA port's state and its netdev's
// operstate and carrier count. The agent's info records map the netdev to the RDMA port, so the
// aggregator raises one link_down for mlx5_0 port 1, not a second one for eth0.
TEST(AggregatorDetectTest, RoceNetdevAndItsRdmaPortAreOneLink) {
  testing::TempDir dir;
  testing::TempDir tree;
  sim::SysfsTreeWriter w(tree.path());
  sim::HcaSpec roce;
  roce.link_layer = "Ethernet";
  roce.rate = "200 Gb/sec (4X HDR)";
  roce.netdev = "eth0";
  ASSERT_TRUE(w.AddHca(roce).ok());
  testing::Process agg({BinaryPath("daemon/ringside-aggregator"), "--listen=127.0.0.1:0",
                        "--http-listen="},
                       dir.path());
  const std::string port = IngestPort(agg);
  ASSERT_FALSE(port.empty()) << agg.Stderr();
  std::unique_ptr<testing::Process> agent = StartAgent(tree.path(), "roce", {port}, dir.path());
  absl::SleepFor(absl::Seconds(1));
  ASSERT_TRUE(w.SetPortState("mlx5_0", 1, 1, 3).ok());
  ASSERT_TRUE(w.SetNetdevAttr("eth0", "operstate", "down").ok());
  ASSERT_TRUE(w.SetNetdevAttr("eth0", "carrier_down_count", "1").ok());
  ASSERT_TRUE(agg.WaitForStderr("opened: link_down", absl::Seconds(20))) << agg.Stderr();
  absl::SleepFor(absl::Seconds(1));  // both series sampled down several times
  const std::string log = agg.Stderr();
  size_t opened = 0;
  for (size_t p = 0; (p = log.find("opened: link_down", p)) != std::string::npos; ++p) ++opened;
  EXPECT_EQ(opened, 1u) << log;
  EXPECT_NE(log.find("device=mlx5_0"), std::string::npos) << log;
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(20)), 0);
  agg.Signal(SIGTERM);
  EXPECT_EQ(agg.Wait(absl::Seconds(20)), 0) << agg.Stderr();
}

}  // namespace
}  // namespace ringside
