// Scenario parsing, default ground truth, the job model's timing and the scoring rules of
// ringside-sim (sim/scenario.h, sim/job_model.h, sim/scoring.h), and every file of the suite in
// tests/scenarios parses.
#include "sim/scenario.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/job_model.h"
#include "sim/scoring.h"

namespace ringside::sim {
namespace {

TEST(ScenarioTest, ParsesEveryKey) {
  absl::StatusOr<Scenario> s = ParseScenario(R"(
name: t
description: d
seed: 7
duration: 1m30s
grace: 10s
cluster: {nodes: 4, gpus: 2, nodes_per_leaf: 2, nvlinks: 4, interval: 250ms}
traffic: {gbytes_per_second: 5, noise: 0.1, background_noise: false}
job: {id: j1, compute: 50ms, collective: 2ms, jitter: 0.02}
aggregator_args: ["--foo=1"]
faults:
  - kind: pause_storm
    node: node-02
    device: mlx5_1
    rank: 3
    slowdown_pct: 30
    start: 5s
    duration: 20
  - kind: nvlink_degraded
    node: 3
    gpu: 1
    link: 2
    start: 30s
    expect:
      - kind: link_degraded
        entity: {node: node-04, gpu: "1"}
    allow: [link_down]
)");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "t");
  EXPECT_EQ(s->seed, 7u);
  EXPECT_EQ(s->duration, absl::Seconds(90));
  EXPECT_EQ(s->grace, absl::Seconds(10));
  EXPECT_EQ(s->nodes, 4);
  EXPECT_EQ(s->gpus, 2);
  EXPECT_EQ(s->ranks(), 8);
  EXPECT_EQ(s->interval, absl::Milliseconds(250));
  EXPECT_EQ(s->gbytes_per_second, 5);
  EXPECT_FALSE(s->background_noise);
  EXPECT_EQ(s->job_id, "j1");
  EXPECT_EQ(s->compute, absl::Milliseconds(50));
  EXPECT_EQ(s->aggregator_args, std::vector<std::string>{"--foo=1"});
  ASSERT_EQ(s->faults.size(), 2u);
  const FaultSpec& storm = s->faults[0];
  EXPECT_EQ(storm.kind, FaultKind::kPauseStorm);
  EXPECT_EQ(storm.node, 1);
  EXPECT_EQ(storm.duration, absl::Seconds(20));
  // Default ground truth: the storm at its origin port, and the rank it slows as a straggler
  // caused by it.
  ASSERT_EQ(storm.expect.size(), 2u);
  EXPECT_EQ(storm.expect[0].kind, "pause_storm");
  EXPECT_EQ(storm.expect[0].entity.at("node"), "node-02");
  EXPECT_EQ(storm.expect[0].entity.at("device"), "mlx5_1");
  EXPECT_EQ(storm.expect[1].kind, "straggler");
  EXPECT_EQ(storm.expect[1].entity.at("rank"), "3");
  EXPECT_EQ(storm.expect[1].entity.at("node"), "node-02");
  EXPECT_EQ(storm.expect[1].cause, "pause_storm");
  const FaultSpec& nv = s->faults[1];
  EXPECT_EQ(nv.node, 3);
  ASSERT_EQ(nv.expect.size(), 1u);  // given: not replaced by the defaults
  EXPECT_EQ(nv.expect[0].entity.size(), 2u);
  EXPECT_EQ(nv.allow, std::vector<std::string>{"link_down"});
}

TEST(ScenarioTest, RejectsBadInputWithoutCrashing) {
  for (const char* bad : {
           "",                                                    // not a map
           "[1, 2]",                                              // not a map
           "faults: 3",                                           // not a list
           "faults: [{kind: meteor}]",                            // unknown kind
           "faults: [{kind: straggler}]",                         // no rank
           "faults: [{kind: straggler, rank: 999}]",              // outside the job
           "faults: [{kind: link_flap, node: node-99}]",          // unknown node
           "faults: [{kind: link_flap, device: eth0}]",           // not a rail
           "faults: [{kind: link_flap, start: soon}]",            // bad duration
           "cluster: {nodes: 0}",                                 // no nodes
           "cluster: {interval: 1ms}",                            // too fast
           "duration: -5s",                                       // negative
           "cluster: {nodes: many}",                              // not a number
           "faults: [{kind: link_flap, expect: [{entity: {}}]}]",  // expectation without kind
           "{{{",                                                 // not YAML
       }) {
    absl::StatusOr<Scenario> s = ParseScenario(bad);
    EXPECT_FALSE(s.ok()) << "accepted: " << bad;
  }
}

TEST(ScenarioTest, DefaultsPerFaultKind) {
  absl::StatusOr<Scenario> s = ParseScenario(R"(
cluster: {nodes: 2, gpus: 8}
faults:
  - {kind: link_flap, node: 1, device: mlx5_4}
  - {kind: straggler, rank: 13, slowdown_pct: 20}
  - {kind: job_slowdown}
  - {kind: counter_reset, node: 0}
  - {kind: agent_crash, node: 1}
)");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->faults[0].expect[0].kind, "link_flapping");
  EXPECT_EQ(s->faults[0].allow, std::vector<std::string>{"link_down"});
  EXPECT_EQ(s->faults[1].node, 1);  // rank 13 of 8-GPU nodes
  EXPECT_EQ(s->faults[1].expect[0].cause, "host");
  EXPECT_EQ(s->faults[1].expect[0].entity.at("node"), "node-02");
  EXPECT_EQ(s->faults[2].expect[0].kind, "job_slowdown");
  EXPECT_TRUE(s->faults[3].expect.empty());
  EXPECT_TRUE(s->faults[4].expect.empty());
}

TEST(ScenarioTest, EverySuiteFileParses) {
  const std::string dir = std::string(RINGSIDE_SOURCE_DIR) + "/tests/scenarios";
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".yaml") continue;
    absl::StatusOr<Scenario> s = LoadScenario(e.path().string());
    EXPECT_TRUE(s.ok()) << e.path() << ": " << s.status();
    ++n;
  }
  EXPECT_GE(n, 10);
}

