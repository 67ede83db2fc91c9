// `ringside` across several aggregators (daemon/ctl/fleet.h): the built binary against three
// in-process fakes of the Query API on 127.0.0.1 — two replicas of one shard (the same incidents,
// same keys, different local ids) and a second shard with other incidents. Each incident is listed
// once, `incident` finds it by key or id, an unreachable aggregator is a warning, none reachable
// is an error, and `watch` prints a change both replicas send once.
#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "analysis/incidents.h"
#include "daemon/ctl/fleet.h"
#include "daemon/ctl/fleet_merge.h"
#include "tests/daemon/ctl/fake_query_service.h"
#include "tests/testing/eventually.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

using testing::RunResult;

std::string Ringside() { return testing::BinaryPath("daemon/ringside"); }

using testing::CountOf;
using testing::Eventually;

v1::Incident ShardIncident(uint64_t id, const std::string& kind, const std::string& node,
                           absl::Time opened, bool open) {
  v1::Incident i;
  i.set_id(id);
  i.set_kind(kind);
  i.set_severity("critical");
  const std::map<std::string, std::string> entity = {
      {"node", node}, {"device", "mlx5_0"}, {"port", "1"}};
  for (const auto& [k, v] : entity) (*i.mutable_entity())[k] = v;
  i.set_opened_unix_nanos(absl::ToUnixNanos(opened));
  i.set_updated_unix_nanos(absl::ToUnixNanos(opened));
  if (!open) i.set_resolved_unix_nanos(absl::ToUnixNanos(opened));
  i.set_open(open);
  i.set_summary(absl::StrCat(kind, " on ", node));
  i.set_revision(1);
  i.set_key(analysis::StableIncidentKey(*analysis::ParseIncidentKind(kind), entity, opened));
  return i;
}

// Replica B: replica A's data under other local ids (+100), as a second aggregator fed the same
// agents numbers them.
testing::FakeQueryData Renumbered(testing::FakeQueryData d) {
  for (v1::Incident& i : d.incidents) {
    i.set_id(i.id() + 100);
    for (v1::CauseLink& c : *i.mutable_causes()) {
      if (c.incident_id() != 0) c.set_incident_id(c.incident_id() + 100);
    }
  }
  return d;
}

// Shard 1: node-x and node-y. Its #12 is not replica A's #12.
testing::FakeQueryData OtherShard(absl::Time now) {
  testing::FakeQueryData d;
  d.incidents = {ShardIncident(12, "link_down", "node-x", now - absl::Minutes(3), true),
                 ShardIncident(7, "congestion", "node-y", now - absl::Hours(1), false)};
  v1::LinkStatus l;
  l.set_node("node-x");
  l.set_source("infiniband");
  l.set_device("mlx5_0");
  l.set_port("1");
  l.set_state("down");
  l.set_last_seen_unix_nanos(absl::ToUnixNanos(now));
  d.links = {l};
  v1::NodeStatus x;
  x.set_node("node-x");
  x.set_last_seen_unix_nanos(absl::ToUnixNanos(now));
  x.set_agent_version("0.1.0");
  d.nodes["node-x"] = x;
  v1::RankScore r;
  r.set_job("j9");
  r.set_rank(3);
  r.set_node("node-y");
  r.set_comm("0x9");
  r.set_score(0.7);
  r.set_instances(10);
  d.stragglers = {r};
  d.status.set_nodes(2);
  d.status.set_links(1);
  d.status.set_unhealthy_links(1);
  d.status.add_jobs("j9");
  d.status.set_aggregator_version("test-0.1");
  return d;
}

class FleetCliTest : public ::testing::Test {
 protected:
  FleetCliTest()
      : now_(absl::Now()),
        a_(std::make_unique<testing::FakeQueryServer>(testing::CannedCluster(now_))),
        b_(std::make_unique<testing::FakeQueryServer>(Renumbered(testing::CannedCluster(now_)))),
        c_(std::make_unique<testing::FakeQueryServer>(OtherShard(now_))) {}

