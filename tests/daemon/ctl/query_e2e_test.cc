// `ringside` against a real ringside-aggregator process: a raw agent (ingest_test_util.h) reports
// a port that goes down and up twice, the aggregator's detectors open link_down (resolved at once)
// and link_flapping, and every query subcommand shows them; `ringside watch`, started before the
// flapping, prints each change live and reconnects when the aggregator restarts on its port.
#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/aggregator/ingest/ingest_test_util.h"
#include "tests/testing/eventually.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

using testing::RunResult;

std::string Ringside() { return testing::BinaryPath("daemon/ringside"); }

// This file waits 20s by default, polling every 20 ms.
template <typename Pred>
bool Eventually(Pred pred, absl::Duration timeout = absl::Seconds(20)) {
  return testing::Eventually(pred, timeout, absl::Milliseconds(20));
}
using testing::CountOf;

// Two up→down→up cycles of mlx5_0 port 1, 200 ms apart, from `t0`.
v1::AgentMessage PortEvents(uint64_t seq, absl::Time t0, int n) {
  v1::AgentMessage m;
  m.set_seq(seq);
  for (int i = 0; i < n; ++i) {
    v1::LinkEvent* e = m.mutable_link_events()->add_events();
    e->set_time_unix_nanos(absl::ToUnixNanos(t0 + absl::Milliseconds(200) * i));
    e->set_source("verbs");
    e->set_device("mlx5_0");
    e->set_port("1");
    e->set_from(i % 2 == 0 ? v1::LINK_STATE_UP : v1::LINK_STATE_DOWN);
    e->set_to(i % 2 == 0 ? v1::LINK_STATE_DOWN : v1::LINK_STATE_UP);
  }
  return m;
}

