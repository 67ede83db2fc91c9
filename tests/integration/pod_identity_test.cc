// Kubernetes pod identity end to end (issue #13 item 6): four ranks of a job, each the real NCCL
// plugin in a process of its own (nccl_plugin_driver) with POD_NAME and POD_NAMESPACE set as the
// downward API sets them, send to a real ringside-agent, which streams to a real
// ringside-aggregator. Rank 2 arrives late at every AllReduce: the straggler incident names its
// pod in `ringside stragglers` (table and -o json), `ringside incidents`, `ringside incident N`,
// in the labels of the alert posted to Alertmanager's API and in the webhook's JSON.
//
// And one process driving several GPUs (JAX, some PyTorch launchers): two processes of two GPUs
// each, the plugin learning each communicator's CUDA device at init (a fake libcudart whose
// cudaSetDevice is per thread), format version 3 through the agent, the aggregator keeping each
// GPU a worker of its own: the slow GPU's incident names its device, its sibling is not flagged.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "sim/sysfs_tree.h"
#include "tests/aggregator/alerts/http_receiver.h"
#include "tests/testing/eventually.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using testing::BinaryPath;
using testing::HttpReceiver;

constexpr int kRanks = 4;
constexpr int kLateRank = 2;
constexpr int kCollectives = 30;

// This file waits 15s by default, polling every 50 ms.
template <typename Pred>
bool Eventually(Pred pred, absl::Duration timeout = absl::Seconds(15)) {
  return testing::Eventually(pred, timeout, absl::Milliseconds(50));
}

int PortFromLog(testing::Process& p, const std::string& pattern) {
  std::smatch m;
  const std::string err = p.Stderr();
  if (!std::regex_search(err, m, std::regex(pattern))) return 0;
  return std::stoi(m[1].str());
}

// The labels of the alert named `alertname` among everything POSTed to /api/v2/alerts.
nlohmann::json AlertLabels(const HttpReceiver& am, const std::string& alertname) {
  for (const HttpReceiver::Request& req : am.Accepted()) {
    if (req.path != "/api/v2/alerts") continue;
    auto alerts = nlohmann::json::parse(req.body, nullptr, false);
    if (!alerts.is_array()) continue;
    for (const auto& a : alerts) {
      if (a.contains("labels") && a["labels"].value("alertname", "") == alertname) {
        return a["labels"];
      }
    }
  }
  return nullptr;
}

// A real aggregator (posting alerts to `alertmanager` and `hook`) and a real agent on node
// gpu-node-7 whose collectives socket is `socket`.
struct Daemons {
  testing::TempDir dir;
  testing::TempDir tree;
  HttpReceiver alertmanager;
  HttpReceiver hook;
  std::unique_ptr<testing::Process> agg;
  std::unique_ptr<testing::Process> agent;
  std::string aggregator;  // host:port of its gRPC
  std::string socket;