  std::string All() const {
    return absl::StrCat(a_->address(), ",", b_->address(), ",", c_->address());
  }
  RunResult Cli(std::vector<std::string> args, const std::string& aggregators) {
    std::vector<std::string> argv = {Ringside()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--aggregator=" + aggregators);
    argv.push_back("--timeout=3s");
    return testing::Run(argv, "", absl::Seconds(30));
  }
  // The key of replica A's incident `id`.
  std::string KeyOf(uint64_t id) {
    for (const v1::Incident& i : testing::CannedCluster(now_).incidents) {
      if (i.id() == id) return i.key();
    }
    return "";
  }

  absl::Time now_;
  std::unique_ptr<testing::FakeQueryServer> a_, b_, c_;
  testing::TempDir tmp_;
};

TEST_F(FleetCliTest, IncidentsListsEachIncidentOnceWithItsKey) {
  RunResult r = Cli({"incidents"}, All());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 8u) << r.out;  // header, 5 of the replicated shard, 2 of the other
  EXPECT_TRUE(absl::StartsWith(lines[0], "ID  KEY               KIND")) << r.out;
  // Newest first across shards: #15 (30s ago), #12 (1m), #20 (2m), node-x's #12 (3m), ...
  EXPECT_TRUE(absl::StartsWith(lines[1], absl::StrCat("15  ", KeyOf(15), "  straggler"))) << r.out;
  EXPECT_TRUE(absl::StrContains(lines[4], "link_down")) << r.out;
  EXPECT_TRUE(absl::StrContains(lines[4], "node-x")) << r.out;
  for (uint64_t id : {15, 12, 3, 20, 21}) {
    EXPECT_EQ(CountOf(r.out, KeyOf(id)), 1) << id << "\n" << r.out;
  }
  EXPECT_EQ(CountOf(r.out, "#"), 0);

  r = Cli({"incidents", "-o", "json"}, All());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 7u) << r.out;
  std::set<std::string> keys;
  for (const auto& i : j) keys.insert(i["key"].get<std::string>());
  EXPECT_EQ(keys.size(), 7u);

  // --limit applies to the merged list; --open exits 1 when one is open anywhere.
  r = Cli({"incidents", "--limit", "3"}, All());
  EXPECT_EQ(CountOf(r.out, "\n"), 4) << r.out;
  r = Cli({"incidents", "--open", "--kind", "link_down"}, All());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "node-x")) << r.out;

  // The same replica twice (a list with a repeat) is asked once; one aggregator: no KEY column.
  r = Cli({"incidents"}, absl::StrCat(a_->address(), ",", a_->address()));
  EXPECT_TRUE(absl::StartsWith(r.out, "ID  KIND")) << r.out;
}

TEST_F(FleetCliTest, IncidentByKeyOrId) {
  const std::string key = KeyOf(15);
  RunResult r = Cli({"incident", key}, All());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, "Incident #15  straggler  warning  OPEN\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Key:       " + key)) << r.out;
  // Its cause chain is followed on the aggregator that had it.
  EXPECT_TRUE(absl::StrContains(r.out, "← pause_storm node-b mlx5_0 prio 3 (#12)")) << r.out;

  // Replica B's id for the same incident.
  r = Cli({"incident", "115"}, All());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, "Incident #115  straggler")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "(#112)")) << r.out;
  EXPECT_EQ(r.err, "");  // NOT_FOUND from the others is no warning

  r = Cli({"incident", "#7"}, All());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, "Incident #7  congestion  critical  RESOLVED")) << r.out;

  // #12 is replica A's pause storm and shard 1's link_down: ambiguous, with both keys.
  r = Cli({"incident", "12"}, All());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "ringside incident: #12 is ambiguous")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, KeyOf(12) + " pause_storm")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "link_down node-x")) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;

  r = Cli({"incident", "999"}, All());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "no incident #999 at any of the 3 aggregators")) << r.err;
  r = Cli({"incident", "00000000000000ff"}, All());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "no incident with key 00000000000000ff")) << r.err;
}

