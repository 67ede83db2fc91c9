// The `ringside` query subcommands end to end: the built binary against an in-process fake of the
// Query API (fake_query_service.h) on 127.0.0.1. Output (tables and JSON), the requests the
// flags turn into, exit codes, errors, mTLS, and `watch` with a stream the test drives.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "daemon/common/tls.h"
#include "tests/testing/eventually.h"
#include "tests/daemon/ctl/fake_query_service.h"
#include "tests/testing/certs.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

using testing::RunResult;

std::string Ringside() { return testing::BinaryPath("daemon/ringside"); }

using testing::Eventually;
using testing::CountOf;

class QueryCliTest : public ::testing::Test {
 protected:
  QueryCliTest() : now_(absl::Now()), server_(testing::CannedCluster(now_)) {}

  RunResult Cli(std::vector<std::string> args) {
    std::vector<std::string> argv = {Ringside()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--aggregator=" + server_.address());
    return testing::Run(argv, "", absl::Seconds(30));
  }
  testing::FakeQueryService& fake() { return server_.service(); }

  absl::Time now_;
  testing::FakeQueryServer server_;
  testing::TempDir tmp_;
};

TEST_F(QueryCliTest, HelpOfEveryCommand) {
  RunResult top = testing::Run({Ringside(), "--help"});
  EXPECT_EQ(top.exit_code, 0);
  for (const char* c :
       {"status", "incidents", "incident ", "watch", "links", "node", "stragglers", "topology"}) {
    EXPECT_TRUE(absl::StrContains(top.out, absl::StrCat("  ", c))) << c << "\n" << top.out;
  }
  const std::map<std::string, std::vector<std::string>> needles = {
      {"incidents",
       {"--open", "--kind=KIND", "--node=NODE", "--job=JOB", "--since=WHEN", "--limit=N",
        "1 with --open"}},
      {"incident", {"Usage: ringside incident ID", "blast radius", "cause_chains"}},
      {"links", {"--unhealthy", "--flapping", "--node=NODE", "1 with --unhealthy"}},
      {"node", {"Usage: ringside node NAME", "1 it is stale or has open"}},
      {"stragglers", {"--job=JOB", "--limit=N", "1 a listed rank is flagged"}},
      {"watch", {"--kind=KIND", "Ctrl-C", "JSON Lines", "reconnects"}},
      {"status", {"an open critical incident or a stale node"}},
      {"topology",
       {"--node=NODE", "--events", "--max-events=N", "--format=FORMAT", "ibnetdiscover",
        "1 the file disagrees with the discovery"}},
  };
  for (const auto& [cmd, list] : needles) {
    RunResult r = testing::Run({Ringside(), cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd;
    for (const std::string& n : list) EXPECT_TRUE(absl::StrContains(r.out, n)) << cmd << ": " << n;
    for (const char* common :
         {"--aggregator=HOST:PORT", "RINGSIDE_AGGREGATOR", "--tls-ca=FILE", "--tls-cert=FILE",
          "--tls-key=FILE", "--timeout=DURATION", "-o, --output=FORMAT", "Exit codes: 0"}) {
      EXPECT_TRUE(absl::StrContains(r.out, common)) << cmd << ": " << common;
    }
  }
}

TEST_F(QueryCliTest, IncidentsTableAndFilters) {
  RunResult r = Cli({"incidents"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 6u) << r.out;
  EXPECT_TRUE(absl::StartsWith(lines[0], "ID  KIND           SEVERITY  STATE")) << r.out;
  // Newest (updated) first: #15 (30s ago), #12 (1m), #20 (2m), #21 (20m), #3 (2h).
  EXPECT_TRUE(absl::StartsWith(lines[1], "15  straggler      warning   open")) << r.out;
  EXPECT_TRUE(absl::StrContains(lines[1], "rank 5 (job j1) on node-b")) << r.out;
  EXPECT_TRUE(absl::StrContains(lines[1], "8m0s ago")) << r.out;
  EXPECT_TRUE(absl::StartsWith(lines[2], "12  pause_storm    critical  open")) << r.out;
  EXPECT_TRUE(absl::StartsWith(lines[5], " 3  link_flapping  warning   resolved 2h0m ago"))
      << r.out;
  // Every column starts at the same offset on every line.
  const size_t entity_col = lines[0].find("ENTITY");
  for (size_t i = 1; i < lines.size(); ++i) EXPECT_NE(lines[i][entity_col], ' ') << lines[i];
  EXPECT_FALSE(fake().last_list_incidents().open_only());

  r = Cli({"incidents", "--open", "--kind", "straggler", "--node=node-b", "--job", "j1", "--since",
           "1h", "--limit", "5"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // asked for open ones, and found one
  v1::ListIncidentsRequest req = fake().last_list_incidents();
  EXPECT_TRUE(req.open_only());
  EXPECT_EQ(req.kind(), "straggler");
  EXPECT_EQ(req.node(), "node-b");
  EXPECT_EQ(req.job(), "j1");
  EXPECT_EQ(req.limit(), 5u);
  EXPECT_NEAR(static_cast<double>(req.since_unix_nanos()),
              static_cast<double>(absl::ToUnixNanos(absl::Now() - absl::Hours(1))), 60e9);
  EXPECT_EQ(CountOf(r.out, "\n"), 2) << r.out;

  r = Cli({"incidents", "--open", "--kind", "link_down"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "No open incidents.\n");

  r = Cli({"incidents", "--since", "2026-11-22T00:00:00Z"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fake().last_list_incidents().since_unix_nanos(),
            absl::ToUnixNanos(
                absl::FromCivil(absl::CivilSecond(2026, 11, 22, 0, 0, 0), absl::UTCTimeZone())));
}

TEST_F(QueryCliTest, IncidentsUsageErrors) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"incidents", "--since", "yesterday"},
        std::vector<std::string>{"incidents", "--limit", "-3"},
        std::vector<std::string>{"incidents", "--frobnicate"},
        std::vector<std::string>{"incidents", "extra"},
        std::vector<std::string>{"incidents", "-o", "yaml"},
        std::vector<std::string>{"incidents", "--timeout", "never"}}) {
    RunResult r = Cli(args);
    EXPECT_EQ(r.exit_code, 2) << args[1];
    EXPECT_TRUE(absl::StartsWith(r.err, "ringside incidents: ")) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  RunResult r = Cli({"incidents", "--kind", "meltdown"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err,
                                "the aggregator refused the query: unknown incident kind "
                                "\"meltdown\""))
      << r.err;
}

TEST_F(QueryCliTest, IncidentsJsonIsAStableSortedArray) {
  RunResult r = Cli({"incidents", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 5u);
  // Keys sorted, 2-space indentation: the text is exactly nlohmann's canonical dump.
  EXPECT_EQ(r.out, j.dump(2) + "\n");
  EXPECT_EQ(j[0]["id"], 15);
  EXPECT_EQ(j[0]["entity"]["rank"], "5");
  EXPECT_EQ(j[0]["opened"],
            nlohmann::json(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", now_ - absl::Minutes(8),
                                            absl::UTCTimeZone())));
  EXPECT_TRUE(j[0]["resolved"].is_null());
  EXPECT_EQ(j[4]["resolution"], "no transition for 10m0s");

  r = Cli({"incidents", "--open", "--kind=link_down", "-ojson"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "[]\n");
}

TEST_F(QueryCliTest, IncidentDetailFollowsTheCauseChain) {
  RunResult r = Cli({"incident", "15"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, "Incident #15  straggler  warning  OPEN\n")) << r.out;
  // Whole seconds for people (JSON keeps the milliseconds).
  EXPECT_TRUE(absl::StrContains(
      r.out, absl::StrCat("Opened:    ",
                          absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now_ - absl::Minutes(8),
                                           absl::UTCTimeZone()),
                          " (8m0s ago)\n")))
      << r.out;
  for (const char* needle :
       {"Entity:    rank 5 (job j1) on node-b", "Summary:   rank 5 arrived last in 36",
        "Resolved:  - (open)", "Evidence:\n  NAME    VALUE\n  margin   0.31\n  score     0.9\n",
        "node: pause_storm node-b mlx5_0 prio 3 (#12) — pause storm on the rank's "
        "node",
        "Cause chain:\n  straggler rank 5 (job j1) on node-b ← pause_storm node-b mlx5_0 prio 3 "
        "(#12)\n"}) {
    EXPECT_TRUE(absl::StrContains(r.out, needle)) << needle << "\n" << r.out;
  }

  r = Cli({"incident", "#12"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out,
                                "Blast radius (jobs and ranks behind it):\n"
                                "  JOB  RANKS  NODES   PODS\n"
                                "  j1   4-7    node-b  train/j1-worker-4,train/j1-worker-5\n"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Causes:\n  none recorded\n")) << r.out;

  r = Cli({"incident", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "Resolution:  no transition for 10m0s")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Duration:    1h0m\n")) << r.out;

  r = Cli({"incident", "20"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out,
                                "job_slowdown job j2 ← congestion node-c mlx5_0 (#21) ← "
                                "job_slowdown job j2 (#20, cycle)"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "job_slowdown job j2 ← link_down node-d (#99, not found)"))
      << r.out;
}

TEST_F(QueryCliTest, IncidentJsonHasTheChain) {
  RunResult r = Cli({"incident", "15", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(r.out, j.dump(2) + "\n");
  EXPECT_EQ(j["id"], 15);
  ASSERT_EQ(j["cause_chains"].size(), 1u);
  const nlohmann::json& step = j["cause_chains"][0][0];
  EXPECT_EQ(step["incident_id"], 12);
  EXPECT_EQ(step["kind"], "pause_storm");
  EXPECT_EQ(step["severity"], "critical");
  EXPECT_EQ(step["open"], true);
  EXPECT_TRUE(step["note"].is_null());
  EXPECT_EQ(step["entity"]["node"], "node-b");
}

TEST_F(QueryCliTest, IncidentErrors) {
  RunResult r = Cli({"incident", "404"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "ringside incident: no incident #404 at 127.0.0.1:"))
      << r.err;
  for (const char* bad : {"abc", "0", "-1"}) {
    r = Cli({"incident", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
  }
  r = Cli({"incident"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "give one incident ID")) << r.err;
}

TEST_F(QueryCliTest, Links) {
  RunResult r = Cli({"links"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_TRUE(absl::StartsWith(
      lines[0], "NODE    SOURCE      DEVICE  PORT  STATE  FLAPS  HEALTH     PEER                "))
      << r.out;
  // The switch end of each port, "-" when the topology does not know it.
  EXPECT_TRUE(absl::StrContains(lines[1], "up         0  ok         -                   5h0m ago"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(lines[2], "mlx5_1  1     down       3  UNHEALTHY  leaf-01 port 7      40s ago"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(lines[3], "leaf-02 Ethernet12")) << r.out;
  EXPECT_TRUE(absl::StrContains(lines[3], "#12 pause_storm")) << r.out;

  r = Cli({"links", "--unhealthy", "--node", "node-a"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(fake().last_list_links().unhealthy_only());
  EXPECT_EQ(fake().last_list_links().node(), "node-a");
  EXPECT_EQ(CountOf(r.out, "\n"), 2) << r.out;

  r = Cli({"links", "--flapping", "-o", "json"});
  EXPECT_EQ(r.exit_code, 1);
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["flaps_in_window"], 3);
  EXPECT_EQ(j[0]["state"], "down");
  EXPECT_EQ(j[0]["peer_switch"], "leaf-01");
  EXPECT_EQ(j[0]["peer_switch_port"], "7");

  r = Cli({"links", "--unhealthy", "--node", "node-z"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "No unhealthy links.\n");
}

TEST_F(QueryCliTest, Node) {
  RunResult r = Cli({"node", "node-a"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* needle : {"Node node-a  current\n", "Agent:      0.1.0", "Series:     412",
                             "Open incidents (0):\n  none", "Links (1):\nSOURCE      DEVICE",
                             "port_xmit_data", "1.25e+09", "Rates (1 of 1, nonzero first)"}) {
    EXPECT_TRUE(absl::StrContains(r.out, needle)) << needle << "\n" << r.out;
  }
  r = Cli({"node", "node-b"});
  EXPECT_EQ(r.exit_code, 1) << r.err;  // open incidents
  EXPECT_TRUE(absl::StrContains(r.out, "Open incidents (2):")) << r.out;
  r = Cli({"node", "node-c", "-o", "json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;  // stale
  EXPECT_EQ(nlohmann::json::parse(r.out)["stale"], true);
  r = Cli({"node", "node-z"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "has never heard of node \"node-z\"")) << r.err;
}

TEST_F(QueryCliTest, Stragglers) {
  RunResult r = Cli({"stragglers"});
  EXPECT_EQ(r.exit_code, 1) << r.err;  // rank 5 is flagged by #15
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_EQ(lines[0],
            "JOB  RANK  NODE    POD                COMM    SCORE  MARGIN  WAIT  WHERE           "
            "INSTANCES  INCIDENT");
  EXPECT_EQ(lines[1],
            "j1      5  node-b  train/j1-worker-5  0x7f01    90%     31%    2%  host                   "
            "40  #15 straggler");
  EXPECT_TRUE(absl::StartsWith(lines[2], "j2      0  node-c  -                  ")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[2], "gpu (shared 4)")) << lines[2];
  r = Cli({"stragglers", "--job", "j2", "--limit", "3"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(fake().last_top_stragglers().job(), "j2");
  EXPECT_EQ(fake().last_top_stragglers().window_seconds(), 0);
  EXPECT_EQ(fake().last_top_stragglers().limit(), 3u);
  // --window was accepted and ignored; it is gone (issue #17): a usage error now.
  r = Cli({"stragglers", "--window", "5m"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  r = Cli({"stragglers", "-o", "json"});
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["incident_id"], 15);
  EXPECT_EQ(j[0]["pod"], "j1-worker-5");
  EXPECT_EQ(j[0]["where"], "host");
  EXPECT_EQ(j[1]["where"], "gpu");
  EXPECT_EQ(j[1]["gpu_sharing_ranks"], 4);
  EXPECT_EQ(j[0]["namespace"], "train");
  EXPECT_TRUE(j[1]["pod"].is_null());
  EXPECT_TRUE(j[1]["namespace"].is_null());
  EXPECT_DOUBLE_EQ(j[0]["wait_fraction"].get<double>(), 0.02);
}

TEST_F(QueryCliTest, Status) {
  RunResult r = Cli({"status"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  for (const char* needle :
       {"Cluster status at ", "version test-0.1", "Nodes:           3 (1 STALE)",
        "Links:           3 (2 unhealthy)", "Jobs:            j1, j2",
        "Open incidents:  3: job_slowdown 1, pause_storm 1, straggler 1",
        "12  pause_storm   critical",
        "Verdict: PROBLEMS: 1 open critical incident, 1 stale node"}) {
    EXPECT_TRUE(absl::StrContains(r.out, needle)) << needle << "\n" << r.out;
  }
  r = Cli({"status", "-o", "json"});
  EXPECT_EQ(r.exit_code, 1);
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stale_nodes"], 1);
  EXPECT_EQ(j["open_incidents"][0]["id"], 12);
  EXPECT_TRUE(j["now"].is_string());
}

TEST_F(QueryCliTest, HealthyClusterExitsZero) {
  testing::FakeQueryData d;
  d.status.set_nodes(2);
  d.status.set_links(4);
  testing::FakeQueryServer healthy(d);
  RunResult r = testing::Run({Ringside(), "status", "--aggregator", healthy.address()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "Verdict: OK")) << r.out;
  r = testing::Run({Ringside(), "incidents", "--open", "--aggregator", healthy.address()});
  EXPECT_EQ(r.exit_code, 0);
  r = testing::Run({Ringside(), "links", "--unhealthy", "--aggregator", healthy.address()});
  EXPECT_EQ(r.exit_code, 0);
}

TEST_F(QueryCliTest, AggregatorFromEnvironment) {
  ::setenv("RINGSIDE_AGGREGATOR", server_.address().c_str(), 1);
  RunResult r = testing::Run({Ringside(), "status"});
  ::unsetenv("RINGSIDE_AGGREGATOR");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "aggregator " + server_.address())) << r.out;
}

TEST_F(QueryCliTest, UnreachableAndSlowAggregators) {
  std::string gone;
  {
    testing::FakeQueryServer closed(testing::FakeQueryData{});
    gone = closed.address();
  }
  for (const char* cmd : {"status", "incidents", "links", "stragglers", "watch"}) {
    const absl::Time start = absl::Now();
    RunResult r = testing::Run({Ringside(), cmd, "--aggregator", gone});
    EXPECT_EQ(r.exit_code, 2) << cmd << r.out;
    EXPECT_TRUE(absl::StrContains(
        r.err, absl::StrCat("ringside ", cmd, ": cannot reach aggregator at ", gone, ": ")))
        << r.err;
    EXPECT_LT(absl::Now() - start, absl::Seconds(15)) << cmd;
  }
  fake().SetDelay(absl::Seconds(3));
  RunResult r = Cli({"status", "--timeout", "300ms"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "no answer within 300ms (--timeout)")) << r.err;
  fake().SetDelay(absl::ZeroDuration());
}

TEST_F(QueryCliTest, MutualTls) {
  absl::StatusOr<testing::TestPki> pki = testing::TestPki::Create(tmp_.path(), "ca");
  ASSERT_TRUE(pki.ok()) << pki.status();
  absl::StatusOr<testing::CertPaths> server_cert = pki->IssueServer("agg");
  absl::StatusOr<testing::CertPaths> client_cert = pki->IssueClient("oncall");
  ASSERT_TRUE(server_cert.ok() && client_cert.ok());
  TlsOptions tls{server_cert->cert, server_cert->key, pki->ca_cert(), false};
  auto creds = MakeServerCredentials(tls, "127.0.0.1:0");
  ASSERT_TRUE(creds.ok()) << creds.status();
  testing::FakeQueryServer secure(testing::CannedCluster(now_), *creds);
  RunResult r = testing::Run({Ringside(), "incidents", "--open", "--aggregator", secure.address(),
                              "--tls-ca", pki->ca_cert(), "--tls-cert", client_cert->cert,
                              "--tls-key", client_cert->key});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "pause_storm")) << r.out;
  // Without a client certificate the handshake fails, and the message says where to look.
  r = testing::Run({Ringside(), "status", "--timeout=3s", "--aggregator", secure.address(),
                    "--tls-ca", pki->ca_cert()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "ringside status: ")) << r.err;
  // Plaintext against a TLS server.
  r = testing::Run({Ringside(), "status", "--timeout=3s", "--aggregator", secure.address()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "cannot reach aggregator at " + secure.address())) << r.err;
}

v1::IncidentChange Change(v1::IncidentChange::Type type, v1::Incident incident) {
  v1::IncidentChange c;
  c.set_type(type);
  *c.mutable_incident() = std::move(incident);
  return c;
}

v1::Incident Flapping(uint64_t id, bool open, uint64_t revision) {
  v1::Incident i;
  i.set_id(id);
  i.set_kind("link_flapping");
  i.set_severity("warning");
  (*i.mutable_entity())["node"] = "node-a";
  (*i.mutable_entity())["device"] = "mlx5_1";
  (*i.mutable_entity())["port"] = "1";
  i.set_opened_unix_nanos(absl::ToUnixNanos(absl::Now()));
  i.set_updated_unix_nanos(absl::ToUnixNanos(absl::Now()));
  if (!open) i.set_resolved_unix_nanos(absl::ToUnixNanos(absl::Now()));
  i.set_open(open);
  i.set_summary("3 down→up cycles in 10m");
  if (!open) i.set_resolution("no transition for 10m");
  i.set_revision(revision);
  return i;
}

TEST_F(QueryCliTest, WatchPrintsSnapshotChangesReconnectsAndStopsOnSigint) {
  testing::Process watch({Ringside(), "watch", "--aggregator", server_.address(), "--node",
                          "node-a", "--max-backoff", "500ms"},
                         tmp_.path());
  ASSERT_TRUE(watch.WaitForStderr("watching incidents at " + server_.address(), absl::Seconds(10)))
      << watch.Stderr();
  ASSERT_TRUE(Eventually([&] { return fake().open_watches() == 1; }));
  EXPECT_EQ(fake().last_watch().node(), "node-a");
  EXPECT_EQ(watch.Stdout(), "");  // nothing open on node-a yet

  fake().Publish(Change(v1::IncidentChange::OPENED, Flapping(40, true, 1)));
  fake().Publish(Change(v1::IncidentChange::RESOLVED, Flapping(40, false, 2)));
  // Filtered out by --node.
  v1::Incident other = Flapping(41, true, 1);
  (*other.mutable_entity())["node"] = "node-b";
  fake().Publish(Change(v1::IncidentChange::OPENED, other));
  ASSERT_TRUE(Eventually([&] { return CountOf(watch.Stdout(), "\n") >= 2; })) << watch.Stdout();
  std::vector<std::string> lines = absl::StrSplit(watch.Stdout(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << watch.Stdout();
  EXPECT_TRUE(absl::StrContains(lines[0],
                                "Z  OPENED    #40 warning link_flapping node-a mlx5_1 "
                                "port 1: 3 down→up cycles in 10m"))
      << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[1],
                                "Z  RESOLVED  #40 warning link_flapping node-a mlx5_1 "
                                "port 1: no transition for 10m"))
      << lines[1];

  // An incident that opens now is in the snapshot after a reconnect, but must not be printed
  // twice; one that resolves while the CLI is disconnected is caught up.
  fake().Publish(Change(v1::IncidentChange::OPENED, Flapping(42, true, 1)));
  fake().Publish(Change(v1::IncidentChange::OPENED, Flapping(43, true, 1)));
  ASSERT_TRUE(Eventually([&] { return CountOf(watch.Stdout(), "#43") == 1; })) << watch.Stdout();
  fake().Publish(Change(v1::IncidentChange::RESOLVED, Flapping(43, false, 2)),
                 /*to_watchers=*/false);
  const int calls = fake().watch_calls();
  fake().RefuseWatches(true);
  fake().EndStreams();
  ASSERT_TRUE(watch.WaitForStderr("ended the stream", absl::Seconds(10))) << watch.Stderr();
  ASSERT_TRUE(Eventually([&] { return fake().watch_calls() > calls; }));  // a refused attempt
  fake().RefuseWatches(false);
  ASSERT_TRUE(watch.WaitForStderr("reconnected to " + server_.address(), absl::Seconds(10)))
      << watch.Stderr();
  ASSERT_TRUE(Eventually([&] { return CountOf(watch.Stdout(), "RESOLVED  #43") == 1; }))
      << watch.Stdout();
  ASSERT_TRUE(Eventually([&] { return fake().open_watches() == 1; }));
  fake().Publish(Change(v1::IncidentChange::UPDATED, Flapping(42, true, 2)));
  ASSERT_TRUE(Eventually([&] { return CountOf(watch.Stdout(), "UPDATED   #42") == 1; }))
      << watch.Stdout();
  EXPECT_EQ(CountOf(watch.Stdout(), "#42"), 2) << watch.Stdout();  // OPENED, UPDATED: once each
  EXPECT_EQ(CountOf(watch.Stdout(), "#43"), 2) << watch.Stdout();

  watch.Signal(SIGINT);
  EXPECT_EQ(watch.Wait(absl::Seconds(10)), 0) << watch.Stderr();
  EXPECT_TRUE(absl::StrContains(watch.Stderr(), "ringside watch: stopped")) << watch.Stderr();
  EXPECT_TRUE(Eventually([&] { return fake().open_watches() == 0; }));
}

TEST_F(QueryCliTest, WatchRefusedIsAnError) {
  RunResult r = Cli({"watch", "--kind", "meltdown"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(absl::StrContains(r.err,
                                "ringside watch: the aggregator refused the query: "
                                "unknown incident kind \"meltdown\""))
      << r.err;
  r = Cli({"watch", "--max-backoff", "soon"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "--max-backoff")) << r.err;
}

TEST_F(QueryCliTest, WatchJsonLinesAndSnapshot) {
  testing::Process watch({Ringside(), "watch", "-o", "json", "--aggregator", server_.address()},
                         tmp_.path());
  // The snapshot: every open incident as an initial "opened".
  ASSERT_TRUE(Eventually([&] { return CountOf(watch.Stdout(), "\n") >= 3; })) << watch.Stderr();
  fake().Publish(Change(v1::IncidentChange::RESOLVED, Flapping(40, false, 2)));
  ASSERT_TRUE(Eventually([&] { return CountOf(watch.Stdout(), "\n") >= 4; })) << watch.Stderr();
  std::vector<std::string> lines = absl::StrSplit(watch.Stdout(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u);
  std::set<uint64_t> snapshot;
  for (int i = 0; i < 3; ++i) {
    nlohmann::json j = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(j["type"], "opened");
    EXPECT_EQ(j["initial"], true);
    snapshot.insert(j["incident"]["id"].get<uint64_t>());
  }
  EXPECT_EQ(snapshot, (std::set<uint64_t>{12, 15, 20}));
  nlohmann::json last = nlohmann::json::parse(lines[3]);
  EXPECT_EQ(last["type"], "resolved");
  EXPECT_EQ(last["initial"], false);
  EXPECT_EQ(last["incident"]["id"], 40);
  watch.Signal(SIGTERM);
  EXPECT_EQ(watch.Wait(absl::Seconds(10)), 0) << watch.Stderr();
}

}  // namespace
}  // namespace ringside::daemon
