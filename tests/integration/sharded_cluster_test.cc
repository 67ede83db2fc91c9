// Issue #14 end to end, on loopback, with real processes: 2 shards × 2 aggregator replicas, 8 real
// agents (the simulator's nodes: sysfs trees, ethtool dumps, the fake NVML), a 16-rank job driving
// the real NCCL plugin, and a real 2-node Alertmanager 0.25 cluster (--cluster.peer on 127.0.0.1)
// routing every alert to a webhook receiver of this test.
//
// A pause storm on a node of shard A slows a rank of a job whose collective records go to shard B:
// B's straggler names A's storm as its cause (cross-shard attribution) and A's storm lists the job.
// One replica of each shard is SIGKILLed while the incidents are open and comes back 20 s later
// with an empty state dir. Throughout, the CLI asked across all four lists each incident once; at
// the end the receiver got exactly one firing and one resolved notification per incident, and the
// surviving replicas lost nothing (no agent dropped or resent anything to them, no gap in any
// rank's collective records in their journals).
#include <signal.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "analysis/shard_map.h"
#include "analysis/topology.h"
#include "daemon/aggregator/alerts/http_client.h"
#include "nlohmann/json.hpp"
#include "sim/cluster.h"
#include "sim/scenario.h"
#include "sim/sim_names.h"
#include "sim/topology_writer.h"
#include "tests/aggregator/alerts/alertmanager_process.h"
#include "tests/aggregator/alerts/http_receiver.h"
#include "tests/testing/eventually.h"
#include "tests/testing/process.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using testing::BinaryPath;
using testing::HttpReceiver;
using json = nlohmann::json;

constexpr int kShards = 2;
constexpr int kReplicas = 2;
using testing::Alertmanager;
using testing::FreePort;
using testing::Get;

// One peer of a 2-node Alertmanager cluster, every alert to the test's receiver.
//
// group_interval (6 s) is longer than the peers' wait (--cluster.peer-timeout 3 s × position 1),
// as in Alertmanager's defaults (5 m and 15 s): a group's timer is re-armed before its flush, so
// both peers then flush each group at the same instants and the second one, checking the
// notification log 3 s later, finds the first one's notification of the same state. With a
// group_interval shorter than the wait (1 s here once gave that), the second peer flushes a
// snapshot taken up to 15 s earlier: it re-sends "firing" after the first peer sent "resolved",
// then "resolved" again — duplicates Alertmanager makes by itself (docs/scale.md).
std::unique_ptr<Alertmanager> ClusterPeer(const std::string& dir, const std::string& notify_url,
                                          int cluster_port, int other_cluster_port) {
  return std::make_unique<Alertmanager>(
      dir, notify_url,
      std::vector<std::string>{absl::StrCat("--cluster.listen-address=127.0.0.1:", cluster_port),
                               absl::StrCat("--cluster.peer=127.0.0.1:", other_cluster_port),
                               "--cluster.peer-timeout=3s"},
      "6s");
}

// The node and job layout: which shard each node's counters go to (by its leaf), and a job id
// that hashes to the other shard than the storm's node.
struct Layout {
  int nodes_per_leaf = 0;
  int storm_node = -1;
  int storm_shard = -1;
  std::string job;
};

std::optional<Layout> ChooseLayout(sim::Scenario s) {
  absl::StatusOr<analysis::ShardMap> map =
      analysis::ShardMap::Parse("shard-0 a:1 b:1\nshard-1 c:1 d:1\n");
  if (!map.ok()) return std::nullopt;
  for (int per_leaf : {4, 2, 1}) {
    s.nodes_per_leaf = per_leaf;
    absl::StatusOr<analysis::Topology> topo =
        analysis::Topology::Parse(sim::IbnetdiscoverTopology(s));
    if (!topo.ok()) return std::nullopt;
    std::set<size_t> used;
    for (int n = 0; n < s.nodes; ++n) used.insert(map->ShardOfNode(s.NodeName(n), &*topo));
    if (used.size() < 2) continue;  // the job must span both shards
    Layout l;
    l.nodes_per_leaf = per_leaf;
    l.storm_node = 1;
    l.storm_shard = static_cast<int>(map->ShardOfNode(s.NodeName(1), &*topo));
    for (int j = 0; j < 100; ++j) {
      const std::string job = absl::StrCat("llm-pretrain-", j);
      if (static_cast<int>(map->ShardOfJob(job)) != l.storm_shard) {
        l.job = job;
        return l;
      }
    }
  }
  return std::nullopt;
}