TEST_F(FleetCliTest, StatusLinksNodeStragglersMerge) {
  RunResult r = Cli({"status"}, All());
  EXPECT_EQ(r.exit_code, 1) << r.err;  // critical incidents, a stale node
  // Replicas A and B count once: 3 + 2 nodes, 3 + 1 links.
  EXPECT_TRUE(absl::StrContains(r.out, "Nodes:           5 (1 STALE)")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Links:           4 (3 unhealthy)")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Jobs:            j1, j2, j9")) << r.out;
  EXPECT_TRUE(absl::StrContains(
      r.out, "Open incidents:  4: job_slowdown 1, link_down 1, pause_storm 1, straggler 1"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "(aggregators " + a_->address())) << r.out << r.err;

  r = Cli({"links", "-o", "json"}, All());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 4u) << r.out;

  r = Cli({"node", "node-x"}, All());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, "Node node-x  current")) << r.out;
  EXPECT_EQ(r.err, "");
  r = Cli({"node", "node-q"}, All());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "none of the 3 aggregators has heard of node \"node-q\""))
      << r.err;

  r = Cli({"stragglers", "-o", "json"}, All());
  EXPECT_EQ(r.exit_code, 1) << r.err;  // rank 5 of j1 is flagged
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 4u) << r.out;  // j1 5, j9 3, j2 0, j1 2: each once
  EXPECT_EQ(j[1]["job"], "j9");
}

TEST_F(FleetCliTest, OneUnreachableIsAWarningAllUnreachableAnError) {
  const std::string gone = b_->address();
  b_->Shutdown();
  RunResult r = Cli({"incidents"}, All());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.err, "ringside: warning: cannot reach aggregator at " + gone))
      << r.err;
  EXPECT_EQ(CountOf(r.out, "\n"), 8) << r.out;  // A and shard 1 still answer in full
  r = Cli({"incidents", "--open"}, All());
  EXPECT_EQ(r.exit_code, 1) << r.err;  // the exit code as if all had answered
  for (const char* cmd : {"status", "links", "stragglers"}) {
    r = Cli({cmd}, All());
    EXPECT_NE(r.exit_code, 2) << cmd << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "ringside: warning: cannot reach aggregator at " + gone))
        << cmd << r.err;
  }

  a_->Shutdown();
  c_->Shutdown();
  for (const char* cmd : {"status", "incidents", "links", "stragglers", "watch"}) {
    const absl::Time start = absl::Now();
    r = Cli({cmd}, All());
    EXPECT_EQ(r.exit_code, 2) << cmd << r.out;
    EXPECT_TRUE(
        absl::StartsWith(r.err, absl::StrCat("ringside ", cmd, ": cannot reach aggregator at ")))
        << r.err;
    EXPECT_EQ(CountOf(r.err, "cannot reach aggregator at "), 3) << r.err;
    EXPECT_LT(absl::Now() - start, absl::Seconds(15)) << cmd;
  }
}

v1::IncidentChange Change(v1::IncidentChange::Type type, v1::Incident incident) {
  v1::IncidentChange c;
  c.set_type(type);
  *c.mutable_incident() = std::move(incident);
  return c;
}

