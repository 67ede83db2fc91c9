// The ringside-agent binary as a user runs it: --once output, /metrics over HTTP on loopback
// checked by Prometheus' own `promtool check metrics`, live values, clean shutdown.
#include <signal.h>

#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sim/sysfs_tree.h"
#include "tests/testing/process.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using testing::BinaryPath;

class AgentProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::HcaSpec ib;
    ASSERT_TRUE(w_.AddHca(ib).ok());
    sim::HcaSpec roce;
    roce.name = "mlx5_8";
    roce.pci = "0000:8a:00.0";
    roce.link_layer = "Ethernet";
    roce.netdev = "ens1f0np0";
    ASSERT_TRUE(w_.AddHca(roce).ok());
    ASSERT_TRUE(w_.SetIbCounter("mlx5_0", 1, "port_xmit_wait", 4294967295u).ok());
  }

  // Starts the agent serving on an ephemeral loopback port; returns the port.
  int StartAgent(std::unique_ptr<testing::Process>& p) {
    p = std::make_unique<testing::Process>(
        std::vector<std::string>{BinaryPath("daemon/ringside-agent"), "--sysfs-root=" + tree_.path(),
                                 "--listen=127.0.0.1:0", "--interval=10ms", "--node-name=n01"},
        out_.path());
    if (!p->WaitForStderr("serving /metrics", absl::Seconds(20))) {
      ADD_FAILURE() << "agent did not start: " << p->Stderr();
      return 0;
    }
    std::smatch m;
    std::string err = p->Stderr();
    if (!std::regex_search(err, m, std::regex("\\(port ([0-9]+)\\)"))) return 0;
    return std::stoi(m[1].str());
  }

  testing::TempDir tree_;
  testing::TempDir out_;
  sim::SysfsTreeWriter w_{tree_.path()};
};

TEST_F(AgentProcessTest, OnceJsonPrintsEverySeries) {
  testing::RunResult r = testing::Run({BinaryPath("daemon/ringside-agent"), "--once",
                                       "--sysfs-root=" + testing::SharedDir() +
                                           "/fixtures/sysfs/procfs/sys",
                                       "-o", "json", "--node-name=fixture"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.front(), '[');
  EXPECT_NE(r.out.find("{\"node\":\"fixture\",\"source\":\"infiniband\",\"device\":\"hfi1_0\","
                       "\"port\":\"1\",\"counter\":\"port_rcv_data\",\"kind\":\"counter\","
                       "\"value\":345091702026,\"status\":\"ok\",\"unit\":\"4-byte-words\","
                       "\"width\":64"),
            std::string::npos);
  size_t objects = 0;
  for (size_t pos = 0; (pos = r.out.find("{\"node\"", pos)) != std::string::npos; ++pos) ++objects;
  EXPECT_GT(objects, 80u);
}

TEST_F(AgentProcessTest, OnceTextAndBadOutputFlag) {
  testing::RunResult text = testing::Run(
      {BinaryPath("daemon/ringside-agent"), "--once", "--sysfs-root=" + tree_.path()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("port_xmit_wait"), std::string::npos);
  EXPECT_NE(text.out.find("4294967295"), std::string::npos);
  testing::RunResult bad =
      testing::Run({BinaryPath("daemon/ringside-agent"), "--once", "-o", "yaml"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("-o must be text or json"), std::string::npos);
}

TEST_F(AgentProcessTest, MetricsPassPromtoolAndFollowTheTree) {
  std::unique_ptr<testing::Process> agent;
  int port = StartAgent(agent);
  ASSERT_GT(port, 0);
  int status = 0;
  std::string body = testing::HttpGet(port, "/metrics", &status);
  ASSERT_EQ(status, 200);
  ASSERT_NE(body.find("ringside_ib_port_received_bytes_total"), std::string::npos);

  testing::RunResult check = testing::Run({"promtool", "check", "metrics"}, body);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(check.out + check.err, "") << "promtool complained";

  // A value written to the tree shows up within a few 10 ms cycles.
  ASSERT_TRUE(w_.SetIbCounter("mlx5_0", 1, "link_downed", 3).ok());
  double seen = -1;
  for (int i = 0; i < 200 && seen != 3; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    testing::PromText p = testing::ParsePromText(testing::HttpGet(port, "/metrics"));
    auto v = p.Find("ringside_ib_port_link_downed_total",
                    {{"node", "n01"}, {"device", "mlx5_0"}, {"port", "1"}});
    if (!v.empty()) seen = v[0].value;
  }
  EXPECT_EQ(seen, 3);
  testing::PromText p = testing::ParsePromText(testing::HttpGet(port, "/metrics"));
  auto cycles = p.Find("ringside_agent_cycles_total", {{"node", "n01"}});
  ASSERT_EQ(cycles.size(), 1u);
  EXPECT_GT(cycles[0].value, 5);

  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(10)), 0) << agent->Stderr();
}

TEST_F(AgentProcessTest, PortInUseIsAClearError) {
  std::unique_ptr<testing::Process> first;
  int port = StartAgent(first);
  ASSERT_GT(port, 0);
  testing::RunResult second =
      testing::Run({BinaryPath("daemon/ringside-agent"), "--sysfs-root=" + tree_.path(),
                    absl::StrCat("--listen=127.0.0.1:", port)},
                   "", absl::Seconds(20));
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("cannot listen"), std::string::npos) << second.err;
}

}  // namespace
}  // namespace ringside
