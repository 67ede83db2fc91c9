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

// With NVML present (the fake library, through the agent's real dlopen path) the NVLink series and
// GPU info are served, a down link as 0, and the whole page still passes promtool. Without it the
// collector is off with one log line and ringside_agent_collector_up 0.
TEST_F(AgentProcessTest, NvlinkThroughFakeNvmlAndCollectorOff) {
  const std::string config = tree_.path() + "/fake-nvml.conf";
  ASSERT_TRUE(w_.WriteFile("fake-nvml.conf",
                           "gpu\nname NVIDIA H100 80GB HBM3\nuuid GPU-aaaa\narch 9\nlinks 18\n"
                           "down 5\ncounter replay * 7\ncounter crc_flit 2 99\n")
                  .ok());
  testing::Process agent(
      {"/usr/bin/env", "RINGSIDE_FAKE_NVML_CONFIG=" + config, BinaryPath("daemon/ringside-agent"),
       "--sysfs-root=" + tree_.path(), "--listen=127.0.0.1:0", "--interval=50ms",
       "--node-name=n02", "--nvml-library=" + std::string(FAKE_NVML_COMPLETE)},
      out_.path());
  ASSERT_TRUE(agent.WaitForStderr("serving /metrics", absl::Seconds(20))) << agent.Stderr();
  std::smatch m;
  std::string err = agent.Stderr();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("\\(port ([0-9]+)\\)")));
  const int port = std::stoi(m[1].str());
  std::string body;
  for (int i = 0; i < 100 && body.find("ringside_nvlink_up") == std::string::npos; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    body = testing::HttpGet(port, "/metrics");
  }
  testing::PromText p = testing::ParsePromText(body);
  auto up = p.Find("ringside_nvlink_up", {{"node", "n02"}, {"gpu", "0"}});
  EXPECT_EQ(up.size(), 18u);
  auto down = p.Find("ringside_nvlink_up", {{"gpu", "0"}, {"link", "5"}});
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].value, 0);
  auto crc = p.Find("ringside_nvlink_crc_flit_errors_total", {{"gpu", "0"}, {"link", "2"}});
  ASSERT_EQ(crc.size(), 1u);
  EXPECT_EQ(crc[0].value, 99);
  auto gpu = p.Find("ringside_gpu_info", {{"gpu", "0"}});
  ASSERT_EQ(gpu.size(), 1u);
  EXPECT_EQ(gpu[0].labels["uuid"], "GPU-aaaa");
  auto nvml_up = p.Find("ringside_agent_collector_up", {{"collector", "nvml"}});
  ASSERT_EQ(nvml_up.size(), 1u);
  EXPECT_EQ(nvml_up[0].value, 1);
  testing::RunResult check = testing::Run({"promtool", "check", "metrics"}, body);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(check.out + check.err, "");
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(absl::Seconds(10)), 0);

  // No library: off, said once.
  testing::Process off({BinaryPath("daemon/ringside-agent"), "--sysfs-root=" + tree_.path(),
                        "--listen=127.0.0.1:0", "--interval=20ms",
                        "--nvml-library=/nonexistent/libnvidia-ml.so.1"},
                       out_.path());
  ASSERT_TRUE(off.WaitForStderr("serving /metrics", absl::Seconds(20))) << off.Stderr();
  absl::SleepFor(absl::Milliseconds(300));
  const std::string log = off.Stderr();
  size_t mentions = 0;
  for (size_t pos = 0; (pos = log.find("nvml collector off", pos)) != std::string::npos; ++pos) {
    ++mentions;
  }
  EXPECT_EQ(mentions, 1u) << log;
  off.Signal(SIGTERM);
  EXPECT_EQ(off.Wait(absl::Seconds(10)), 0);
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