TEST_F(FleetCliTest, WatchPrintsAChangeBothReplicasSendOnce) {
  const std::string ab = absl::StrCat(a_->address(), ",", b_->address());
  testing::Process watch(
      {Ringside(), "watch", "--aggregator", ab, "--node", "node-z", "--max-backoff", "500ms"},
      tmp_.path());
  ASSERT_TRUE(watch.WaitForStderr(
      absl::StrCat("watching incidents at ", a_->address(), ", ", b_->address()),
      absl::Seconds(10)))
      << watch.Stderr();
  ASSERT_TRUE(Eventually(
      [&] { return a_->service().open_watches() == 1 && b_->service().open_watches() == 1; }));
  const absl::Time opened = absl::Now();
  v1::Incident on_a = ShardIncident(40, "link_down", "node-z", opened, true);
  v1::Incident on_b = on_a;
  on_b.set_id(140);
  a_->service().Publish(Change(v1::IncidentChange::OPENED, on_a));
  b_->service().Publish(Change(v1::IncidentChange::OPENED, on_b));
  on_a.set_revision(2);
  on_a.set_open(false);
  on_a.set_resolved_unix_nanos(absl::ToUnixNanos(absl::Now()));
  on_b = on_a;
  on_b.set_id(140);
  b_->service().Publish(Change(v1::IncidentChange::RESOLVED, on_b));
  ASSERT_TRUE(Eventually([&] { return CountOf(watch.Stdout(), "RESOLVED") == 1; }))
      << watch.Stdout();
  a_->service().Publish(Change(v1::IncidentChange::RESOLVED, on_a));
  // A later change from A, so the one A repeated has surely arrived before we count.
  v1::Incident marker = ShardIncident(41, "link_down", "node-z", opened + absl::Seconds(1), true);
  a_->service().Publish(Change(v1::IncidentChange::OPENED, marker));
  ASSERT_TRUE(Eventually([&] { return CountOf(watch.Stdout(), "#41") == 1; })) << watch.Stdout();
  EXPECT_EQ(CountOf(watch.Stdout(), "OPENED"), 2) << watch.Stdout();
  EXPECT_EQ(CountOf(watch.Stdout(), "RESOLVED"), 1) << watch.Stdout();
  EXPECT_EQ(CountOf(watch.Stdout(), "link_down node-z mlx5_0 port 1"), 3) << watch.Stdout();

  // One replica goes away: its stream reconnects on its own, the other keeps printing.
  b_->service().EndStreams();
  ASSERT_TRUE(watch.WaitForStderr("the aggregator at " + b_->address() + " ended the stream",
                                  absl::Seconds(10)))
      << watch.Stderr();
  ASSERT_TRUE(Eventually([&] { return b_->service().open_watches() == 1; }));
  v1::Incident later = ShardIncident(42, "link_down", "node-z", opened + absl::Seconds(2), true);
  a_->service().Publish(Change(v1::IncidentChange::OPENED, later));
  ASSERT_TRUE(Eventually([&] { return CountOf(watch.Stdout(), "#42") == 1; })) << watch.Stdout();

  watch.Signal(SIGINT);
  EXPECT_EQ(watch.Wait(absl::Seconds(10)), 0) << watch.Stderr();
  EXPECT_TRUE(absl::StrContains(watch.Stderr(), "ringside watch: stopped")) << watch.Stderr();
}

TEST_F(FleetCliTest, WatchWithOneAggregatorDownWarnsAndWatchesTheOthers) {
  const std::string gone = b_->address();
  b_->Shutdown();
  testing::Process watch(
      {Ringside(), "watch", "--aggregator", absl::StrCat(gone, ",", a_->address()), "--node",
       "node-z", "--max-backoff", "300ms", "--timeout", "2s"},
      tmp_.path());
  ASSERT_TRUE(watch.WaitForStderr("watching incidents at " + a_->address() + " (Ctrl-C to stop)",
                                  absl::Seconds(10)))
      << watch.Stderr();
  EXPECT_TRUE(
      absl::StrContains(watch.Stderr(), "ringside: warning: cannot reach aggregator at " + gone))
      << watch.Stderr();
  ASSERT_TRUE(Eventually([&] { return a_->service().open_watches() == 1; }));
  a_->service().Publish(Change(v1::IncidentChange::OPENED,
                               ShardIncident(50, "link_down", "node-z", absl::Now(), true)));
  ASSERT_TRUE(Eventually([&] { return CountOf(watch.Stdout(), "OPENED    #50") == 1; }))
      << watch.Stdout();
  // The missing one is retried in the background.
  ASSERT_TRUE(
      watch.WaitForStderr("ringside watch: cannot reach aggregator at " + gone, absl::Seconds(10)))
      << watch.Stderr();
  watch.Signal(SIGTERM);
  EXPECT_EQ(watch.Wait(absl::Seconds(10)), 0) << watch.Stderr();
}

// NOT_FOUND from the shards that don't hold a node, and another error from one that could not be
// asked: the caller sees that error's code (and every message), not "nobody has heard of it".
TEST(FleetFailuresTest, AnAggregatorNotAskedIsNotANotFound) {
  std::ostringstream err;
  absl::Status s = ctl::SortOutFailures(
      {absl::NotFoundError("no node n1"), absl::UnavailableError("127.0.0.1:9: connection refused"),
       absl::NotFoundError("no node n1")},
      0, /*not_found_is_no_answer=*/true, err);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_EQ(s.message(), "no node n1; 127.0.0.1:9: connection refused; no node n1");
  EXPECT_EQ(err.str(), "");
  s = ctl::SortOutFailures({absl::NotFoundError("no node n1"), absl::NotFoundError("no node n1")},
                           0,
                           /*not_found_is_no_answer=*/true, err);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  // Without the NOT_FOUND rule the first failure's code stands, as before.
  s = ctl::SortOutFailures({absl::NotFoundError("a"), absl::UnavailableError("b")}, 0,
                           /*not_found_is_no_answer=*/false, err);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_EQ(s.message(), "a; b");
}