struct Notification {
  std::string key, kind, status;
};

std::vector<Notification> Notifications(const HttpReceiver& r) {
  std::vector<Notification> out;
  for (const HttpReceiver::Request& req : r.Accepted()) {
    json j = json::parse(req.body, nullptr, false);
    if (!j.is_object() || !j.contains("alerts")) continue;
    for (const json& a : j["alerts"]) {
      Notification n;
      n.status = a.value("status", "");
      n.key = a["labels"].value("ringside_incident_key", "");
      n.kind = a["labels"].value("kind", a["labels"].value("alertname", ""));
      out.push_back(n);
    }
  }
  return out;
}

class ShardedClusterTest : public ::testing::Test {
 protected:
  // GET /api/v1/incidents of one aggregator, parsed ("incidents": [...]); empty when down.
  json Incidents(int shard, int replica) {
    std::optional<std::string> body =
        Get(cluster_->http_port(shard, replica), "/api/v1/incidents?limit=1000");
    if (!body) return json::array();
    json j = json::parse(*body, nullptr, false);
    if (j.is_object() && j.contains("incidents")) return j["incidents"];
    if (j.is_array()) return j;
    return json::array();
  }
  static std::optional<json> FindKind(const json& incidents, const std::string& kind,
                                      bool open_only = true) {
    for (const json& i : incidents) {
      if (i.value("kind", "") != kind) continue;
      if (open_only && i.contains("resolved") && !i["resolved"].is_null()) continue;
      return i;
    }
    return std::nullopt;
  }
  // Steps the cluster (as ringside-sim's runner does) until `pred` or `until` (simulation time).
  template <typename Pred>
  bool RunUntil(absl::Duration until, Pred pred) {
    while (true) {
      const absl::Duration t = absl::Now() - cluster_->t0();
      cluster_->Step(t);
      if (pred()) return true;
      if (t >= until) return false;
      absl::SleepFor(absl::Milliseconds(250));
    }
  }
  void RunFor(absl::Duration until) {
    RunUntil(until, [] { return false; });
  }
  // `ringside incidents` across all four aggregators: the keys it prints, with how often.
  std::map<std::string, int> CliKeys(std::string* out_text) {
    std::vector<std::string> targets;
    for (int k = 0; k < kShards; ++k) {
      for (int r = 0; r < kReplicas; ++r) {
        targets.push_back(absl::StrCat("127.0.0.1:", cluster_->grpc_port(k, r)));
      }
    }
    testing::RunResult res =
        testing::Run({BinaryPath("daemon/ringside"), "incidents",
                      "--aggregator=" + absl::StrJoin(targets, ","), "--timeout=3s", "-o", "json"},
                     "", absl::Seconds(30));
    *out_text = res.out + res.err;
    std::map<std::string, int> keys;
    json j = json::parse(res.out, nullptr, false);
    const json& list = j.is_object() && j.contains("incidents") ? j["incidents"] : j;
    if (!list.is_array()) return keys;
    for (const json& i : list) ++keys[i.value("key", "")];
    return keys;
  }
  void ExpectEachIncidentOnce(const std::string& when) {
    std::string text;
    std::map<std::string, int> keys = CliKeys(&text);
    EXPECT_FALSE(keys.empty()) << when << ": " << text;
    for (const auto& [key, n] : keys) {
      EXPECT_FALSE(key.empty()) << when << ": " << text;
      EXPECT_EQ(n, 1) << when << ": incident " << key << " listed " << n << " times\n" << text;
    }
  }

  testing::TempDir dir_;
  sim::Scenario scenario_;
  std::unique_ptr<sim::Cluster> cluster_;
};