  // False (with the reason on stderr) when a daemon did not come up.
  bool Start() {
    sim::SysfsTreeWriter w(tree.path());
    if (!w.AddHca(sim::HcaSpec{}).ok()) return false;
    const std::string secret = dir.path() + "/webhook.secret";
    std::ofstream(secret) << "pod-identity-test\n";
    agg = std::make_unique<testing::Process>(
        std::vector<std::string>{BinaryPath("daemon/ringside-aggregator"), "--listen=127.0.0.1:0",
                                 "--http-listen=", "--state-dir=" + dir.path() + "/state",
                                 "--alertmanager-url=" + alertmanager.url(""),
                                 "--webhook-url=" + hook.url(), "--webhook-secret-file=" + secret},
        dir.path());
    if (!agg->WaitForStderr("ingest (gRPC) listening", absl::Seconds(30))) {
      ADD_FAILURE() << agg->Stderr();
      return false;
    }
    const int port =
        PortFromLog(*agg, "ingest \\(gRPC\\) listening on \\S+ \\(port ([0-9]+)\\)");
    if (port <= 0) {
      ADD_FAILURE() << agg->Stderr();
      return false;
    }
    aggregator = absl::StrCat("127.0.0.1:", port);
    socket = dir.path() + "/collectives.sock";
    agent = std::make_unique<testing::Process>(
        std::vector<std::string>{BinaryPath("daemon/ringside-agent"), "--sysfs-root=" + tree.path(),
                                 "--node-name=gpu-node-7", "--aggregator=" + aggregator,
                                 "--interval=100ms", "--listen=", "--nvml-library=",
                                 "--ethtool-source=off", "--link-events=false",
                                 "--collectives-socket=" + socket},
        dir.path());
    if (!Eventually([&] { return ::access(socket.c_str(), F_OK) == 0; }, absl::Seconds(20))) {
      ADD_FAILURE() << agent->Stderr();
      return false;
    }
    return true;
  }
  testing::RunResult Cli(std::vector<std::string> args) const {
    std::vector<std::string> argv = {BinaryPath("daemon/ringside")};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--aggregator=" + aggregator);
    return testing::Run(argv, "", absl::Seconds(30));
  }
  void Stop() {
    agent->Signal(SIGTERM);
    EXPECT_EQ(agent->Wait(absl::Seconds(20)), 0) << agent->Stderr();
    agg->Signal(SIGTERM);
    EXPECT_EQ(agg->Wait(absl::Seconds(20)), 0) << agg->Stderr();
  }
};

