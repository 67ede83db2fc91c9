// `ringside import-trace --analyze` on the published, labelled straggler traces
// (shared/data/straggler-analysis/README.md): in AR one worker (dp 0, stage 0, global rank 0) was
// slowed, and only it may be blamed; in ST the last pipeline stage is slow as a whole, and no
// single worker may be blamed.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

std::set<std::string> StragglerRanks(const std::string& out) {
  std::set<std::string> ranks;
  std::regex re("\\{\"kind\":\"straggler\"[^\\n]*?\"rank\":\"([0-9]+)\"");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it) {
    ranks.insert((*it)[1].str());
  }
  return ranks;
}

testing::RunResult Analyze(const std::string& trace) {
  return testing::Run({testing::BinaryPath("daemon/ringside"), "import-trace",
                       "--format=straggler-analysis", "--analyze", "-o", "json",
                       testing::SharedDir() + "/data/straggler-analysis/" + trace},
                      "", absl::Seconds(120));
}

TEST(AnalyzeTraceTest, TraceArFlagsRankZeroAndNoOtherRank) {
  testing::RunResult r = Analyze("trace-AR.csv.gz");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.front(), '[');
  EXPECT_EQ(StragglerRanks(r.out), std::set<std::string>{"0"}) << r.out;
  // The entity names job, rank and node; the evidence carries score and margin.
  EXPECT_NE(r.out.find("\"job\":\"trace-AR\""), std::string::npos);
  EXPECT_NE(r.out.find("\"node\":\"rank0-dp0-stage0\""), std::string::npos);
  EXPECT_NE(r.out.find("\"margin_ms\":"), std::string::npos);
  EXPECT_NE(r.out.find("\"opened\":\""), std::string::npos);
}

TEST(AnalyzeTraceTest, TraceStFlagsNoRank) {
  testing::RunResult r = Analyze("trace-ST.csv.gz");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(StragglerRanks(r.out), std::set<std::string>{}) << r.out;
  EXPECT_EQ(r.out, "[]\n");
}

}  // namespace
}  // namespace ringside
