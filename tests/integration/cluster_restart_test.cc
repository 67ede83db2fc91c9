// Issue #4 end to end on this machine: one ringside-aggregator and three ringside-agents, each
// agent in a network namespace of its own (unshare -n) so the link events the test makes there
// are that agent's alone; gRPC goes over a unix socket (the namespaces share no loopback).
// Collective records come from the real NCCL plugin (the test driver dlopens it) through each
// agent's collective socket. The aggregator is killed (SIGKILL) and restarted after 10 s on the
// same --state-dir: afterwards every collective record and link event is in its journal exactly
// once, and the total of a 32-bit counter that wrapped during the gap equals its difference.
#include <signal.h>

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "sim/sysfs_tree.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using testing::BinaryPath;

constexpr int kAgents = 3;
constexpr int kCollectivesPerRun = 60;  // the driver sends this many + 1

int Sh(const std::string& cmd) {
  return testing::Run({"/bin/sh", "-c", cmd}, "", absl::Seconds(30)).exit_code;
}

class ClusterRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Sh("unshare -n true") != 0) GTEST_SKIP() << "cannot create network namespaces here";
    sock_ = dir_.path() + "/agg.sock";
  }

  void StartAggregator() {
    agg_ = std::make_unique<testing::Process>(
        std::vector<std::string>{BinaryPath("daemon/ringside-aggregator"), "--listen=unix:" + sock_,
                                 "--http-listen=127.0.0.1:0", "--allow-insecure",
                                 "--state-dir=" + dir_.path() + "/state"},
        dir_.path());
    ASSERT_TRUE(agg_->WaitForStderr("HTTP", absl::Seconds(30))) << agg_->Stderr();
    absl::SleepFor(absl::Milliseconds(100));
    std::smatch m;
    std::string err = agg_->Stderr();
    ASSERT_TRUE(std::regex_search(err, m, std::regex("HTTP \\S+ \\S+ \\S+ listening on \\S+ \\(port ([0-9]+)\\)")))
        << err;
    http_ = std::stoi(m[1].str());
  }

  void StartAgent(int n) {
    sim::SysfsTreeWriter& w = *trees_[n];
    agents_[n] = std::make_unique<testing::Process>(
        std::vector<std::string>{
            "/usr/bin/unshare", "-n", BinaryPath("daemon/ringside-agent"),
            "--sysfs-root=" + w.root(), absl::StrCat("--node-name=node-", n),
            "--aggregator=unix:" + sock_, "--allow-insecure", "--interval=200ms", "--listen=",
            "--nvml-library=", "--ethtool-source=off", "--upload-backoff-max=500ms",
            absl::StrCat("--collectives-socket=", dir_.path(), "/coll-", n, ".sock")},
        dir_.path());
    ASSERT_TRUE(agents_[n]->WaitForStderr("collective records on", absl::Seconds(30)))
        << agents_[n]->Stderr();
  }

  // Collective records through the real plugin into agent n's socket, under job `job`.
  void RunPlugin(int n, const std::string& job) {
    testing::RunResult r = testing::Run(
        {NCCL_PLUGIN_DRIVER, absl::StrCat("--plugin=", NCCL_PLUGIN_PATH), "--version=5",
         "--mode=count", absl::StrCat("--collectives=", kCollectivesPerRun),
         absl::StrCat("--socket=", dir_.path(), "/coll-", n, ".sock"),
         "--env=RINGSIDE_JOB_ID=" + job},
        "", absl::Seconds(60));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  // A link transition inside agent n's namespace.
  void Link(int n, const std::string& what) {
    ASSERT_EQ(Sh(absl::StrCat("nsenter -t ", agents_[n]->pid(), " -n ip link ", what)), 0) << what;
    absl::SleepFor(absl::Milliseconds(50));
  }

  void Count(int n, uint32_t oos) {
    ASSERT_TRUE(trees_[n]->SetHwCounter("mlx5_0", 1, "out_of_sequence", oos).ok());
  }

  std::string Get(const std::string& path) { return testing::HttpGet(http_, path); }

  testing::TempDir dir_;
  std::string sock_;
  int http_ = 0;
  std::unique_ptr<testing::Process> agg_;
  std::unique_ptr<testing::Process> agents_[kAgents];
  std::unique_ptr<testing::TempDir> tree_dirs_[kAgents];
  std::unique_ptr<sim::SysfsTreeWriter> trees_[kAgents];
};

