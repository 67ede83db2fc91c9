// ringside-sim end to end: short scenarios from tests/scenarios run on a simulated cluster of real
// processes (ringside-aggregator, one ringside-agent per node, job processes driving the real
// libringside_nccl.so), and the expected incidents come back from the aggregator with the right
// entity and cause, and nothing else is raised. Each run is bounded by its scenario (≤ 45 s).
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"

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

TEST(SimClusterTest, AgentCrashRaisesNothing) {
  auto r = RunScenario("agent_crash");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("none raised: right"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ringside::sim
