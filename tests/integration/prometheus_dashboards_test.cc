// What a Prometheus and Grafana user sees, end to end: Debian's `prometheus` on 127.0.0.1 scrapes
// a small simulated cluster — a real ringside-aggregator (detectors on, journal on) fed by two
// real ringside-agents on generated sysfs trees (one NIC in a PFC pause storm, the other paused by
// its peer and ECN-marked; NVLink through the fake NVML) and by a raw ingest client sending the
// collective records of a 4-rank job whose rank 2 is always late — and evaluates
// deploy/prometheus/rules/ringside.rules.yml. Then every PromQL expression of every panel of every
// dashboard in dashboards/ (with $node, $job and the interval variables filled in) must return at
// least one series through the HTTP API, and the numbers that matter must be right: the storm's
// paused ratio, the straggler's score, the open incidents.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "daemon/aggregator/metrics/analysis_metrics.h"
#include "nlohmann/json.hpp"
#include "sim/node_animator.h"
#include "sim/sysfs_tree.h"
#include "tests/aggregator/ingest/ingest_test_util.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using testing::BinaryPath;
using testing::Process;

constexpr char kJob[] = "llm-7b";
constexpr char kNode[] = "sim-1";  // the node every $node panel is evaluated for

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += absl::StrCat("%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

// The port a process logged as "(port N)" on the line starting with `prefix` (plain text).
int LoggedPort(Process& p, const std::string& prefix) {
  if (!p.WaitForStderr(prefix, absl::Seconds(30))) return 0;
  const std::string err = p.Stderr();
  const size_t at = err.find(prefix);
  const size_t eol = err.find('\n', at);
  const std::string line = err.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\\(port ([0-9]+)\\)"))) return 0;
  return std::stoi(m[1].str());
}

struct PanelQuery {
  std::string dashboard;
  std::string panel;
  std::string expr;
};

void CollectTargets(const nlohmann::json& panels, const std::string& dashboard,
                    std::vector<PanelQuery>& out) {
  for (const nlohmann::json& p : panels) {
    if (p.contains("panels")) CollectTargets(p["panels"], dashboard, out);  // rows
    if (!p.contains("targets")) continue;
    for (const nlohmann::json& t : p["targets"]) {
      if (t.contains("expr")) {
        out.push_back({dashboard, p.value("title", "?"), t["expr"].get<std::string>()});
      }
    }
  }
}

std::string Substitute(std::string expr) {
  return absl::StrReplaceAll(
      expr, {{"$__rate_interval", "10s"}, {"$__interval", "5s"}, {"$node", kNode}, {"$job", kJob}});
}

class PrometheusDashboardsTest : public ::testing::Test {
 protected:
  // One simulated node: an InfiniBand HCA and a RoCE HCA (netdev eth1), animated in real time.
  struct SimNode {
    std::string name;
    std::unique_ptr<testing::TempDir> tree;
    std::unique_ptr<sim::SysfsTreeWriter> writer;
    std::unique_ptr<sim::NodeAnimator> animator;
    std::string ethtool_dir;
  };

  void AddNode(const std::string& name, sim::PortFault::Kind roce_fault, bool flap) {
    SimNode n;
    n.name = name;
    n.tree = std::make_unique<testing::TempDir>();
    n.writer = std::make_unique<sim::SysfsTreeWriter>(n.tree->path() + "/sys");
    sim::HcaSpec ib;
    ib.name = "mlx5_0";
    ASSERT_TRUE(n.writer->AddHca(ib).ok());
    sim::HcaSpec roce;
    roce.name = "mlx5_1";
    roce.pci = "0000:18:00.0";
    roce.node_guid = "b83f:d203:0012:3457";
    roce.link_layer = "Ethernet";
    roce.rate = "400 Gb/sec (4X NDR)";
    roce.netdev = "eth1";
    ASSERT_TRUE(n.writer->AddHca(roce).ok());
    n.ethtool_dir = n.tree->path() + "/ethtool";
    std::filesystem::create_directories(n.ethtool_dir);
    std::vector<sim::AnimatedPort> ports(2);
    ports[0].device = "mlx5_0";
    ports[1].device = "mlx5_1";
    ports[1].roce = true;
    ports[1].netdev = "eth1";
    n.animator = std::make_unique<sim::NodeAnimator>(n.writer.get(), ports, 7, n.ethtool_dir);
    n.animator->AddFault({roce_fault, "mlx5_1", 1, absl::ZeroDuration(), absl::Hours(1)});
    if (flap) {
      n.animator->AddFault(
          {sim::PortFault::Kind::kFlap, "mlx5_0", 1, absl::ZeroDuration(), absl::Hours(1)});
    }
    ASSERT_TRUE(n.animator->Step(absl::ZeroDuration()).ok());
    nodes_.push_back(std::move(n));
  }

  // Four ranks of one all-reduce per call, rank 2 (on sim-2) arriving 6 ms after the others.
  v1::AgentMessage Collectives(uint64_t seq, int instances) {
    v1::AgentMessage m;
    m.set_seq(seq);
    const int64_t now = absl::ToUnixNanos(absl::Now());
    for (int i = 0; i < instances; ++i) {
      const int64_t base = now - (instances - i) * 20'000'000LL;
      const uint64_t instance = ++collective_seq_;  // one collective: the same seq on every rank
      for (uint32_t r = 0; r < 4; ++r) {
        v1::CollectiveRecord* c = m.mutable_collectives()->add_records();
        c->set_job_id(kJob);
        c->set_comm_id(42);
        c->set_rank(r);
        c->set_nranks(4);
        c->set_global_rank(r);
        c->set_function("AllReduce");
        c->set_seq(instance);
        c->set_bytes(64 << 20);
        c->set_kernel_start_unix_nanos(base + (r == 2 ? 6'000'000 : 0));
        c->set_kernel_stop_unix_nanos(base + 8'000'000);
        c->set_host(r < 2 ? "sim-1" : "sim-2");
      }
    }
    return m;
  }

  // Prometheus' instant query; the result vector (empty on error, with `error` set).
  nlohmann::json Query(const std::string& expr, std::string* error = nullptr) {
    int status = 0;
    const std::string body =
        testing::HttpGet(prom_port_, "/api/v1/query?query=" + UrlEncode(expr), &status);
    nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || j.value("status", "") != "success") {
      if (error != nullptr) *error = absl::StrCat("HTTP ", status, ": ", body);
      return nlohmann::json::array();
    }
    const nlohmann::json& data = j["data"];
    if (data.value("resultType", "") == "scalar") return nlohmann::json::array({data["result"]});
    return data["result"];
  }

  double ValueOf(const std::string& expr) {
    nlohmann::json r = Query(expr);
    if (r.empty()) return -1;
    return std::stod(r[0]["value"][1].get<std::string>());
  }
  // The value of `expr` once `ok(value)` holds, polled for up to 20 s (rates need a few scrapes);
  // the last value when it never does.
  template <typename Pred>
  double Eventually(const std::string& expr, Pred ok) {
    double v = ValueOf(expr);
    for (int i = 0; i < 40 && !ok(v); ++i) {
      absl::SleepFor(absl::Milliseconds(500));
      v = ValueOf(expr);
    }
    return v;
  }

  testing::TempDir dir_;
  std::vector<SimNode> nodes_;
  uint64_t collective_seq_ = 0;
  int prom_port_ = 0;
};