TEST(AggregatorTargetsTest, ListsRepeatsAndNames) {
  auto t = ctl::ParseAggregatorTargets(" agg-0a:9472, agg-0b:9472,agg-0a:9472 ");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].address, "agg-0a:9472");
  EXPECT_EQ((*t)[1].address, "agg-0b:9472");
  EXPECT_EQ((*t)[1].tls_name, "");

  // each:NAME:PORT: one target per address of NAME, whose certificate is checked against NAME.
  t = ctl::ParseAggregatorTargets("each:localhost:9472");
  ASSERT_TRUE(t.ok()) << t.status();
  std::set<std::string> addresses;
  for (const ctl::AggregatorTarget& a : *t) {
    addresses.insert(a.address);
    EXPECT_EQ(a.tls_name, "localhost");
  }
  EXPECT_TRUE(addresses.count("127.0.0.1:9472") == 1 || addresses.count("[::1]:9472") == 1)
      << absl::StrJoin(addresses, ",");

  EXPECT_EQ(ctl::ParseAggregatorTargets("a:1,,b:2").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ctl::ParseAggregatorTargets("each:nowhere").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ctl::ParseAggregatorTargets("each:no-such-host.invalid:9472").status().code(),
            absl::StatusCode::kNotFound);
}

// An LLDP-only view (what one shard's aggregator knows: its own nodes' neighbours).
v1::TopologyView LldpView(const std::vector<std::pair<std::string, std::string>>& host_leaf,
                          int64_t event_nanos) {
  v1::TopologyView t;
  t.set_source("lldp");
  t.set_discovery("lldp");
  t.set_format("node_switch_map");
  std::map<std::string, std::pair<std::set<std::string>, uint32_t>> per_switch;
  int port = 1;
  for (const auto& [host, leaf] : host_leaf) {
    v1::TopologyPort* p = t.add_ports();
    p->set_host(host);
    p->set_device("mlx5_0");
    p->set_ca_port(1);
    p->mutable_peer()->set_id(leaf);
    p->mutable_peer()->set_name(leaf);
    p->mutable_peer()->set_port_name(absl::StrCat("swp", port++));
    per_switch[leaf].first.insert(host);
    ++per_switch[leaf].second;
  }
  for (const auto& [id, hp] : per_switch) {
    v1::TopologySwitch* s = t.add_switches();
    s->set_id(id);
    s->set_name(id);
    s->set_hosts(static_cast<uint32_t>(hp.first.size()));
    s->set_ports(hp.second);
  }
  v1::TopologyEvent* e = t.add_events();
  e->set_time_unix_nanos(event_nanos);
  e->set_kind("new");
  e->set_source("lldp");
  e->set_reporter(host_leaf.front().first);
  e->set_host(host_leaf.front().first);
  e->set_device("mlx5_0");
  e->set_ca_port(1);
  e->mutable_after()->set_id(host_leaf.front().second);
  t.set_events_total(1);
  return t;
}