class QueryE2eTest : public ::testing::Test {
 protected:
  // Starts the aggregator on `listen`; returns its gRPC port (0 on failure).
  int StartAggregator(const std::string& listen) {
    agg_ = std::make_unique<testing::Process>(
        std::vector<std::string>{testing::BinaryPath("daemon/ringside-aggregator"),
                                 "--listen=" + listen,
                                 "--http-listen=", "--state-dir=" + tmp_.path() + "/state"},
        tmp_.path());
    if (!agg_->WaitForStderr("ingest (gRPC) listening on", absl::Seconds(30))) return 0;
    std::smatch m;
    const std::string err = agg_->Stderr();
    if (!std::regex_search(err, m,
                           std::regex("ingest \\(gRPC\\) listening on \\S+ \\(port ([0-9]+)\\)"))) {
      return 0;
    }
    return std::stoi(m[1].str());
  }
  RunResult Cli(std::vector<std::string> args) {
    std::vector<std::string> argv = {Ringside()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(absl::StrCat("--aggregator=127.0.0.1:", port_));
    return testing::Run(argv, "", absl::Seconds(30));
  }

  testing::TempDir tmp_;
  std::unique_ptr<testing::Process> agg_;
  int port_ = 0;
};

TEST_F(QueryE2eTest, FlappingPortThroughEveryCommand) {
  port_ = StartAggregator("127.0.0.1:0");
  ASSERT_GT(port_, 0) << agg_->Stderr();
  const std::string address = absl::StrCat("127.0.0.1:", port_);

  testing::Process watch(
      {Ringside(), "watch", "--aggregator", address, "--node", "flappy", "--max-backoff", "1s"},
      tmp_.path());
  ASSERT_TRUE(watch.WaitForStderr("watching incidents at " + address, absl::Seconds(15)))
      << watch.Stderr();

  {
    testing::RawAgent agent(port_);
    ASSERT_TRUE(agent.Send(testing::HelloMsg("flappy", 1)));
    ASSERT_TRUE(agent.Send(PortEvents(1, absl::Now(), 2)));
    ASSERT_TRUE(agent.WaitAck(1));
    ASSERT_TRUE(agg_->WaitForStderr("opened: link_down", absl::Seconds(20))) << agg_->Stderr();
    ASSERT_TRUE(agent.Send(PortEvents(2, absl::Now(), 2)));
    ASSERT_TRUE(agent.WaitAck(2));
    ASSERT_TRUE(agg_->WaitForStderr("opened: link_flapping", absl::Seconds(20))) << agg_->Stderr();
    EXPECT_TRUE(agent.Finish().ok());
  }

  // JSON first, to learn the ids.
  RunResult r = Cli({"incidents", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json list = nlohmann::json::parse(r.out);
  EXPECT_EQ(r.out, list.dump(2) + "\n");
  uint64_t flapping = 0;
  uint64_t down = 0;
  for (const auto& i : list) {
    EXPECT_EQ(i["entity"]["node"], "flappy") << i.dump();
    EXPECT_TRUE(i["opened"].is_string()) << i.dump();
    if (i["kind"] == "link_flapping") {
      flapping = i["id"].get<uint64_t>();
      EXPECT_EQ(i["open"], true);
      EXPECT_TRUE(i["resolved"].is_null());
    }
    if (i["kind"] == "link_down" && down == 0) down = i["id"].get<uint64_t>();
  }
  ASSERT_NE(flapping, 0u) << r.out;
  ASSERT_NE(down, 0u) << r.out;

  r = Cli({"incidents", "--open"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "link_flapping")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "flappy mlx5_0 port 1")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, " ago")) << r.out;

  r = Cli({"incidents", "--kind", "link_down"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "resolved")) << r.out;

  r = Cli({"incident", absl::StrCat(flapping)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, absl::StrCat("Incident #", flapping, "  link_flapping  ")))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Entity:    flappy mlx5_0 port 1")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Evidence:")) << r.out;
  // The stable key the alerts carry (the same on every replica), next to the local id.
  std::smatch key;
  ASSERT_TRUE(std::regex_search(r.out, key, std::regex("\nKey: +([0-9a-f]{16})\n"))) << r.out;
  const std::string key_hex = key[1].str();  // key points into r.out, replaced below
  r = Cli({"incident", absl::StrCat(flapping), "-o", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["key"], key_hex) << r.out;

  r = Cli({"links", "--flapping"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "flappy")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, absl::StrCat("#", flapping, " link_flapping"))) << r.out;
  r = Cli({"links", "--unhealthy", "-o", "json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  nlohmann::json links = nlohmann::json::parse(r.out);
  ASSERT_FALSE(links.empty());
  EXPECT_EQ(links[0]["node"], "flappy");
  EXPECT_GE(links[0]["flaps_in_window"].get<int>(), 2);
  EXPECT_EQ(links[0]["healthy"], false);

  r = Cli({"node", "flappy"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // an open incident
  EXPECT_TRUE(absl::StartsWith(r.out, "Node flappy  current\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Agent:      test")) << r.out;
  r = Cli({"node", "nobody"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "never heard of node \"nobody\"")) << r.err;

  r = Cli({"status"});
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "link_flapping 1")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Verdict: ")) << r.out;
  r = Cli({"status", "-o", "json"});
  nlohmann::json status = nlohmann::json::parse(r.out);
  EXPECT_EQ(status["nodes"], 1);
  EXPECT_EQ(status["open_incidents_by_kind"]["link_flapping"], 1);

  r = Cli({"stragglers"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;

  // What watch printed live: link_down opened and resolved, then link_flapping opened.
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(watch.Stdout(), absl::StrCat("RESOLVED  #", down, " ")) &&
           absl::StrContains(watch.Stdout(), absl::StrCat("OPENED    #", flapping, " "));
  })) << watch.Stdout();
  EXPECT_TRUE(absl::StrContains(watch.Stdout(), absl::StrCat("OPENED    #", down, " ")))
      << watch.Stdout();
  EXPECT_LT(watch.Stdout().find(absl::StrCat("OPENED    #", down, " ")),
            watch.Stdout().find(absl::StrCat("RESOLVED  #", down, " ")));

  // The aggregator restarts on the same port: watch says so, comes back, and does not print the
  // still-open link_flapping as new again (the snapshot after a reconnect is deduplicated).
  agg_->Signal(SIGTERM);
  ASSERT_EQ(agg_->Wait(absl::Seconds(20)), 0) << agg_->Stderr();
  ASSERT_TRUE(watch.WaitForStderr("ended the stream", absl::Seconds(15))) << watch.Stderr();
  ASSERT_EQ(StartAggregator(address), port_) << agg_->Stderr();
  ASSERT_TRUE(watch.WaitForStderr("reconnected to " + address, absl::Seconds(20)))
      << watch.Stderr();
  // A new change after the reconnect: once it is printed, the new snapshot has been too.
  {
    testing::RawAgent agent(port_);
    ASSERT_TRUE(agent.Send(testing::HelloMsg("flappy", 2)));
    v1::AgentMessage m = PortEvents(1, absl::Now(), 1);
    m.mutable_link_events()->mutable_events(0)->set_device("mlx5_1");
    ASSERT_TRUE(agent.Send(m));
    ASSERT_TRUE(agent.WaitAck(1));
    EXPECT_TRUE(agent.Finish().ok());
  }
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(watch.Stdout(), "link_down flappy mlx5_1 port 1");
  })) << watch.Stdout()
      << watch.Stderr();
  const std::string out = watch.Stdout();
  EXPECT_EQ(CountOf(out, absl::StrCat("OPENED    #", flapping, " ")) +
                CountOf(out, absl::StrCat("OPEN      #", flapping, " ")),
            1)
      << out;

  watch.Signal(SIGINT);
  EXPECT_EQ(watch.Wait(absl::Seconds(10)), 0) << watch.Stderr();
}

}  // namespace
}  // namespace ringside::daemon