TEST_F(PrometheusDashboardsTest, EveryPanelQueryReturnsSeries) {
  const std::string root = RINGSIDE_SOURCE_DIR;
  // The dashboards' queries, read first: a broken file fails fast.
  std::vector<PanelQuery> queries;
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(root + "/dashboards")) {
    if (entry.path().extension() != ".json") continue;
    files.insert(entry.path().filename().string());
    nlohmann::json d = nlohmann::json::parse(ReadAll(entry.path().string()), nullptr, false);
    ASSERT_FALSE(d.is_discarded()) << entry.path() << " is not JSON";
    CollectTargets(d["panels"], entry.path().filename().string(), queries);
  }
  EXPECT_EQ(files,
            (std::set<std::string>{"aggregator-self-health.json", "fabric-overview.json",
                                   "job-stragglers.json", "link-health.json", "pfc-ecn.json"}));
  ASSERT_GT(queries.size(), 40u);

  // The aggregator, detectors and journal on.
  Process agg({BinaryPath("daemon/ringside-aggregator"), "--listen=127.0.0.1:0",
               "--http-listen=127.0.0.1:0", "--state-dir=" + dir_.path() + "/state"},
              dir_.path());
  const int grpc_port = LoggedPort(agg, "ingest (gRPC) listening");
  const int agg_http = LoggedPort(agg, "HTTP (/metrics");
  ASSERT_GT(grpc_port, 0) << agg.Stderr();
  ASSERT_GT(agg_http, 0) << agg.Stderr();

  // sim-1: its RoCE NIC is a pause-storm origin (sends pauses ~95 % of the time) and its IB port
  // flaps; sim-2: paused by its peer ~90 % of the time, ECN marking.
  AddNode("sim-1", sim::PortFault::Kind::kPauseStorm, /*flap=*/true);
  AddNode("sim-2", sim::PortFault::Kind::kPaused, /*flap=*/false);
  ASSERT_TRUE(!HasFatalFailure());
  nodes_[1].animator->AddFault(
      {sim::PortFault::Kind::kEcnCongestion, "mlx5_1", 1, absl::ZeroDuration(), absl::Hours(1)});
  ASSERT_TRUE(nodes_[0]
                  .writer
                  ->WriteFile("fake-nvml.conf",
                              "gpu\nname NVIDIA H100 80GB HBM3\nuuid GPU-aaaa\narch 9\n"
                              "links 4\ncounter replay * 7\ncounter crc_flit 2 99\n")
                  .ok());
  std::vector<std::unique_ptr<Process>> agents;
  std::vector<int> agent_ports;
  for (SimNode& n : nodes_) {
    agents.push_back(std::make_unique<Process>(
        std::vector<std::string>{
            "/usr/bin/env", "RINGSIDE_FAKE_NVML_CONFIG=" + n.tree->path() + "/sys/fake-nvml.conf",
            BinaryPath("daemon/ringside-agent"), "--sysfs-root=" + n.tree->path() + "/sys",
            "--node-name=" + n.name, "--aggregator=127.0.0.1:" + std::to_string(grpc_port),
            "--interval=200ms", "--listen=127.0.0.1:0",
            "--nvml-library=" + std::string(FAKE_NVML_COMPLETE),
            "--ethtool-source=dir:" + n.ethtool_dir, "--link-events=false",
            "--collectives-socket="},
        n.tree->path()));
    agent_ports.push_back(LoggedPort(*agents.back(), "serving /metrics"));
    ASSERT_GT(agent_ports.back(), 0) << agents.back()->Stderr();
  }

  // The training job's records, through the raw ingest client, while the nodes are animated.
  testing::RawAgent trainer(grpc_port, absl::Seconds(90));
  ASSERT_TRUE(trainer.Send(testing::HelloMsg("trainer-0", 1)));
  std::atomic<bool> stop{false};
  std::atomic<bool> animate_ok{true};
  struct Joiner {  // stops the animation on every way out of the test
    std::atomic<bool>* stop;
    std::thread* thread;
    ~Joiner() {
      stop->store(true);
      if (thread->joinable()) thread->join();
    }
  };
  std::thread animate;
  Joiner joiner{&stop, &animate};
  animate = std::thread([&] {
    const absl::Time start = absl::Now();
    uint64_t seq = 0;
    for (int tick = 0; !stop.load() && tick < 600; ++tick) {
      for (SimNode& n : nodes_) {
        if (!n.animator->Step(absl::Now() - start).ok()) animate_ok = false;
      }
      if (tick % 2 == 0 && !trainer.Send(Collectives(++seq, 10))) animate_ok = false;
      absl::SleepFor(absl::Milliseconds(200));
    }
  });

  // Prometheus on 127.0.0.1, 1 s scrapes, the repository's rules evaluated every second.
  const std::string prom_dir = dir_.path() + "/prometheus";
  std::filesystem::create_directories(prom_dir + "/data");
  std::string rules = ReadAll(root + "/deploy/prometheus/rules/ringside.rules.yml");
  ASSERT_FALSE(rules.empty());
  rules = std::regex_replace(rules, std::regex("interval: 15s"), "interval: 1s");
  {
    std::ofstream(prom_dir + "/ringside.rules.yml") << rules;
    std::ofstream cfg(prom_dir + "/prometheus.yml");
    cfg << "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n"
        << "rule_files: ['ringside.rules.yml']\n"
        << "scrape_configs:\n"
        << "  - job_name: ringside-agent\n    honor_labels: true\n    static_configs:\n";
    for (size_t i = 0; i < nodes_.size(); ++i) {
      cfg << "      - targets: ['127.0.0.1:" << agent_ports[i] << "']\n"
          << "        labels: {node: " << nodes_[i].name << "}\n";
    }
    cfg << "  - job_name: ringside-aggregator\n    honor_labels: true\n    static_configs:\n"
        << "      - targets: ['127.0.0.1:" << agg_http << "']\n";
  }
  prom_port_ = FreePort();
  ASSERT_GT(prom_port_, 0);
  Process prom({"prometheus", "--config.file=" + prom_dir + "/prometheus.yml",
                "--storage.tsdb.path=" + prom_dir + "/data",
                "--web.listen-address=127.0.0.1:" + std::to_string(prom_port_)},
               prom_dir);
  if (!prom.WaitForStderr("Server is ready to receive web requests", absl::Seconds(30))) {
    if (prom.Wait(absl::ZeroDuration()) == 127) GTEST_SKIP() << "prometheus is not installed";
    FAIL() << prom.Stderr();
  }

  // Poll until every panel query has a series (bounded); then report the ones that never did.
  std::map<std::string, std::string> missing;  // expr → where
  const absl::Time deadline = absl::Now() + absl::Seconds(35);
  do {
    absl::SleepFor(absl::Seconds(1));
    missing.clear();
    for (const PanelQuery& q : queries) {
      std::string error;
      if (Query(Substitute(q.expr), &error).empty()) {
        missing[Substitute(q.expr)] = absl::StrCat(q.dashboard, " / ", q.panel, " ", error);
      }
    }
  } while (!missing.empty() && absl::Now() < deadline);
  for (const auto& [expr, where] : missing) ADD_FAILURE() << where << ": no series for " << expr;

  // The values behind the panels: the storm origin pauses its peer, the victim is paused, the
  // late rank is the straggler, the fabric incidents are open, the recording rules ran.
  EXPECT_GT(
      Eventually("max(ringside_pfc_paused_ratio{node=\"sim-1\",direction=\"tx\",priority=\"3\"})",
                 [](double v) { return v > 0.8; }),
      0.8);
  EXPECT_GT(
      Eventually("max(ringside_pfc_paused_ratio{node=\"sim-2\",direction=\"rx\",priority=\"3\"})",
                 [](double v) { return v > 0.8; }),
      0.8);
  EXPECT_LT(Eventually("max(ringside_pfc_paused_ratio{node=\"sim-2\",direction=\"tx\"})",
                       [](double v) { return v >= 0 && v < 0.1; }),
            0.1);
  // The agents' pause durations are in seconds, so their rate is the same ratio. (The recording
  // rule's 1-minute window is longer than this test: it has a value, not yet the full one.)
  EXPECT_GT(
      Eventually("max(rate(ringside_pfc_tx_pause_duration_seconds_total{node=\"sim-1\"}[5s]))",
                 [](double v) { return v > 0.8; }),
      0.8)
      << Query("ringside_pfc_tx_pause_duration_seconds_total[10s]").dump();
  EXPECT_GT(Eventually("max(port_priority:ringside_pfc_tx_paused_ratio:rate1m{node=\"sim-1\"})",
                       [](double v) { return v > 0; }),
            0);
  EXPECT_GT(Eventually("max(ringside_roce_ecn_marked_packets_per_second{node=\"sim-2\"})",
                       [](double v) { return v > 1000; }),
            1000)
      << Query("ringside_roce_ecn_marked_packets_per_second").dump();
  EXPECT_GT(Eventually("ringside_straggler_score{job=\"llm-7b\",rank=\"2\",node=\"sim-2\"}",
                       [](double v) { return v > 0.8; }),
            0.8);
  EXPECT_LT(Eventually("max(ringside_straggler_score{job=\"llm-7b\",rank!=\"2\"})",
                       [](double v) { return v >= 0 && v < 0.2; }),
            0.2);
  EXPECT_GE(Eventually("sum(ringside_incidents_open{kind=\"pause_storm\"})",
                       [](double v) { return v >= 1; }),
            1);
  EXPECT_GT(Eventually("sum(ringside_collective_duration_seconds_count{job=\"llm-7b\"})",
                       [](double v) { return v > 100; }),
            100);
  EXPECT_EQ(Eventually("count(ringside_incidents_open)", [](double v) { return v == 33; }), 33);
  // The aggregator's whole page passes promtool's lint.
  const std::string page = testing::HttpGet(agg_http, "/metrics");
  EXPECT_NE(page.find("ringside_collective_duration_seconds_bucket"), std::string::npos);
  EXPECT_NE(page.find("ringside_link_health{"), std::string::npos);
  testing::RunResult lint = testing::Run({"promtool", "check", "metrics"}, page);
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
  EXPECT_EQ(lint.out + lint.err, "");

  int status = 0;
  nlohmann::json rules_state =
      nlohmann::json::parse(testing::HttpGet(prom_port_, "/api/v1/rules", &status), nullptr, false);
  ASSERT_FALSE(rules_state.is_discarded());
  size_t rule_count = 0;
  for (const nlohmann::json& g : rules_state["data"]["groups"]) {
    for (const nlohmann::json& r : g["rules"]) {
      ++rule_count;
      EXPECT_EQ(r.value("health", ""), "ok") << r.dump();
    }
  }
  EXPECT_GT(rule_count, 20u);

  stop = true;
  animate.join();
  EXPECT_TRUE(animate_ok.load());
  prom.Signal(SIGTERM);
  EXPECT_EQ(prom.Wait(absl::Seconds(20)), 0) << prom.Stderr();
  for (auto& a : agents) {
    a->Signal(SIGTERM);
    EXPECT_EQ(a->Wait(absl::Seconds(20)), 0) << a->Stderr();
  }
  trainer.Finish();
  agg.Signal(SIGTERM);
  EXPECT_EQ(agg.Wait(absl::Seconds(20)), 0) << agg.Stderr();
}

}  // namespace
}  // namespace ringside