TEST_F(ShardedClusterTest, AStormOnShardACausesAStragglerOnShardBAndEachIsPagedOnceThroughRestarts) {
  if (access(testing::kAlertmanagerBinary, X_OK) != 0) {
    GTEST_SKIP() << testing::kAlertmanagerBinary
                 << " is not installed (Debian prometheus-alertmanager)";
  }
  scenario_.name = "sharded";
  scenario_.nodes = 8;
  scenario_.gpus = 2;
  scenario_.nvlinks = 2;
  scenario_.interval = absl::Seconds(1);
  scenario_.background_noise = false;
  scenario_.compute = absl::Milliseconds(80);
  scenario_.collective = absl::Milliseconds(10);
  scenario_.seed = 14;
  std::optional<Layout> layout = ChooseLayout(scenario_);
  ASSERT_TRUE(layout.has_value()) << "no node layout spans both shards";
  scenario_.nodes_per_leaf = layout->nodes_per_leaf;
  scenario_.job_id = layout->job;
  const int storm_shard = layout->storm_shard;
  const int job_shard = 1 - storm_shard;
  // The storm: node-02's rail 1 sends pauses from 8 s to 85 s; the rank on that rail (global rank
  // 3) computes 60 % slower meanwhile. (Far from the straggler's critical threshold, a 20 % wait
  // of the others: near it, two replicas can judge its severity differently, and a severity
  // label that differs is another alert to Alertmanager — docs/scale.md, "Failure modes".)
  sim::FaultSpec storm;
  storm.kind = sim::FaultKind::kPauseStorm;
  storm.node = layout->storm_node;
  storm.device = sim::RailDevice(1);
  storm.rank = layout->storm_node * scenario_.gpus + 1;
  storm.slowdown_pct = 60;
  storm.start = absl::Seconds(8);
  storm.duration = absl::Seconds(77);
  scenario_.faults.push_back(storm);
  scenario_.duration = absl::Seconds(200);

  HttpReceiver hook;
  const int c1 = FreePort(), c2 = FreePort();
  std::unique_ptr<Alertmanager> am1 = ClusterPeer(dir_.path() + "/am1", hook.url(), c1, c2);
  std::unique_ptr<Alertmanager> am2 = ClusterPeer(dir_.path() + "/am2", hook.url(), c2, c1);
  ASSERT_TRUE(testing::Eventually([&] { return am1->ClusterReady(2) && am2->ClusterReady(2); },
                                  absl::Seconds(60), absl::Milliseconds(200)))
      << am1->Stderr() << am2->Stderr();
  scenario_.aggregator_args = {"--alertmanager-url=" + am1->url() + "," + am2->url(),
                               "--alert-resend-interval=5s", "--alert-min-firing=10s"};

  sim::ClusterOptions co;
  co.agent_bin = BinaryPath("daemon/ringside-agent");
  co.aggregator_bin = BinaryPath("daemon/ringside-aggregator");
  co.plugin = BinaryPath("collectors/nccl_plugin/libringside_nccl.so");
  co.nvml_library = BinaryPath("sim/nvml/libnvidia-ml.so.1");
  co.work_dir = dir_.path() + "/cluster";
  std::filesystem::create_directories(co.work_dir);
  co.shards = kShards;
  co.replicas = kReplicas;
  absl::StatusOr<std::unique_ptr<sim::Cluster>> c = sim::Cluster::Start(scenario_, co);
  ASSERT_TRUE(c.ok()) << c.status();
  cluster_ = *std::move(c);
  const std::string storm_node = scenario_.NodeName(layout->storm_node);
  const std::string slow_rank = absl::StrCat(storm.rank);

  // 1. The straggler on shard B names the storm on shard A; A's storm lists the job.
  std::string storm_key;
  ASSERT_TRUE(RunUntil(absl::Seconds(45), [&] {
    std::optional<json> st = FindKind(Incidents(storm_shard, 0), "pause_storm");
    std::optional<json> sg = FindKind(Incidents(job_shard, 0), "straggler");
    if (!st || !sg || !sg->contains("causes") || (*sg)["causes"].empty()) return false;
    const json& cause = (*sg)["causes"][0];
    if (cause.value("kind", "") != "pause_storm") return false;
    storm_key = st->value("key", "");
    if (!st->contains("affected") || (*st)["affected"].empty()) return false;
    return true;
  })) << "shard " << storm_shard << " (storm):\n" << Incidents(storm_shard, 0).dump(1)
      << "\nshard " << job_shard << " (job):\n" << Incidents(job_shard, 0).dump(1)
      << "\n" << cluster_->aggregator_log(job_shard, 0);
  {
    std::optional<json> sg = FindKind(Incidents(job_shard, 0), "straggler");
    const json& cause = (*sg)["causes"][0];
    EXPECT_EQ((*sg)["entity"].value("rank", ""), slow_rank);
    EXPECT_EQ((*sg)["entity"].value("node", ""), storm_node);
    EXPECT_EQ(cause.value("shard", ""), absl::StrCat("shard-", storm_shard));
    EXPECT_EQ(cause.value("key", ""), storm_key);
    std::optional<json> st = FindKind(Incidents(storm_shard, 0), "pause_storm");
    EXPECT_EQ((*st)["entity"].value("node", ""), storm_node);
    const json& affected = (*st)["affected"][0];
    EXPECT_EQ(affected.value("job", ""), scenario_.job_id);
    bool has_rank = false;
    for (const json& r : affected["ranks"]) has_rank = has_rank || r.dump() == slow_rank;
    EXPECT_TRUE(has_rank) << st->dump(1);
    // The other shard's replica computes the same.
    std::optional<json> sg2 = FindKind(Incidents(job_shard, 1), "straggler");
    ASSERT_TRUE(sg2.has_value());
    EXPECT_EQ(sg2->value("key", ""), sg->value("key", ""));
  }
  ExpectEachIncidentOnce("before the kills");

  // 2. One replica of each shard killed while the incidents are open (replica b of the storm's
  // shard, replica a of the job's), back 20 s later with an empty state dir.
  const int dead_storm = 1, dead_job = 0;
  cluster_->KillAggregator(storm_shard, dead_storm);
  cluster_->KillAggregator(job_shard, dead_job);
  const absl::Duration killed_at = absl::Now() - cluster_->t0();
  RunFor(killed_at + absl::Seconds(5));
  ExpectEachIncidentOnce("with one replica of each shard down");
  RunFor(killed_at + absl::Seconds(20));
  ASSERT_TRUE(cluster_->RestartAggregator(storm_shard, dead_storm, /*wipe_state=*/true).ok());
  ASSERT_TRUE(cluster_->RestartAggregator(job_shard, dead_job, /*wipe_state=*/true).ok());
  // The replaced replicas took the open incidents over from their peers: same keys.
  ASSERT_TRUE(RunUntil(absl::Seconds(80), [&] {
    std::optional<json> st = FindKind(Incidents(storm_shard, dead_storm), "pause_storm");
    std::optional<json> sg = FindKind(Incidents(job_shard, dead_job), "straggler");
    return st && sg && st->value("key", "") == storm_key && !(*sg)["causes"].empty() &&
           (*sg)["causes"][0].value("key", "") == storm_key;
  })) << Incidents(storm_shard, dead_storm).dump(1) << "\n"
      << Incidents(job_shard, dead_job).dump(1);
  ExpectEachIncidentOnce("after the replaced replicas came back");

  // 3. The storm ends at 85 s; wait until every replica has resolved everything, then long
  // enough for the resolution to be notified (group_interval) and for the second Alertmanager
  // peer's would-be duplicate (its peer position × peer timeout later).
  ASSERT_TRUE(RunUntil(absl::Seconds(170), [&] {
    for (int k = 0; k < kShards; ++k) {
      for (int r = 0; r < kReplicas; ++r) {
        const json list = Incidents(k, r);
        if (list.empty()) return false;
        for (const json& i : list) {
          if (!i.contains("resolved") || i["resolved"].is_null()) return false;
        }
      }
    }
    return true;
  })) << Incidents(storm_shard, 0).dump(1) << "\n" << Incidents(job_shard, 0).dump(1);
  const absl::Duration resolved_at = absl::Now() - cluster_->t0();
  RunFor(resolved_at + absl::Seconds(20));
  ExpectEachIncidentOnce("after everything resolved");

  // Exactly one firing and one resolved notification per incident.
  std::map<std::string, std::map<std::string, int>> by_key;  // key → status → count
  std::map<std::string, std::string> kind_of;
  for (const Notification& n : Notifications(hook)) {
    ++by_key[n.key][n.status];
    kind_of[n.key] = n.kind;
  }
  ASSERT_TRUE(by_key.count(storm_key)) << "the storm was never paged";
  bool straggler_paged = false;
  for (const auto& [key, counts] : by_key) {
    EXPECT_FALSE(key.empty());
    EXPECT_EQ(counts.count("firing") ? counts.at("firing") : 0, 1)
        << kind_of[key] << " " << key << " paged firing more or less than once";
    EXPECT_EQ(counts.count("resolved") ? counts.at("resolved") : 0, 1)
        << kind_of[key] << " " << key << " resolved more or less than once";
    straggler_paged = straggler_paged || kind_of[key].find("traggler") != std::string::npos;
  }
  EXPECT_TRUE(straggler_paged);
  if (HasFailure()) {
    for (const HttpReceiver::Request& req : hook.Accepted()) {
      json j = json::parse(req.body, nullptr, false);
      if (!j.is_object()) continue;
      for (const json& a : j["alerts"]) {
        std::cerr << "notification from " << j.value("externalURL", "?") << ": "
                  << a.value("status", "") << " " << a["labels"].dump() << " startsAt "
                  << a.value("startsAt", "") << " endsAt " << a.value("endsAt", "") << "\n";
      }
    }
  }

  // 4. Nothing lost in the surviving replicas: no agent dropped or resent anything to them, and
  // everything sent was acknowledged.
  std::set<std::string> survivors = {
      absl::StrCat("127.0.0.1:", cluster_->grpc_port(storm_shard, 1 - dead_storm)),
      absl::StrCat("127.0.0.1:", cluster_->grpc_port(job_shard, 1 - dead_job))};
  int checked = 0;
  for (int port : cluster_->metrics_ports()) {
    std::optional<std::string> m = Get(port, "/metrics");
    ASSERT_TRUE(m.has_value());
    const testing::PromText prom = testing::ParsePromText(*m);
    for (const testing::PromSample& s : prom.samples) {
      auto agg = s.labels.find("aggregator");
      if (agg == s.labels.end() || !survivors.count(agg->second)) continue;
      if (s.name == "ringside_agent_upload_dropped_total" ||
          s.name == "ringside_agent_upload_messages_resent_total" ||
          s.name == "ringside_agent_upload_reconnects_total") {
        EXPECT_EQ(s.value, 0) << s.name << " " << agg->second << " on agent port " << port;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
  cluster_->Stop();
  // No gap in any rank's collective records in the job shard's surviving journal.
  const std::string survivor_dir = absl::StrCat(co.work_dir, "/aggregator-", job_shard, "-",
                                                dead_job == 0 ? "b" : "a");
  testing::RunResult dump = testing::Run(
      {BinaryPath("daemon/ringside-aggregator"), "--dump-journal", "--state-dir=" + survivor_dir},
      "", absl::Seconds(60));
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  std::map<std::string, std::set<uint64_t>> seqs;  // rank/comm → record seqs
  size_t records = 0;
  for (absl::string_view line : absl::StrSplit(dump.out, '\n')) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_object() || j.value("kind", "") != "collective") continue;
    const json& r = j["record"];
    uint64_t seq = 0;
    // uint64 fields are strings in proto3 JSON.
    ASSERT_TRUE(absl::SimpleAtoi(r.value("seq", std::string("x")), &seq)) << line;
    const std::string who = absl::StrCat(r.value("rank", 0), "/", r.value("comm_id", std::string()));
    EXPECT_TRUE(seqs[who].insert(seq).second) << "duplicate record " << who << " " << seq;
    ++records;
  }
  EXPECT_EQ(seqs.size(), static_cast<size_t>(scenario_.ranks()));
  EXPECT_GT(records, 1000u);
  for (const auto& [who, s] : seqs) {
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(*s.rbegin() - *s.begin() + 1, s.size()) << "a gap in the records of rank " << who;
  }
}

}  // namespace
}  // namespace ringside