TEST(ScenarioTest, DemoScenarioSeparatesItsFaults) {
  Scenario s = DemoScenario(8, 8, absl::Seconds(150));
  ASSERT_EQ(s.faults.size(), 5u);
  // The host straggler sits on the other leaf from the switch-side faults, so no fabric incident
  // can be blamed for it.
  const FaultSpec& strag = s.faults.back();
  ASSERT_EQ(strag.kind, FaultKind::kStraggler);
  for (const FaultSpec& f : s.faults) {
    if (f.kind == FaultKind::kPauseStorm || f.kind == FaultKind::kCongestion) {
      EXPECT_NE(f.node / s.nodes_per_leaf, strag.node / s.nodes_per_leaf);
    }
    EXPECT_LE(f.start + f.duration, s.duration);
  }
}

TEST(JobModelTest, TheLateRankHasTheShortestKernel) {
  Scenario s;
  s.nodes = 2;
  s.gpus = 4;
  s.jitter = 0.01;
  FaultSpec f;
  f.kind = FaultKind::kStraggler;
  f.rank = 6;
  f.slowdown_pct = 20;
  f.start = absl::ZeroDuration();
  f.duration = absl::Hours(1);
  s.faults.push_back(f);
  JobModel a(s, 1'700'000'000'000'000'000);
  JobModel b(s, 1'700'000'000'000'000'000);
  for (int i = 0; i < 50; ++i) {
    const Iteration& x = a.Next();
    const Iteration& y = b.Next();
    EXPECT_EQ(x.end_ns, y.end_ns);  // deterministic: every node's process agrees
    int shortest = -1;
    int64_t best = INT64_MAX;
    for (int r = 0; r < s.ranks(); ++r) {
      EXPECT_LE(x.arrive_ns[r], x.stop_ns[r]);
      const int64_t d = x.stop_ns[r] - x.arrive_ns[r];
      if (d < best) {
        best = d;
        shortest = r;
      }
    }
    EXPECT_EQ(shortest, 6) << "iteration " << i;
  }
}

