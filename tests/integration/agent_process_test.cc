// The ringside-agent binary as a user runs it: --once output, /metrics over HTTP on loopback
// checked by Prometheus' own `promtool check metrics`, live values, clean shutdown.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/record_proto.h"
#include "sim/sysfs_tree.h"
#include "tests/testing/eventually.h"
#include "tests/testing/process.h"
#include "tests/testing/unix_socket.h"
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
  int StartAgent(std::unique_ptr<testing::Process>& p, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {BinaryPath("daemon/ringside-agent"),
                                     "--sysfs-root=" + tree_.path(), "--listen=127.0.0.1:0",
                                     "--interval=10ms", "--node-name=n01"};
    args.insert(args.end(), extra.begin(), extra.end());
    p = std::make_unique<testing::Process>(args, out_.path());
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
  // The link-event sources' own health: the netlink socket's granted buffer (asked 4 MiB, with
  // SO_RCVBUFFORCE first) and whether it was capped; verbs device removals, watched even with no
  // RDMA device yet.
  auto rcvbuf = p.Find("ringside_agent_netlink_receive_buffer_bytes", {{"node", "n01"}});
  ASSERT_EQ(rcvbuf.size(), 1u);
  EXPECT_GT(rcvbuf[0].value, 0);
  auto capped = p.Find("ringside_agent_netlink_receive_buffer_capped", {{"node", "n01"}});
  ASSERT_EQ(capped.size(), 1u);
  EXPECT_EQ(capped[0].value, rcvbuf[0].value < (4 << 20) ? 1 : 0);
  EXPECT_EQ(p.Find("ringside_agent_netlink_overflows_total", {{"node", "n01"}}).size(), 1u);
  EXPECT_EQ(p.Find("ringside_agent_verbs_device_removals_total", {{"node", "n01"}}).size(), 1u);

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

// A client speaking the plugin's socket format (the plugin's own encoder) streams to a real agent:
// every ringside_agent_collective_* family docs/metrics.md lists is on its /metrics, with the
// values this client caused. (They were once missing: the collectable lived only as a temporary.)
TEST_F(AgentProcessTest, CollectiveRecordMetricsAreServedWhilePluginsStream) {
  const std::string sock = out_.path() + "/collectives.sock";
  std::unique_ptr<testing::Process> agent;
  // Burst 10 at 1 record/s: of 25 records sent at once, about 15 are rate-limited.
  const int port = StartAgent(agent, {"--collectives-socket=" + sock, "--collectives-rate=1",
                                      "--collectives-burst=10"});
  ASSERT_GT(port, 0);
  ASSERT_TRUE(agent->WaitForStderr("collective records on", absl::Seconds(10))) << agent->Stderr();

  std::vector<collectors::CollectiveRecordFields> records;
  for (int i = 0; i < 25; ++i) {
    collectors::CollectiveRecordFields r;
    r.rank = 1;
    r.nranks = 4;
    r.pid = static_cast<uint32_t>(::getpid());
    r.comm_id = 99;
    r.seq = static_cast<uint64_t>(i);
    r.bytes = 1 << 20;
    r.enqueue_unix_nanos = 1'700'000'000'000'000'000;
    r.channels = 2;
    r.job_id.Set("train-7");
    r.host.Set("container-7f3a");
    r.function.Set("AllReduce");
    records.push_back(r);
  }
  collectors::BatchHeaderFields header;
  header.dropped = 1234;  // what the plugin reports it lost before this batch
  header.job_id.Set("train-7");
  const absl::StatusOr<std::string> frame = collectors::EncodeFrame(header, records);
  ASSERT_TRUE(frame.ok()) << frame.status();
  const int plugin = testing::ConnectUnix(sock);
  ASSERT_GE(plugin, 0);
  ASSERT_TRUE(testing::SendAll(plugin, *frame));
  const int rogue = testing::ConnectUnix(sock);
  ASSERT_GE(rogue, 0);
  ASSERT_TRUE(testing::SendAll(rogue, "GET /metrics HTTP/1.1\r\n\r\n"));

  auto value = [](const testing::PromText& p, const std::string& name,
                  std::map<std::string, std::string> labels) {
    auto s = p.Find(name, labels);
    return s.size() == 1 ? s[0].value : -1.0;
  };
  testing::PromText p;
  std::string body;
  const bool settled = testing::Eventually([&] {
    body = testing::HttpGet(port, "/metrics");
    p = testing::ParsePromText(body);
    const std::map<std::string, std::string> job = {{"node", "n01"}, {"job", "train-7"}};
    return value(p, "ringside_agent_collective_records_total", job) +
                   value(p, "ringside_agent_collective_rate_limited_records_total", job) ==
               25 &&
           value(p, "ringside_agent_collective_rejections_total", {{"reason", "bad_magic"}}) == 1 &&
           value(p, "ringside_agent_collective_connections", {{"node", "n01"}}) == 1;
  });
  ASSERT_TRUE(settled) << body;

  // Every collective family the docs list, present.
  const std::string doc =
      testing::ReadFileOrEmpty(std::string(RINGSIDE_SOURCE_DIR) + "/docs/metrics.md");
  std::set<std::string> documented;
  const std::regex row("\\| `(ringside_agent_collective_[a-z_]+)` \\|");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), row); it != std::sregex_iterator();
       ++it) {
    documented.insert((*it)[1].str());
  }
  EXPECT_GE(documented.size(), 6u) << "docs/metrics.md lists fewer collective families";
  for (const std::string& name : documented) {
    EXPECT_FALSE(p.Find(name, {{"node", "n01"}}).empty()) << name << " missing from /metrics";
  }
  const std::map<std::string, std::string> job = {{"node", "n01"}, {"job", "train-7"}};
  const double accepted = value(p, "ringside_agent_collective_records_total", job);
  EXPECT_GE(accepted, 10);  // the burst
  EXPECT_LE(accepted, 12);  // plus at most a couple of seconds at 1/s
  EXPECT_GE(value(p, "ringside_agent_collective_rate_limited_records_total", job), 13);
  EXPECT_EQ(value(p, "ringside_agent_collective_drops_total", job), 1234);
  EXPECT_EQ(value(p, "ringside_agent_collective_connections_total", {{"node", "n01"}}), 2);
  EXPECT_EQ(value(p, "ringside_agent_collective_rejections_total",
                  {{"node", "n01"}, {"reason", "too_many_connections"}}),
            0);
  EXPECT_EQ(p.types["ringside_agent_collective_records_total"], "counter");
  EXPECT_EQ(p.types["ringside_agent_collective_connections"], "gauge");
  testing::RunResult check = testing::Run({"promtool", "check", "metrics"}, body);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;

  ::close(plugin);
  ::close(rogue);
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(10)), 0) << agent->Stderr();
}