TEST(PodIdentityTest, AStragglerIncidentNamesItsPodInTheCliAndInTheAlerts) {
  Daemons d;
  ASSERT_TRUE(d.Start());
  testing::TempDir& dir = d.dir;
  testing::Process& agg = *d.agg;
  HttpReceiver& alertmanager = d.alertmanager;
  HttpReceiver& hook = d.hook;
  const std::string& socket = d.socket;

  // Every rank plays the same 30 steps of 10 ms, from one start time a little in the past.
  const int64_t t0 = absl::ToUnixNanos(absl::Now() - absl::Seconds(2));
  std::vector<std::unique_ptr<testing::Process>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(std::make_unique<testing::Process>(
        std::vector<std::string>{
            NCCL_PLUGIN_DRIVER, absl::StrCat("--plugin=", NCCL_PLUGIN_PATH), "--version=6",
            "--mode=straggler", absl::StrCat("--rank=", r), absl::StrCat("--nranks=", kRanks),
            absl::StrCat("--collectives=", kCollectives), absl::StrCat("--late-rank=", kLateRank),
            absl::StrCat("--t0=", t0), "--socket=" + socket, "--env=RINGSIDE_JOB_ID=llm-pod",
            absl::StrCat("--env=POD_NAME=llm-pod-worker-", r), "--env=POD_NAMESPACE=ml-team"},
        dir.path()));
  }
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(ranks[r]->Wait(absl::Seconds(30)), 0) << "rank " << r << ":\n" << ranks[r]->Stderr();
    EXPECT_TRUE(absl::StrContains(ranks[r]->Stderr(),
                                  absl::StrCat("pod ml-team/llm-pod-worker-", r, ", records to")))
        << ranks[r]->Stderr();
  }
  ASSERT_TRUE(agg.WaitForStderr("opened: straggler", absl::Seconds(20))) << agg.Stderr();

  auto cli = [&](std::vector<std::string> args) { return d.Cli(std::move(args)); };

  // `ringside stragglers`: the flagged rank's row shows its pod as namespace/pod.
  testing::RunResult r = cli({"stragglers", "--job", "llm-pod"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // a rank is flagged
  std::printf("%s", r.out.c_str());
  EXPECT_TRUE(absl::StrContains(r.out, " POD ")) << r.out;
  std::string flagged_line;
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    if (absl::StrContains(line, " straggler")) flagged_line = std::string(line);
  }
  EXPECT_TRUE(absl::StrContains(flagged_line, "ml-team/llm-pod-worker-2")) << r.out;
  EXPECT_TRUE(absl::StrContains(flagged_line, "gpu-node-7")) << r.out;

  r = cli({"stragglers", "--job", "llm-pod", "-o", "json"});
  nlohmann::json ranks_json = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(ranks_json.is_array()) << r.out;
  ASSERT_EQ(ranks_json.size(), static_cast<size_t>(kRanks)) << r.out;
  for (const auto& rank : ranks_json) {
    const int64_t n = rank["rank"].get<int64_t>();
    EXPECT_EQ(rank["pod"], absl::StrCat("llm-pod-worker-", n)) << rank.dump();
    EXPECT_EQ(rank["namespace"], "ml-team") << rank.dump();
    EXPECT_EQ(rank["flagged"], n == kLateRank) << rank.dump();
  }

  // The incident: its entity names the pod, in JSON and in words.
  r = cli({"incidents", "--kind", "straggler", "-o", "json"});
  nlohmann::json incidents = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(incidents.is_array() && incidents.size() == 1) << r.out;
  const nlohmann::json& inc = incidents[0];
  EXPECT_EQ(inc["entity"]["rank"], "2") << inc.dump();
  EXPECT_EQ(inc["entity"]["pod"], "llm-pod-worker-2") << inc.dump();
  EXPECT_EQ(inc["entity"]["namespace"], "ml-team") << inc.dump();
  EXPECT_EQ(inc["entity"]["node"], "gpu-node-7") << inc.dump();
  EXPECT_TRUE(absl::StrContains(inc["summary"].get<std::string>(),
                                "rank 2 (pod ml-team/llm-pod-worker-2) of job llm-pod"))
      << inc.dump();
  const uint64_t id = inc["id"].get<uint64_t>();

  r = cli({"incidents", "--kind", "straggler"});
  std::printf("%s", r.out.c_str());
  EXPECT_TRUE(absl::StrContains(r.out, "on gpu-node-7 pod ml-team/llm-pod-worker-2")) << r.out;
  r = cli({"incident", absl::StrCat(id)});
  std::printf("%s", r.out.c_str());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "pod ml-team/llm-pod-worker-2")) << r.out;

  // Alertmanager's API gets pod and namespace as labels; the webhook's JSON has them in the entity.
  ASSERT_TRUE(Eventually([&] { return !AlertLabels(alertmanager, "RingsideStraggler").is_null(); }))
      << agg.Stderr();
  const nlohmann::json labels = AlertLabels(alertmanager, "RingsideStraggler");
  EXPECT_EQ(labels.value("pod", ""), "llm-pod-worker-2") << labels.dump();
  EXPECT_EQ(labels.value("namespace", ""), "ml-team") << labels.dump();
  EXPECT_EQ(labels.value("job", ""), "llm-pod") << labels.dump();
  EXPECT_EQ(labels.value("rank", ""), "2") << labels.dump();
  ASSERT_TRUE(Eventually([&] {
    for (const HttpReceiver::Request& req : hook.Accepted()) {
      if (absl::StrContains(req.body, "\"kind\":\"straggler\"")) return true;
    }
    return false;
  })) << agg.Stderr();
  for (const HttpReceiver::Request& req : hook.Accepted()) {
    auto j = nlohmann::json::parse(req.body, nullptr, false);
    if (j.is_discarded() || j["incident"].value("kind", "") != "straggler") continue;
    EXPECT_EQ(j["incident"]["entity"].value("pod", ""), "llm-pod-worker-2") << req.body;
    EXPECT_EQ(j["incident"]["entity"].value("namespace", ""), "ml-team") << req.body;
  }
  EXPECT_EQ(inc["entity"].count("cuda_device"), 0u) << "no CUDA library: no device";
  d.Stop();
}

