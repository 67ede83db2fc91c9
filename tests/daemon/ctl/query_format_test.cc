// The pieces of the `ringside` query subcommands that need no server: relative times and --since,
// tables, entity and change lines, the JSON shapes, and the cause-chain walk (cycles, missing
// causes, depth) against fixed protos and a fake fetcher.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/ctl/cause_chain.h"
#include "daemon/ctl/incident_text.h"
#include "daemon/ctl/link_text.h"
#include "daemon/ctl/query_client.h"
#include "daemon/ctl/query_json.h"
#include "daemon/ctl/relative_time.h"
#include "daemon/ctl/table.h"
#include "tests/daemon/ctl/fake_query_service.h"

namespace ringside::daemon::ctl {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);  // 2027-01-15T08:00:00Z

int64_t Ns(absl::Time t) { return absl::ToUnixNanos(t); }

std::map<uint64_t, v1::Incident> ById(const testing::FakeQueryData& d) {
  std::map<uint64_t, v1::Incident> m;
  for (const auto& i : d.incidents) m[i.id()] = i;
  return m;
}

TEST(RelativeTimeTest, CompactAndAgo) {
  EXPECT_EQ(CompactDuration(absl::ZeroDuration()), "0s");
  EXPECT_EQ(CompactDuration(absl::Milliseconds(999)), "0s");
  EXPECT_EQ(CompactDuration(absl::Seconds(45)), "45s");
  EXPECT_EQ(CompactDuration(absl::Seconds(192)), "3m12s");
  EXPECT_EQ(CompactDuration(absl::Hours(2) + absl::Minutes(5) + absl::Seconds(59)), "2h5m");
  EXPECT_EQ(CompactDuration(absl::Hours(76)), "3d4h");
  EXPECT_EQ(Ago(Ns(kNow - absl::Seconds(192)), kNow), "3m12s ago");
  EXPECT_EQ(Ago(Ns(kNow), kNow), "0s ago");
  EXPECT_EQ(Ago(Ns(kNow + absl::Milliseconds(300)), kNow), "0s ago");  // sub-second skew
  EXPECT_EQ(Ago(Ns(kNow + absl::Seconds(5)), kNow), "in 5s");
  EXPECT_EQ(Ago(0, kNow), "-");
}

TEST(RelativeTimeTest, Rfc3339) {
  EXPECT_EQ(Rfc3339(Ns(kNow)), "2027-01-15T08:00:00Z");
  EXPECT_EQ(Rfc3339(Ns(kNow + absl::Milliseconds(250))), "2027-01-15T08:00:00.250Z");
  EXPECT_EQ(Rfc3339(0), "");
}

TEST(RelativeTimeTest, ParseSince) {
  EXPECT_EQ(*ParseSince("90m", kNow), Ns(kNow - absl::Minutes(90)));
  EXPECT_EQ(*ParseSince("1h30m", kNow), Ns(kNow - absl::Minutes(90)));
  EXPECT_EQ(*ParseSince("2d", kNow), Ns(kNow - absl::Hours(48)));
  EXPECT_EQ(*ParseSince("1d12h", kNow), Ns(kNow - absl::Hours(36)));
  EXPECT_EQ(*ParseSince("2027-01-15T07:00:00Z", kNow), Ns(kNow - absl::Hours(1)));
  EXPECT_EQ(*ParseSince("2027-01-15T09:00:00+02:00", kNow), Ns(kNow - absl::Hours(1)));
  for (const char* bad :
       {"", "yesterday", "-5m", "2027-01-15", "5", "2030-01-01T00:00:00Z", "xd", "3dd"}) {
    absl::StatusOr<int64_t> r = ParseSince(bad, kNow);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    }
  }
  EXPECT_EQ(*ParsePositiveDuration("10m"), absl::Minutes(10));
  EXPECT_FALSE(ParsePositiveDuration("0s").ok());
  EXPECT_FALSE(ParsePositiveDuration("-1s").ok());
  EXPECT_FALSE(ParsePositiveDuration("inf").ok());
}

TEST(TableTest, AlignsColumnsWithoutTrailingBlanks) {
  Table t({"ID", "KIND", "SUMMARY"});
  t.RightAlign(0);
  t.AddRow({"12", "pause_storm", "long text"});
  t.AddRow({"3", "link_flapping"});  // missing cell: blank
  t.AddRow({"4", "a\tb\nc", "x", "dropped"});
  std::ostringstream out;
  t.Render(out);
  EXPECT_EQ(out.str(),
            "ID  KIND           SUMMARY\n"
            "12  pause_storm    long text\n"
            " 3  link_flapping\n"
            " 4  a b c          x\n");
}