TEST_F(ClusterRestartTest, KilledAggregatorLosesAndRepeatsNothing) {
  for (int n = 0; n < kAgents; ++n) {
    tree_dirs_[n] = std::make_unique<testing::TempDir>();
    trees_[n] = std::make_unique<sim::SysfsTreeWriter>(tree_dirs_[n]->path());
    ASSERT_TRUE(trees_[n]->AddHca(sim::HcaSpec{}).ok());
  }
  // A 32-bit counter that will wrap during the outage.
  const uint32_t start = 4294967295u - 5000;
  for (int n = 0; n < kAgents; ++n) Count(n, start);
  StartAggregator();
  for (int n = 0; n < kAgents; ++n) StartAgent(n);
  // Everyone connected.
  for (int i = 0; i < 300; ++i) {
    std::string nodes = Get("/api/v1/nodes");
    if (nodes.find("node-2") != std::string::npos && nodes.find("node-0") != std::string::npos &&
        nodes.find("node-1") != std::string::npos) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_NE(Get("/api/v1/nodes").find("node-2"), std::string::npos) << agents_[2]->Stderr();

  // Before the outage: records, a new interface taken up, down and up (3 transitions).
  for (int n = 0; n < kAgents; ++n) {
    RunPlugin(n, "before");
    Link(n, "add rsd0 type veth peer name rsd1");  // no kernel modules here: veth, not dummy
    Link(n, "set rsd1 up");
    Link(n, "set rsd0 up");
    Link(n, "set rsd0 down");
    Link(n, "set rsd0 up");
    Count(n, start + 2000);
  }
  absl::SleepFor(absl::Seconds(1));

  // The outage: SIGKILL, then 10 s of records, transitions and counting (through the wrap).
  agg_->Signal(SIGKILL);
  ASSERT_EQ(agg_->Wait(absl::Seconds(10)), 128 + SIGKILL);
  const absl::Time outage = absl::Now();
  for (int n = 0; n < kAgents; ++n) {
    RunPlugin(n, "during");
    Link(n, "set rsd0 down");
    Link(n, "set rsd0 up");
  }
  for (int step = 1; step <= 10; ++step) {
    for (int n = 0; n < kAgents; ++n) Count(n, start + 2000 + static_cast<uint32_t>(step) * 1000);
    absl::SleepFor(absl::Milliseconds(300));
  }
  absl::SleepFor(outage + absl::Seconds(10) - absl::Now());
  StartAggregator();

  // After: everything the agents held is resent; wait until each node's counter is current.
  const uint32_t final_value = start + 2000 + 10 * 1000;  // wrapped past 2^32
  std::map<int, std::string> series;
  for (int i = 0; i < 300; ++i) {
    bool all = true;
    for (int n = 0; n < kAgents; ++n) {
      series[n] = Get(absl::StrCat("/api/v1/series?node=node-", n));
      all &= series[n].find(absl::StrCat("\"last_raw\":", final_value)) != std::string::npos;
    }
    if (all) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  for (int n = 0; n < kAgents; ++n) {
    // The out_of_sequence series: its total since the first sample this aggregator took equals
    // the counter's difference, width-aware across the wrap.
    std::smatch m;
    std::regex re(
        "\"counter\":\"out_of_sequence\"[^}]*?\"width\":64,\"term_width\":32[^}]*?\"last_raw\":([0-9]+)[^}]*?"
        "\"first_raw\":([0-9]+),\"first_time_unix_nanos\":([0-9]+),\"total\":([0-9]+)");
    ASSERT_TRUE(std::regex_search(series[n], m, re)) << series[n].substr(0, 2000);
    const uint64_t last = std::stoull(m[1].str());
    const uint64_t first = std::stoull(m[2].str());
    const uint64_t total = std::stoull(m[4].str());
    EXPECT_EQ(last, final_value);
    EXPECT_EQ(total, (last - first) & 0xffffffffu) << "node " << n;
    // The resent batches reach back into the outage: the total spans the gap.
    EXPECT_LT(std::stoll(m[3].str()), absl::ToUnixNanos(outage + absl::Seconds(10)));
    EXPECT_GT(total, 0u);
  }
  // Let the last acks land, then stop everything and read the journal.
  absl::SleepFor(absl::Seconds(2));
  for (int n = 0; n < kAgents; ++n) {
    agents_[n]->Signal(SIGTERM);
    EXPECT_EQ(agents_[n]->Wait(absl::Seconds(20)), 0) << agents_[n]->Stderr();
  }
  agg_->Signal(SIGTERM);
  EXPECT_EQ(agg_->Wait(absl::Seconds(20)), 0) << agg_->Stderr();
  testing::RunResult dump =
      testing::Run({BinaryPath("daemon/ringside-aggregator"), "--dump-journal",
                    "--state-dir=" + dir_.path() + "/state"},
                   "", absl::Seconds(60));
  ASSERT_EQ(dump.exit_code, 0) << dump.err;

  std::map<std::string, std::multiset<std::string>> records;  // node → job/seq
  std::map<std::string, int> events;                          // node → rsd0 transitions
  std::map<std::string, std::vector<std::string>> directions;
  std::regex node_re("\"node\":\"(node-[0-9])\"");
  std::regex rec_re("\"job_id\":\"([a-z]+)\"[^\\n]*?\"seq\":\"?([0-9]+)\"?");
  std::regex ev_re("\"device\":\"rsd0\"[^\\n]*?\"to\":\"LINK_STATE_(UP|DOWN)\"");
  for (absl::string_view line : absl::StrSplit(dump.out, '\n')) {
    std::string l(line);
    std::smatch node, m;
    if (!std::regex_search(l, node, node_re)) continue;
    if (l.find("\"kind\":\"collective\"") != std::string::npos) {
      std::string rec = l.substr(l.find("\"record\":"));
      ASSERT_TRUE(std::regex_search(rec, m, rec_re)) << l;
      records[node[1].str()].insert(m[1].str() + "/" + m[2].str());
    } else if (l.find("\"kind\":\"link_event\"") != std::string::npos &&
               std::regex_search(l, m, ev_re)) {
      ++events[node[1].str()];
      directions[node[1].str()].push_back(m[1].str());
    }
  }
  for (int n = 0; n < kAgents; ++n) {
    const std::string node = absl::StrCat("node-", n);
    const std::multiset<std::string>& r = records[node];
    EXPECT_EQ(r.size(), 2u * (kCollectivesPerRun + 1)) << node;
    for (const std::string& key : r) EXPECT_EQ(r.count(key), 1u) << node << " " << key;
    EXPECT_EQ(events[node], 5) << node;
    EXPECT_EQ(directions[node],
              (std::vector<std::string>{"UP", "DOWN", "UP", "DOWN", "UP"}))
        << node;
  }
}

}  // namespace
}  // namespace ringside
