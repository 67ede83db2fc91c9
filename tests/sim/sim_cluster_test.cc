// ringside-sim end to end: short scenarios from tests/scenarios run on a simulated cluster of real
// processes (ringside-aggregator, one ringside-agent per node, job processes driving the real
// libringside_nccl.so), and the expected incidents come back from the aggregator with the right
// entity and cause, and nothing else is raised. Each run is bounded by its scenario (≤ 45 s).
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::sim {
namespace {

using ringside::testing::BinaryPath;

ringside::testing::RunResult RunScenario(const std::string& name, bool quiet = true) {
  return ringside::testing::Run(
      {BinaryPath("sim/ringside-sim"), "run", quiet ? "--quiet" : "--quiet=false",
       std::string(RINGSIDE_SOURCE_DIR) + "/tests/scenarios/" + name + ".yaml"},
      "", absl::Seconds(90));
}

TEST(SimClusterTest, PauseStormMakesTheRankOnItsRailAStraggler) {
  auto r = RunScenario("pause_storm", /*quiet=*/false);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("pause_storm device=mlx5_3 node=node-02       yes      right"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("straggler node=node-02 rank=7 ← pause_storm yes      right    right"),
            std::string::npos)
      << r.out;
  // The pause storm's blast radius names the job running behind it.
  EXPECT_TRUE(std::regex_search(r.out, std::regex("OPENED +#[0-9]+ +pause_storm[^\\n]*node=node-02"
                                                  "[\\s\\S]*affects job llm-pretrain-42")))
      << r.out;
  EXPECT_NE(r.out.find("false alarms: 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("=== pause_storm: PASS"), std::string::npos) << r.out;
}

TEST(SimClusterTest, HostStraggler) {
  auto r = RunScenario("straggler");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("straggler node=node-02 rank=5 ← host       yes      right    right"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("=== straggler: PASS"), std::string::npos) << r.out;
}

TEST(SimClusterTest, LinkFlap) {
  auto r = RunScenario("link_flap");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("link_flapping device=mlx5_1 node=node-02     yes      right"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("=== link_flap: PASS"), std::string::npos) << r.out;
}

// --seeds=2 --jobs=2: two runs of one small scenario at once, each in its own child process with
// its own ports and work folder, the second with the next seed; the report pools both.
TEST(SimClusterTest, SeedsRunAtOnceAndPoolInTheReport) {
  ringside::testing::TempDir dir;
  const std::string yaml = dir.path() + "/tiny.yaml";
  {
    std::ofstream out(yaml);
    out << "name: tiny\nseed: 5\nduration: 10s\n"
           "cluster: {nodes: 1, gpus: 2, nodes_per_leaf: 1, interval: 1s}\n"
           "job: {compute: 80ms, collective: 10ms}\n"
           "faults:\n  - {kind: link_down, node: node-01, device: mlx5_1, start: 3s, duration: 5s}\n";
  }
  const std::string report = dir.path() + "/report.md";
  auto r = ringside::testing::Run({BinaryPath("sim/ringside-sim"), "run", "--quiet", "--seeds=2",
                                   "--jobs=2", "--work-dir=" + dir.path() + "/work",
                                   "--report=" + report, yaml},
                                  "", absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("=== tiny seed 5: PASS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("=== tiny seed 6: PASS"), std::string::npos) << r.out;
  // Each run had its own work folder.
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/work/tiny-seed5/aggregator.log"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/work/tiny-seed6/aggregator.log"));
  const std::string md = ringside::testing::ReadFileOrEmpty(report);
  EXPECT_NE(md.find("| link_down | 2 | 2 | 2 | 2 | 0 | 1.00 (2/2) ≥ 0.34 | 1.00 (2/2) ≥ 0.34 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| tiny | 5 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| tiny | 6 |"), std::string::npos) << md;
  EXPECT_NE(md.find("2 of 2 runs passed."), std::string::npos) << md;
}

TEST(SimClusterTest, AgentCrashRaisesNothing) {
  auto r = RunScenario("agent_crash");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("none raised: right"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ringside::sim