TEST(JobModelTest, JobSlowdownStretchesTheCollective) {
  Scenario s;
  s.nodes = 1;
  s.gpus = 2;
  FaultSpec f;
  f.kind = FaultKind::kJobSlowdown;
  f.factor = 3;
  f.start = absl::Seconds(1);
  f.duration = absl::Hours(1);
  s.faults.push_back(f);
  JobModel m(s, 0);
  EXPECT_EQ(m.CollectiveFactor(absl::ZeroDuration()), 1);
  EXPECT_EQ(m.CollectiveFactor(absl::Seconds(2)), 3);
}

TEST(ScoringTest, EntityMatchingAcceptsTheNetdevOfADevice) {
  EXPECT_TRUE(EntityMatches({{"node", "node-02"}, {"device", "mlx5_3"}},
                            {{"node", "node-02"}, {"device", "mlx5_3"}, {"port", "1"}}));
  EXPECT_TRUE(EntityMatches({{"node", "node-02"}, {"device", "mlx5_3"}},
                            {{"node", "node-02"}, {"netdev", "ens4f0np0"}}));
  EXPECT_FALSE(EntityMatches({{"node", "node-02"}, {"device", "mlx5_3"}},
                             {{"node", "node-02"}, {"device", "mlx5_2"}}));
  EXPECT_FALSE(EntityMatches({{"rank", "5"}}, {{"rank", "6"}}));
}

TEST(ScoringTest, RecallEntityCausePrecisionAndFalseAlarms) {
  absl::StatusOr<Scenario> s = ParseScenario(R"(
duration: 60s
cluster: {nodes: 2, gpus: 4}
faults:
  - {kind: pause_storm, node: 1, device: mlx5_1, rank: 5, slowdown_pct: 40, start: 10s, duration: 20s}
  - {kind: congestion, node: 0, device: mlx5_0, start: 40s, duration: 10s}
)");
  ASSERT_TRUE(s.ok()) << s.status();
  const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  auto inc = [&](uint64_t id, std::string kind, std::map<std::string, std::string> e, double at,
                 std::string cause = "") {
    SimIncident i;
    i.id = id;
    i.kind = std::move(kind);
    i.entity = std::move(e);
    i.opened = t0 + absl::Seconds(at);
    if (!cause.empty()) i.causes.push_back({cause, ""});
    return i;
  };
  std::vector<SimIncident> got = {
      inc(1, "pause_storm", {{"node", "node-02"}, {"netdev", "ens2f0np0"}}, 13),
      inc(2, "straggler", {{"rank", "5"}, {"node", "node-02"}, {"job", "j"}}, 14, "pause_storm"),
      inc(3, "congestion", {{"node", "node-01"}, {"device", "mlx5_3"}}, 43),  // wrong port
      inc(4, "link_down", {{"node", "node-01"}, {"device", "mlx5_2"}}, 5),     // nothing explains it
  };
  ScoreReport r = Score(*s, t0, absl::Seconds(60), got);
  ASSERT_EQ(r.expectations.size(), 3u);
  EXPECT_TRUE(r.expectations[0].entity_ok);
  EXPECT_EQ(r.expectations[0].time_to_detect, absl::Seconds(3));
  EXPECT_TRUE(r.expectations[1].cause_ok);
  EXPECT_TRUE(r.expectations[2].detected);
  EXPECT_FALSE(r.expectations[2].entity_ok);
  EXPECT_FALSE(r.all_detected());
  const ClassScore& storm = r.classes.at("pause_storm");
  EXPECT_EQ(storm.recall(), 1.0);
  EXPECT_EQ(storm.precision(), 1.0);
  EXPECT_EQ(storm.cause(), 1.0);
  const ClassScore& cong = r.classes.at("congestion");
  EXPECT_EQ(cong.recall(), 1.0);
  EXPECT_EQ(cong.entity(), 0.0);
  EXPECT_EQ(cong.precision(), 0.0);
  ASSERT_EQ(r.false_alarms.size(), 1u);
  EXPECT_EQ(r.false_alarms[0].id, 4u);
  EXPECT_NEAR(r.node_hours, 2.0 / 60, 1e-9);
}

}  // namespace
}  // namespace ringside::sim