// Two processes, each driving two GPUs (ranks 0, 1 on devices 0, 1 of the first; 2, 3 of the
// second); rank 1 (device 1 of the first process) arrives late at every AllReduce. Before format
// version 3 the two GPUs of a process were one worker: the second process's merged GPUs looked
// busy 0 % of the time, so no GPU could look slower than its peers and nothing was flagged.
TEST(PodIdentityTest, OneProcessDrivingTwoGpusIsTwoWorkersAndTheSlowGpuIsNamed) {
  Daemons d;
  ASSERT_TRUE(d.Start());
  constexpr int kGpusPerProcess = 2;
  constexpr int kLateGpuRank = 1;
  const int64_t t0 = absl::ToUnixNanos(absl::Now() - absl::Seconds(2));
  std::vector<std::unique_ptr<testing::Process>> procs;
  for (int p = 0; p < kRanks / kGpusPerProcess; ++p) {
    procs.push_back(std::make_unique<testing::Process>(
        std::vector<std::string>{
            NCCL_PLUGIN_DRIVER, absl::StrCat("--plugin=", NCCL_PLUGIN_PATH), "--version=6",
            "--mode=straggler", absl::StrCat("--rank=", p * kGpusPerProcess),
            absl::StrCat("--gpus=", kGpusPerProcess), absl::StrCat("--nranks=", kRanks),
            absl::StrCat("--collectives=", kCollectives),
            absl::StrCat("--late-rank=", kLateGpuRank), absl::StrCat("--t0=", t0),
            absl::StrCat("--preload-global=", FAKE_CUDART_PATH), "--socket=" + d.socket,
            "--env=RINGSIDE_JOB_ID=llm-jax", absl::StrCat("--env=POD_NAME=llm-jax-", p),
            "--env=POD_NAMESPACE=ml-team"},
        d.dir.path()));
  }
  for (size_t p = 0; p < procs.size(); ++p) {
    ASSERT_EQ(procs[p]->Wait(absl::Seconds(30)), 0) << "process " << p << ":\n"
                                                    << procs[p]->Stderr();
    for (int g = 0; g < kGpusPerProcess; ++g) {
      EXPECT_TRUE(absl::StrContains(procs[p]->Stderr(),
                                    absl::StrCat("cuda device ", g, " (cudaGetDevice)")))
          << procs[p]->Stderr();
    }
  }
  ASSERT_TRUE(d.agg->WaitForStderr("opened: straggler", absl::Seconds(20))) << d.agg->Stderr();

  testing::RunResult r = d.Cli({"incidents", "--kind", "straggler", "-o", "json"});
  nlohmann::json incidents = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(incidents.is_array() && incidents.size() == 1)
      << "only the slow GPU, not its sibling: " << r.out;
  const nlohmann::json& inc = incidents[0];
  EXPECT_EQ(inc["entity"]["rank"], "1") << inc.dump();
  EXPECT_EQ(inc["entity"]["cuda_device"], "1") << inc.dump();
  EXPECT_EQ(inc["entity"]["pod"], "llm-jax-0") << inc.dump();
  EXPECT_EQ(inc["entity"]["node"], "gpu-node-7") << inc.dump();
  EXPECT_TRUE(absl::StrContains(inc["summary"].get<std::string>(),
                                "rank 1 (cuda device 1, pod ml-team/llm-jax-0) of job llm-jax"))
      << inc.dump();
  r = d.Cli({"incidents", "--kind", "straggler"});
  std::printf("%s", r.out.c_str());
  EXPECT_TRUE(absl::StrContains(r.out, "on gpu-node-7 pod ml-team/llm-jax-0 cuda device 1"))
      << r.out;

  // Every GPU is a rank of its own in `ringside stragglers`; only rank 1 is flagged.
  r = d.Cli({"stragglers", "--job", "llm-jax", "-o", "json"});
  nlohmann::json ranks_json = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(ranks_json.is_array()) << r.out;
  ASSERT_EQ(ranks_json.size(), static_cast<size_t>(kRanks)) << r.out;
  for (const auto& rank : ranks_json) {
    EXPECT_EQ(rank["flagged"], rank["rank"].get<int64_t>() == kLateGpuRank) << rank.dump();
  }

  ASSERT_TRUE(Eventually([&] {
    return !AlertLabels(d.alertmanager, "RingsideStraggler").is_null();
  })) << d.agg->Stderr();
  const nlohmann::json labels = AlertLabels(d.alertmanager, "RingsideStraggler");
  EXPECT_EQ(labels.value("cuda_device", ""), "1") << labels.dump();
  EXPECT_EQ(labels.value("pod", ""), "llm-jax-0") << labels.dump();
  d.Stop();
}

}  // namespace
}  // namespace ringside