TEST(TableTest, CellCutsAtCharacterBoundary) {
  EXPECT_EQ(Cell("abcdef", 4), "abc…");
  EXPECT_EQ(Cell("abc", 4), "abc");
  EXPECT_EQ(Cell("ééééé", 3), "éé…");
  EXPECT_EQ(Cell("a\x01z"), "a z");
}

TEST(IncidentTextTest, EntityAndHeadline) {
  testing::FakeQueryData d = testing::CannedCluster(kNow);
  auto by_id = ById(d);
  EXPECT_EQ(Headline(by_id[12]), "pause_storm node-b mlx5_0 prio 3");
  EXPECT_EQ(Headline(by_id[15]), "straggler rank 5 (job j1) on node-b");
  EXPECT_EQ(Headline(by_id[3]), "link_flapping node-a mlx5_1 port 1");
  EXPECT_EQ(Headline(by_id[20]), "job_slowdown job j2");
  EntityMap nvlink;
  nvlink["node"] = "n1";
  nvlink["gpu"] = "3";
  nvlink["link"] = "11";
  nvlink["zone"] = "z";
  EXPECT_EQ(EntityText(nvlink), "n1 gpu 3 link 11 zone=z");
  EntityMap netdev;
  netdev["node"] = "n1";
  netdev["netdev"] = "eth2";
  EXPECT_EQ(EntityText(netdev), "n1 eth2");
  EntityMap empty;
  EXPECT_EQ(EntityText(empty), "-");
  EntityMap straggler;  // with its Kubernetes pod
  straggler["job"] = "j1";
  straggler["rank"] = "5";
  straggler["node"] = "node-b";
  straggler["pod"] = "j1-worker-5";
  straggler["namespace"] = "train";
  EXPECT_EQ(EntityText(straggler), "rank 5 (job j1) on node-b pod train/j1-worker-5");
  straggler["cuda_device"] = "1";  // one GPU of a process that drives several
  EXPECT_EQ(EntityText(straggler), "rank 5 (job j1) on node-b pod train/j1-worker-5 cuda device 1");
  EXPECT_EQ(PodText("train", "j1-worker-5"), "train/j1-worker-5");
  EXPECT_EQ(PodText("", ""), "-");
  google::protobuf::RepeatedField<int64_t> ranks;
  for (int r : {7, 0, 1, 2, 3, 5, 3, 9, 10}) ranks.Add(r);
  EXPECT_EQ(RankRanges(ranks), "0-3,5,7,9-10");
}

TEST(IncidentTextTest, IncidentsTable) {
  testing::FakeQueryData d = testing::CannedCluster(kNow);
  google::protobuf::RepeatedPtrField<v1::Incident> list(d.incidents.begin(),
                                                        d.incidents.begin() + 3);
  std::ostringstream out;
  IncidentsTable(list, kNow).Render(out);
  EXPECT_EQ(out.str(),
            "ID  KIND           SEVERITY  STATE              ENTITY                     OPENED     "
            "UPDATED   SUMMARY\n"
            "12  pause_storm    critical  open               node-b mlx5_0 prio 3       10m0s ago  "
            "1m0s ago  rx pause 82% of the time on prio 3; spreads to node-c mlx5_1\n"
            "15  straggler      warning   open               rank 5 (job j1) on node-b  8m0s ago   "
            "30s ago   rank 5 arrived last in 36 of the last 40 collectives\n"
            " 3  link_flapping  warning   resolved 2h0m ago  node-a mlx5_1 port 1       3h0m ago   "
            "2h0m ago  4 down→up cycles in 10m\n");
}

TEST(IncidentTextTest, ChangeLine) {
  testing::FakeQueryData d = testing::CannedCluster(kNow);
  auto by_id = ById(d);
  v1::IncidentChange c;
  c.set_type(v1::IncidentChange::OPENED);
  c.set_initial(true);
  *c.mutable_incident() = by_id[12];
  EXPECT_EQ(
      ChangeLine(c, kNow),
      "2027-01-15T07:50:00Z  OPEN      #12 critical pause_storm node-b mlx5_0 prio 3: rx pause "
      "82% of the time on prio 3; spreads to node-c mlx5_1");
  c.set_type(v1::IncidentChange::RESOLVED);
  c.set_initial(false);
  *c.mutable_incident() = by_id[3];
  EXPECT_EQ(ChangeLine(c, kNow),
            "2027-01-15T06:00:00Z  RESOLVED  #3 warning link_flapping node-a mlx5_1 port 1: no "
            "transition for 10m0s");
}