// Devices as rdma-core's udev rules rename them, with hw_counters past 32 bits (per-QP counters
// bound) and a NOIETF PMA (64-bit data, no unicast files): --once declares the widths the kernel
// implies and /metrics serves the values as they are.
TEST_F(AgentProcessTest, RenamedDevicesAnd64BitHwCounters) {
  testing::TempDir tree;
  sim::SysfsTreeWriter w(tree.path());
  sim::HcaSpec roce;
  roce.name = "rocep138s0f0";
  roce.pci = "0000:8a:00.0";
  roce.link_layer = "Ethernet";
  roce.netdev = "ens1f0np0";
  roce.hw_counter_start = (uint64_t{1} << 32) + 5;
  roce.pma_unicast = false;
  ASSERT_TRUE(w.AddHca(roce).ok());
  ASSERT_TRUE(w.SetIbCounter("rocep138s0f0", 1, "port_rcv_data", 7).ok());
  testing::RunResult once = testing::Run({BinaryPath("daemon/ringside-agent"), "--once", "-o",
                                          "json", "--sysfs-root=" + tree.path(),
                                          "--node-name=n03"});
  ASSERT_EQ(once.exit_code, 0) << once.err;
  EXPECT_NE(once.out.find("\"device\":\"rocep138s0f0\",\"port\":\"1\",\"counter\":"
                          "\"out_of_sequence\",\"kind\":\"counter\",\"value\":4294967301,"
                          "\"status\":\"ok\",\"unit\":\"packets\",\"width\":64"),
            std::string::npos)
      << once.out.substr(0, 3000);
  EXPECT_NE(once.out.find("\"device\":\"rocep138s0f0\",\"port\":\"1\",\"counter\":"
                          "\"port_rcv_data\",\"kind\":\"counter\",\"value\":7,\"status\":"
                          "\"ok\",\"unit\":\"4-byte-words\",\"width\":64"),
            std::string::npos);

  testing::Process agent({BinaryPath("daemon/ringside-agent"), "--sysfs-root=" + tree.path(),
                          "--listen=127.0.0.1:0", "--interval=20ms", "--node-name=n03"},
                         out_.path());
  ASSERT_TRUE(agent.WaitForStderr("serving /metrics", absl::Seconds(20))) << agent.Stderr();
  std::smatch m;
  std::string err = agent.Stderr();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("\\(port ([0-9]+)\\)")));
  const int port = std::stoi(m[1].str());
  std::vector<testing::PromSample> seq;
  ASSERT_TRUE(testing::Eventually([&] {
    seq = testing::ParsePromText(testing::HttpGet(port, "/metrics"))
              .Find("ringside_rdma_out_of_sequence_packets_total",
                    {{"node", "n03"}, {"device", "rocep138s0f0"}, {"port", "1"}});
    return !seq.empty();
  }));
  EXPECT_EQ(seq[0].value, 4294967301.0);
  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(absl::Seconds(10)), 0);
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