// Two shards, each knowing its own nodes' LLDP neighbours (replicas A and B of shard 0: node-a,
// node-b on leaf-1; shard 1: node-x on leaf-1 too and node-y on leaf-2): `ringside topology`
// shows the union, each port once, leaf-1 with its three hosts.
TEST(FleetTopologyTest, TheTopologyOfSeveralShardsIsTheirUnion) {
  const int64_t t0 = absl::ToUnixNanos(absl::FromUnixSeconds(1'800'000'000));
  testing::FakeQueryData shard0, shard1;
  shard0.topology = LldpView({{"node-a", "leaf-1"}, {"node-b", "leaf-1"}}, t0 + 2);
  shard1.topology = LldpView({{"node-x", "leaf-1"}, {"node-y", "leaf-2"}}, t0 + 1);
  testing::FakeQueryServer a(shard0), b(shard0), c(shard1);
  const std::string all = absl::StrCat(a.address(), ",", b.address(), ",", c.address());
  const auto cli = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {Ringside(), "topology"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--aggregator=" + all);
    argv.push_back("--timeout=3s");
    return testing::Run(argv, "", absl::Seconds(30));
  };
  RunResult r = cli({"-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::vector<std::string> hosts;
  for (const auto& p : j["ports"]) hosts.push_back(p["host"]);
  EXPECT_EQ(hosts, (std::vector<std::string>{"node-a", "node-b", "node-x", "node-y"})) << r.out;
  ASSERT_EQ(j["switches"].size(), 2u) << r.out;
  EXPECT_EQ(j["switches"][0]["id"], "leaf-1");
  EXPECT_EQ(j["switches"][0]["hosts"], 3);
  EXPECT_EQ(j["switches"][0]["ports"], 3);
  EXPECT_EQ(j["switches"][1]["hosts"], 1);
  EXPECT_EQ(j["source"], "lldp");
  ASSERT_EQ(j["events"].size(), 2u) << r.out;  // the replicas' one event once, shard 1's first
  EXPECT_EQ(j["events"][0]["host"], "node-x");
  EXPECT_EQ(j["events"][1]["host"], "node-a");

  r = cli({});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "Topology: lldp; 4 ports on 2 switches")) << r.out;
  EXPECT_EQ(CountOf(r.out, "node-b "), 1) << r.out;

  r = cli({"--events", "--max-events", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "node-a")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "node-x")) << r.out;  // the latest one only
}

TEST(FleetMergeTest, IncidentsWithoutKeyDedupeByKindEntityAndOpening) {
  const absl::Time t = absl::FromUnixSeconds(1'800'000'000);
  // From an aggregator too old to send keys: replica copies differ in id and revision.
  v1::Incident a = ShardIncident(1, "link_down", "node-a", t, true);
  a.clear_key();
  v1::Incident a_newer = a;
  a_newer.set_id(9);
  a_newer.set_revision(2);
  a_newer.set_updated_unix_nanos(absl::ToUnixNanos(t + absl::Minutes(1)));
  v1::Incident other = a;  // same entity, opened later: another incident
  other.set_id(2);
  other.set_opened_unix_nanos(absl::ToUnixNanos(t + absl::Seconds(5)));
  other.set_updated_unix_nanos(absl::ToUnixNanos(t + absl::Seconds(5)));
  ctl::Incidents first, second;
  *first.Add() = a;
  *first.Add() = other;
  *second.Add() = a_newer;
  ctl::Incidents merged = ctl::MergeIncidents({&first, &second}, 0);
  ASSERT_EQ(merged.size(), 2);
  EXPECT_EQ(merged[0].id(), 9u);  // the fresher copy, and the most recently updated first
  EXPECT_EQ(merged[1].id(), 2u);
  EXPECT_EQ(ctl::MergeIncidents({&first, &second}, 1).size(), 1);
}

TEST(FleetMergeTest, StragglersOncePerRankHighestScore) {
  google::protobuf::RepeatedPtrField<v1::RankScore> x, y;
  auto add = [](auto& list, const std::string& job, int64_t rank, double score) {
    v1::RankScore* r = list.Add();
    r->set_job(job);
    r->set_comm("c");
    r->set_rank(rank);
    r->set_score(score);
  };
  add(x, "j1", 5, 0.5);
  add(x, "j1", 2, 0.1);
  add(y, "j1", 5, 0.8);
  add(y, "j2", 5, 0.3);
  auto merged = ctl::MergeStragglers({&x, &y}, 10);
  ASSERT_EQ(merged.size(), 3);
  EXPECT_EQ(merged[0].job(), "j1");
  EXPECT_DOUBLE_EQ(merged[0].score(), 0.8);
  EXPECT_EQ(merged[1].job(), "j2");
  EXPECT_EQ(ctl::MergeStragglers({&x, &y}, 2).size(), 2);
}

}  // namespace
}  // namespace ringside::daemon