TEST(QueryJsonTest, IncidentShapeIsStable) {
  testing::FakeQueryData d = testing::CannedCluster(kNow);
  auto by_id = ById(d);
  nlohmann::json j = IncidentJson(by_id[3]);
  EXPECT_EQ(j.dump(),
            R"({"affected":[],"causes":[],"entity":{"device":"mlx5_1","node":"node-a","port":"1",)"
            R"("source":"infiniband"},"evidence":{},"id":3,)"
            R"("key":"6a4620f2bdc39752","kind":"link_flapping","open":false,)"
            R"("opened":"2027-01-15T05:00:00Z","resolution":"no transition for 10m0s",)"
            R"("resolved":"2027-01-15T06:00:00Z","revision":1,"severity":"warning",)"
            R"("summary":"4 down→up cycles in 10m","updated":"2027-01-15T06:00:00Z",)"
            R"("where":null})");
  j = IncidentJson(by_id[15]);
  EXPECT_TRUE(j["resolved"].is_null());
  EXPECT_EQ(j["causes"][0]["incident_id"], 12);
  EXPECT_EQ(j["causes"][0]["scope"], "node");
  EXPECT_DOUBLE_EQ(j["evidence"]["score"].get<double>(), 0.9);
  j = IncidentJson(by_id[12]);
  EXPECT_EQ(j["affected"][0]["ranks"], nlohmann::json({7, 4, 5, 6}));
  EXPECT_EQ(j["affected"][0]["pods"], nlohmann::json({"train/j1-worker-4", "train/j1-worker-5"}));
}

TEST(QueryJsonTest, OtherShapes) {
  testing::FakeQueryData d = testing::CannedCluster(kNow);
  nlohmann::json link = LinkJson(d.links[2]);
  EXPECT_EQ(link["open_incident_ids"], nlohmann::json({12}));
  EXPECT_EQ(link["last_seen"], "2027-01-15T07:59:59Z");
  EXPECT_EQ(link["healthy"], false);
  nlohmann::json node = NodeJson(d.nodes["node-a"]);
  EXPECT_TRUE(node["rates"][0]["priority"].is_null());
  EXPECT_DOUBLE_EQ(node["rates"][0]["rate_per_second"].get<double>(), 1.25e9);
  v1::NodeStatus n = d.nodes["node-a"];
  n.mutable_rates(0)->set_rate_per_second(std::nan(""));
  EXPECT_TRUE(NodeJson(n)["rates"][0]["rate_per_second"].is_null());
  nlohmann::json rank = RankScoreJson(d.stragglers[1]);
  EXPECT_TRUE(rank["incident_id"].is_null());
  EXPECT_TRUE(rank["pod"].is_null());
  EXPECT_EQ(RankScoreJson(d.stragglers[0])["pod"], "j1-worker-5");
  EXPECT_EQ(RankScoreJson(d.stragglers[0])["namespace"], "train");
  EXPECT_EQ(RankScoreJson(d.stragglers[0])["incident_id"], 15);
  nlohmann::json status = StatusJson(d.status);
  EXPECT_EQ(status["open_incidents_by_kind"]["pause_storm"], 1);
  EXPECT_TRUE(status["now"].is_null());
  v1::IncidentChange c;
  c.set_type(v1::IncidentChange::RESOLVED);
  EXPECT_EQ(ChangeJson(c)["type"], "resolved");
}

class CauseChainTest : public ::testing::Test {
 protected:
  CauseChainTest() : incidents_(ById(testing::CannedCluster(kNow))) {}
  IncidentFetcher Fetcher() {
    return [this](uint64_t id) -> absl::StatusOr<v1::Incident> {
      ++fetches_[id];
      auto it = incidents_.find(id);
      if (it == incidents_.end()) return absl::NotFoundError("no such incident");
      return it->second;
    };
  }
  std::map<uint64_t, v1::Incident> incidents_;
  std::map<uint64_t, int> fetches_;
};

TEST_F(CauseChainTest, StragglerToPauseStorm) {
  std::vector<CausePath> paths = ResolveCauseChains(incidents_[15], Fetcher());
  ASSERT_EQ(paths.size(), 1u);
  ASSERT_EQ(paths[0].size(), 1u);
  ASSERT_TRUE(paths[0][0].incident.has_value());
  EXPECT_EQ(paths[0][0].incident->id(), 12u);
  EXPECT_EQ(ChainText(incidents_[15], paths[0]),
            "straggler rank 5 (job j1) on node-b ← pause_storm node-b mlx5_0 prio 3 (#12)");
  EXPECT_TRUE(ResolveCauseChains(incidents_[12], Fetcher()).empty());
}

