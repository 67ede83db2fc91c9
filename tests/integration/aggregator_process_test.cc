// The ringside-aggregator binary as a user runs it: the ports it logs, kill -9 and restart on the
// same --state-dir without losing or repeating a record, --dump-journal, the plaintext policy, and
// a clean SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "tests/aggregator/ingest/ingest_test_util.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using testing::BinaryPath;

struct Ports {
  int grpc = 0;
  int http = 0;
};

class AggregatorProcessTest : public ::testing::Test {
 protected:
  // Starts the aggregator on loopback ephemeral ports and parses them from its log.
  Ports StartAggregator(std::unique_ptr<testing::Process>& p, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {BinaryPath("daemon/ringside-aggregator"),
                                     "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
                                     "--state-dir=" + state_.path()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    p = std::make_unique<testing::Process>(argv, out_.path());
    Ports ports;
    if (!p->WaitForStderr("HTTP (/metrics", absl::Seconds(20))) {
      ADD_FAILURE() << "aggregator did not start: " << p->Stderr();
      return ports;
    }
    const std::string err = p->Stderr();
    std::smatch m;
    if (std::regex_search(err, m,
                          std::regex("ingest \\(gRPC\\) listening on \\S+ \\(port ([0-9]+)\\)"))) {
      ports.grpc = std::stoi(m[1].str());
    }
    if (std::regex_search(
            err, m, std::regex("HTTP \\S+ \\S+ \\S+ listening on \\S+ \\(port ([0-9]+)\\)"))) {
      ports.http = std::stoi(m[1].str());
    }
    EXPECT_GT(ports.grpc, 0) << err;
    EXPECT_GT(ports.http, 0) << err;
    return ports;
  }

  testing::TempDir state_;
  testing::TempDir out_;
};

TEST_F(AggregatorProcessTest, KillAndRestartKeepsEveryRecordOnce) {
  std::unique_ptr<testing::Process> agg;
  Ports ports = StartAggregator(agg);
  ASSERT_GT(ports.grpc, 0);
  {
    testing::RawAgent agent(ports.grpc);
    ASSERT_TRUE(agent.Send(testing::HelloMsg("gpu-1", 5)));
    ASSERT_TRUE(agent.Read().has_value());
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      ASSERT_TRUE(agent.Send(testing::CollectivesMsg(seq, seq * 10, 2)));
    }
    ASSERT_TRUE(agent.Send(testing::LinkEventsMsg(4, 1)));
    ASSERT_TRUE(agent.WaitAck(4));
  }
  int status = 0;
  EXPECT_EQ(testing::HttpGet(ports.http, "/healthz", &status), "ok\n");
  agg->Signal(SIGKILL);
  EXPECT_EQ(agg->Wait(absl::Seconds(10)), 128 + SIGKILL);

  ports = StartAggregator(agg);
  ASSERT_GT(ports.grpc, 0);
  EXPECT_TRUE(absl::StrContains(agg->Stderr(), "restored 1 watermarks and 4 payloads"))
      << agg->Stderr();
  {
    testing::RawAgent agent(ports.grpc);
    ASSERT_TRUE(agent.Send(testing::HelloMsg("gpu-1", 5)));
    auto ack = agent.Read();
    ASSERT_TRUE(ack.has_value() && ack->has_hello_ack());
    EXPECT_EQ(ack->hello_ack().acked_seq(), 4u);
    // The agent resends what it did not see acked, and more.
    ASSERT_TRUE(agent.Send(testing::CollectivesMsg(3, 30, 2)));
    ASSERT_TRUE(agent.Send(testing::CollectivesMsg(5, 50, 2)));
    ASSERT_TRUE(agent.WaitAck(5));
  }
  agg->Signal(SIGTERM);
  EXPECT_EQ(agg->Wait(absl::Seconds(20)), 0);
  EXPECT_TRUE(absl::StrContains(agg->Stderr(), "stopped"));

  testing::RunResult dump = testing::Run(
      {BinaryPath("daemon/ringside-aggregator"), "--dump-journal", "--state-dir=" + state_.path()});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  int collectives = 0;
  int link_events = 0;
  std::multiset<std::string> ids;
  for (absl::string_view line : absl::StrSplit(dump.out, '\n', absl::SkipEmpty())) {
    if (absl::StrContains(line, "\"kind\":\"collective\"")) {
      ++collectives;
      std::smatch m;
      std::string l(line);
      ASSERT_TRUE(std::regex_search(l, m, std::regex("\"seq\":\"([0-9]+)\"")));  // proto JSON
      ids.insert(m[1].str());
    }
    if (absl::StrContains(line, "\"kind\":\"link_event\"")) ++link_events;
  }
  EXPECT_EQ(collectives, 8);
  EXPECT_EQ(link_events, 1);
  EXPECT_EQ(ids, (std::multiset<std::string>{"10", "11", "20", "21", "30", "31", "50", "51"}));
  EXPECT_TRUE(absl::StrContains(dump.out,
                                "{\"kind\":\"watermark\",\"node\":\"gpu-1\","
                                "\"agent_epoch\":\"5\",\"seq\":5}"))
      << dump.out;
}

TEST_F(AggregatorProcessTest, PlaintextOffLoopbackIsRefusedWithoutAllowInsecure) {
  testing::RunResult r = testing::Run(
      {BinaryPath("daemon/ringside-aggregator"), "--listen=0.0.0.0:0", "--http-listen="}, "",
      absl::Seconds(20));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "refusing plaintext")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--allow-insecure")) << r.err;
}

TEST_F(AggregatorProcessTest, SecondAggregatorOnTheSameStateDirIsRefused) {
  std::unique_ptr<testing::Process> agg;
  ASSERT_GT(StartAggregator(agg).grpc, 0);
  testing::RunResult r =
      testing::Run({BinaryPath("daemon/ringside-aggregator"), "--listen=127.0.0.1:0",
                    "--http-listen=", "--state-dir=" + state_.path()},
                   "", absl::Seconds(20));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "another ringside-aggregator")) << r.err;
}

}  // namespace
}  // namespace ringside
