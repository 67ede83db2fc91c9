// ringside-shard-capacity-bench against a real aggregator, small: a run that offers its load is
// reported with its admission, lag and reconnect figures and exits 0; a run whose load generator
// cannot offer the rate asked for says "NOT A VALID RUN" and exits 1 instead of printing a rate it
// did not offer.
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"

namespace ringside::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ShardCapacityBenchTest : public ::testing::Test {
 protected:
  static testing::RunResult RunBench(std::vector<std::string> flags) {
    std::vector<std::string> argv = {testing::BinaryPath("bench/ringside-shard-capacity-bench"),
                                     absl::StrCat("--aggregator=",
                                                  testing::BinaryPath("daemon/ringside-aggregator"))};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return testing::Run(argv, "", absl::Seconds(90));
  }
};

TEST_F(ShardCapacityBenchTest, OfferedLoadIsReportedWithAdmissionAndReconnect) {
  const testing::RunResult r =
      RunBench({"--agents=8", "--series=120", "--rate=4", "--warmup=1s", "--duration=2s",
                "--reconnect"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("admission:  8 of 8 streams admitted (Hello, HelloAck, 120 "
                               "definitions, first batch acked)"));
  EXPECT_THAT(r.out, HasSubstr("failed 0; series gauge 960"));
  // What growing its memory cost the aggregator, at the price this machine charges a page.
  EXPECT_THAT(r.out, HasSubstr("this machine: a first write to a fresh 4 KiB page costs "));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("minor faults \\(about [0-9.]+ s of CPU at this "
                                              "machine's [0-9.]+ us a page\\)"));
  // And the admission's own CPU without that price, to compare hours whose price differs.
  EXPECT_THAT(r.out, ::testing::ContainsRegex("aggregator CPU less those faults: [0-9.]+ s "
                                              "\\([0-9.]+ ms a stream\\)"));
  EXPECT_THAT(r.out, HasSubstr("% of the 0.004 M/s target"));
  EXPECT_THAT(r.out, HasSubstr("behind schedule p50"));
  EXPECT_THAT(r.out, HasSubstr("0 batches sent and not acked"));
  EXPECT_THAT(r.out, HasSubstr("reconnect:  8 of 8 streams admitted"));
  EXPECT_THAT(r.out, Not(HasSubstr("NOT A VALID RUN")));
}

TEST_F(ShardCapacityBenchTest, RateNotOfferedIsRefused) {
  // 8 agents at 5,000 batches a second each from one pacing thread that wakes at most every
  // millisecond and sends an agent's next batch only once its previous write is done: far below
  // the 40,000 batches a second asked for, on any machine.
  const testing::RunResult r = RunBench({"--agents=8", "--series=60", "--rate=5000",
                                         "--pacers=1", "--warmup=1s", "--duration=2s"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("NOT A VALID RUN: offered "));
  EXPECT_THAT(r.out, HasSubstr("of 2.400 M samples/s"));
}

TEST_F(ShardCapacityBenchTest, FailedStreamsAreCountedByStatus) {
  // The aggregator admits 4 nodes (its last --max-nodes wins over the bench's); the other 4
  // streams are refused with one status, printed once with its count.
  const std::string dir = ::testing::TempDir();
  const std::string wrapper = absl::StrCat(dir, "/aggregator_max4.sh");
  {
    std::ofstream out(wrapper);
    out << "#!/bin/sh\nexec " << testing::BinaryPath("daemon/ringside-aggregator")
        << " \"$@\" --max-nodes=4\n";
  }
  ASSERT_EQ(chmod(wrapper.c_str(), 0755), 0);
  std::vector<std::string> argv = {testing::BinaryPath("bench/ringside-shard-capacity-bench"),
                                   absl::StrCat("--aggregator=", wrapper), "--agents=8",
                                   "--series=60", "--rate=4", "--warmup=1s", "--duration=1s"};
  const testing::RunResult r = testing::Run(argv, "", absl::Seconds(90));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("admission:  4 of 8 streams admitted"));
  EXPECT_THAT(r.out, HasSubstr("NOT A VALID RUN: 4 of 8 streams admitted; streams failed: 4 (4 x "
                               "RESOURCE_EXHAUSTED: node <node> refused: node limit reached"));
}

}  // namespace
}  // namespace ringside::bench