TEST_F(CauseChainTest, CycleAndMissingCause) {
  std::vector<CausePath> paths = ResolveCauseChains(incidents_[20], Fetcher());
  ASSERT_EQ(paths.size(), 2u);
  ASSERT_EQ(paths[0].size(), 2u);
  EXPECT_EQ(paths[0][1].note, "cycle");
  EXPECT_EQ(ChainText(incidents_[20], paths[0]),
            "job_slowdown job j2 ← congestion node-c mlx5_0 (#21) ← job_slowdown job j2 (#20, "
            "cycle)");
  EXPECT_EQ(ChainText(incidents_[20], paths[1]),
            "job_slowdown job j2 ← link_down node-d (#99, not found)");
  EXPECT_EQ(fetches_[20], 0);  // the root is never fetched again
  EXPECT_EQ(fetches_[21], 1);
}

TEST_F(CauseChainTest, LongChainsAreCutAndFetchesCached) {
  // 1 ← 2 ← ... ← 30, and every incident also names 2 as a cause (fetched once).
  incidents_.clear();
  for (uint64_t id = 1; id <= 30; ++id) {
    v1::Incident i;
    i.set_id(id);
    i.set_kind("link_down");
    if (id < 30) i.add_causes()->set_incident_id(id + 1);
    incidents_[id] = i;
  }
  std::vector<CausePath> paths = ResolveCauseChains(incidents_[1], Fetcher(), {.max_depth = 5});
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(paths[0].size(), 5u);
  EXPECT_EQ(paths[0].back().note, "depth limit");
  for (const auto& [id, n] : fetches_) EXPECT_EQ(n, 1) << id;

  // A host cause ends the chain without a fetch.
  v1::Incident s = incidents_[1];
  s.clear_causes();
  v1::CauseLink* host = s.add_causes();
  host->set_kind("host");
  (*host->mutable_entity())["node"] = "node-a";
  paths = ResolveCauseChains(s, Fetcher());
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(StepText(paths[0][0]), "host node-a");
}

// A GPU incident names its GPU by NVML index and bus id; a host cause its cgroup; a cause's
// evidence (what was checked) reaches -o json.
TEST(IncidentTextTest, GpuAndHostCauses) {
  EntityMap gpu;
  gpu["node"] = "node-05";
  gpu["gpu"] = "3";
  gpu["pci_bus_id"] = "0000:1a:00.0";
  EXPECT_EQ(EntityText(gpu), "node-05 gpu 3 (0000:1a:00.0)");
  EntityMap cgroup;
  cgroup["node"] = "node-05";
  cgroup["cgroup"] = "/kubepods/pod-1";
  EXPECT_EQ(EntityText(cgroup), "node-05 cgroup /kubepods/pod-1");
  v1::CauseLink host;
  host.set_kind("host");
  (*host.mutable_evidence())["gpu_incidents"] = 0;
  (*host.mutable_evidence())["cgroup_throttled_share"] = 0.02;
  nlohmann::json j = CauseLinkJson(host);
  EXPECT_DOUBLE_EQ(j["evidence"]["cgroup_throttled_share"].get<double>(), 0.02);
  EXPECT_EQ(j["evidence"]["gpu_incidents"], 0);
  EXPECT_TRUE(CauseLinkJson(v1::CauseLink())["evidence"].empty());
}

TEST(ConnectionTest, FlagsAndEnvironment) {
  absl::StatusOr<ParsedArgs> args = ParseArgs({}, ConnectionFlagSpecs());
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(ConnectionFromArgs(*args, nullptr)->target, "localhost:9472");
  EXPECT_EQ(ConnectionFromArgs(*args, "agg:1")->target, "agg:1");
  EXPECT_EQ(ConnectionFromArgs(*args, nullptr)->timeout, absl::Seconds(10));
  args = ParseArgs({"--aggregator=flag:2", "--timeout", "500ms", "-ojson"}, ConnectionFlagSpecs());
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(ConnectionFromArgs(*args, "agg:1")->target, "flag:2");
  EXPECT_EQ(ConnectionFromArgs(*args, nullptr)->timeout, absl::Milliseconds(500));
  EXPECT_EQ(*OutputFromArgs(*args), OutputFormat::kJson);
  args = ParseArgs({"--timeout=soon", "-o", "yaml"}, ConnectionFlagSpecs());
  EXPECT_FALSE(ConnectionFromArgs(*args, nullptr).ok());
  EXPECT_FALSE(OutputFromArgs(*args).ok());
  // Plaintext to a remote aggregator is refused by the shared TLS policy.
  args = ParseArgs({"--aggregator=10.1.2.3:9472"}, ConnectionFlagSpecs());
  absl::StatusOr<std::unique_ptr<QueryClient>> c =
      QueryClient::Connect(*ConnectionFromArgs(*args, nullptr));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--tls-ca"), std::string::npos) << c.status();
}

}  // namespace
}  // namespace ringside::daemon::ctl
