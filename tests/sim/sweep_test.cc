// The seed sweep of ringside-sim (sim/sweep.h, sim/stats.h, sim/fork_pool.h): the confidence
// bounds and quantiles the report prints, pooling runs per fault class, a run's result crossing
// from the child process as JSON, the pool of child processes, the scoring of several faults of
// one class at once, and that different seeds give the job model and the animator different
// timelines (so more seeds are more trials, not the same run again).
#include "sim/sweep.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/cluster.h"
#include "sim/fork_pool.h"
#include "sim/job_model.h"
#include "sim/node_animator.h"
#include "sim/stats.h"
#include "sim/sysfs_tree.h"
#include "tests/testing/temp_dir.h"

namespace ringside::sim {
namespace {

TEST(SweepStatsTest, WilsonIntervalMatchesItsFormula) {
  EXPECT_EQ(WilsonInterval(0, 0).lower, 0);
  EXPECT_EQ(WilsonInterval(0, 0).upper, 1);
  // All successes: the lower bound is n / (n + z²).
  EXPECT_NEAR(WilsonInterval(10, 10).lower, 0.72247, 1e-4);
  EXPECT_NEAR(WilsonInterval(10, 10).upper, 1.0, 1e-12);
  EXPECT_NEAR(WilsonInterval(36, 36).lower, 0.90358, 1e-4);
  // 0.95 needs 73 straight successes.
  EXPECT_LT(WilsonInterval(72, 72).lower, 0.95);
  EXPECT_GE(WilsonInterval(73, 73).lower, 0.95);
  EXPECT_NEAR(WilsonInterval(5, 10).lower, 0.23659, 1e-4);
  EXPECT_NEAR(WilsonInterval(5, 10).upper, 0.76341, 1e-4);
  EXPECT_NEAR(WilsonInterval(95, 100).lower, 0.88825, 1e-4);
  EXPECT_NEAR(WilsonInterval(95, 100).upper, 0.97846, 1e-4);
  EXPECT_EQ(WilsonInterval(0, 10).lower, 0);
  EXPECT_NEAR(WilsonInterval(0, 10).upper, 0.27753, 1e-4);
  // Nonsense counts are clamped, never NaN.
  EXPECT_NEAR(WilsonInterval(12, 10).upper, 1, 1e-12);
  EXPECT_FALSE(std::isnan(WilsonInterval(-1, 10).lower));
}

TEST(SweepStatsTest, NearestRankQuantiles) {
  EXPECT_TRUE(std::isnan(NearestRankQuantile({}, 0.5)));
  EXPECT_EQ(NearestRankQuantile({7}, 0.95), 7);
  EXPECT_EQ(NearestRankQuantile({4, 1, 3, 2}, 0.5), 2);
  EXPECT_EQ(NearestRankQuantile({4, 1, 3, 2}, 0.95), 4);
  EXPECT_EQ(NearestRankQuantile({4, 1, 3, 2}, 0), 1);
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(NearestRankQuantile(v, 0.95), 95);
  EXPECT_EQ(NearestRankQuantile(v, 0.5), 50);
}

TEST(SweepStatsTest, PoissonUpperBound) {
  EXPECT_NEAR(PoissonUpper95(0), 2.9957, 1e-3);
  // Exact values (chi-square quantiles / 2): 4.7439, 6.2958, 16.9622.
  EXPECT_NEAR(PoissonUpper95(1), 4.7439, 0.05);
  EXPECT_NEAR(PoissonUpper95(2), 6.2958, 0.05);
  EXPECT_NEAR(PoissonUpper95(10), 16.9622, 0.1);
  EXPECT_LT(PoissonUpper95(1), PoissonUpper95(2));
}

TEST(SweepTest, SeedsStartAtTheFirstAndCountUp) {
  EXPECT_EQ(SweepSeeds(16, 3), (std::vector<uint64_t>{16, 17, 18}));
  EXPECT_EQ(SweepSeeds(5, 1), (std::vector<uint64_t>{5}));
  EXPECT_EQ(SweepSeeds(5, 0), (std::vector<uint64_t>{5}));
}

// A two-port, two-fault scenario scored on hand-made incidents.
class SweepScoringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Scenario> s = ParseScenario(R"(
name: two_downs
duration: 60s
cluster: {nodes: 2, gpus: 4}
faults:
  - {kind: link_down, node: node-01, device: mlx5_0, start: 10s, duration: 20s}
  - {kind: link_down, node: node-02, device: mlx5_2, start: 14s, duration: 20s}
)");
    ASSERT_TRUE(s.ok()) << s.status();
    s_ = *s;
  }
  SimIncident Inc(uint64_t id, std::string kind, std::string node, std::string device,
                  double at) const {
    SimIncident i;
    i.id = id;
    i.kind = std::move(kind);
    i.entity = {{"node", std::move(node)}, {"device", std::move(device)}, {"port", "1"}};
    i.opened = t0_ + absl::Seconds(at);
    i.summary = "s";
    return i;
  }
  SweepRun RunOf(std::vector<SimIncident> incs, uint64_t seed) const {
    SweepRun r;
    r.scenario = s_;
    r.scenario.seed = seed;
    r.wall_seconds = 60;
    r.cpu_seconds = 30;
    r.score = Score(s_, t0_, absl::Seconds(60), incs);
    return r;
  }
  Scenario s_;
  absl::Time t0_ = absl::FromUnixSeconds(1'700'000'000);
};

TEST_F(SweepScoringTest, AnotherFaultsIncidentIsNotADetection) {
  // Only the first port's link_down is raised: the second fault, whose window holds it, is
  // missed — not "detected with the wrong entity".
  const ScoreReport r = Score(s_, t0_, absl::Seconds(60), {Inc(1, "link_down", "node-01", "mlx5_0", 11)});
  ASSERT_EQ(r.expectations.size(), 2u);
  EXPECT_TRUE(r.expectations[0].detected && r.expectations[0].entity_ok);
  EXPECT_FALSE(r.expectations[1].detected);
  const ClassScore& c = r.classes.at("link_down");
  EXPECT_EQ(c.detected, 1);
  EXPECT_EQ(c.entity_ok, 1);
  EXPECT_EQ(c.raised, 1);
  EXPECT_EQ(c.raised_ok, 1);
  // A wrong port in the second fault's window is its detection with the wrong entity.
  const ScoreReport w = Score(s_, t0_, absl::Seconds(60),
                              {Inc(1, "link_down", "node-01", "mlx5_0", 11),
                               Inc(2, "link_down", "node-02", "mlx5_3", 15)});
  EXPECT_TRUE(w.expectations[1].detected);
  EXPECT_FALSE(w.expectations[1].entity_ok);
  EXPECT_EQ(w.classes.at("link_down").raised, 2);
  EXPECT_EQ(w.classes.at("link_down").raised_ok, 1);
}

TEST(SweepScoringOrderTest, TwoEpisodesOfOneEntityEachGetTheirOwnIncident) {
  absl::StatusOr<Scenario> s = ParseScenario(R"(
duration: 40s
cluster: {nodes: 1, gpus: 2}
faults:
  - {kind: job_slowdown, start: 10s, duration: 8s}
  - {kind: job_slowdown, start: 23s, duration: 9s}
)");
  ASSERT_TRUE(s.ok()) << s.status();
  const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  auto inc = [&](uint64_t id, double at) {
    SimIncident i;
    i.id = id;
    i.kind = "job_slowdown";
    i.entity = {{"job", s->job_id}, {"function", "AllReduce"}};
    i.opened = t0 + absl::Seconds(at);
    return i;
  };
  // Listed newest first (as the aggregator may): the second episode's incident lies in the first
  // fault's window too, but the first fault takes the earlier incident.
  const ScoreReport r = Score(*s, t0, absl::Seconds(40), {inc(2, 23.6), inc(1, 10.6)});
  ASSERT_EQ(r.expectations.size(), 2u);
  EXPECT_EQ(r.expectations[0].incident, 1u);
  EXPECT_EQ(r.expectations[0].time_to_detect, absl::Milliseconds(600));
  EXPECT_EQ(r.expectations[1].incident, 2u);
  EXPECT_EQ(r.expectations[1].time_to_detect, absl::Milliseconds(600));
  EXPECT_TRUE(r.all_detected());
  // And the live output names the episode that explains each incident.
  bool expected = false;
  EXPECT_EQ(ExplainingFault(*s, t0, inc(2, 23.6), &expected), 1);
  EXPECT_TRUE(expected);
  EXPECT_EQ(ExplainingFault(*s, t0, inc(1, 10.6), &expected), 0);
  // Only the first episode raised: the second is a miss.
  const ScoreReport m = Score(*s, t0, absl::Seconds(40), {inc(1, 10.6)});
  EXPECT_TRUE(m.expectations[0].detected);
  EXPECT_FALSE(m.expectations[1].detected);
}

TEST_F(SweepScoringTest, PoolsRunsPerClassWithBounds) {
  std::vector<SweepRun> runs = {
      RunOf({Inc(1, "link_down", "node-01", "mlx5_0", 11),
             Inc(2, "link_down", "node-02", "mlx5_2", 16)}, 1),
      RunOf({Inc(1, "link_down", "node-01", "mlx5_0", 12),
             Inc(2, "link_down", "node-02", "mlx5_1", 15),   // wrong port
             Inc(3, "congestion", "node-01", "mlx5_3", 50)}, 2),  // nothing explains it
  };
  std::map<std::string, int> runs_with;
  const std::map<std::string, ClassScore> t = TotalByClass(runs, &runs_with);
  const ClassScore& c = t.at("link_down");
  EXPECT_EQ(runs_with["link_down"], 2);
  EXPECT_EQ(c.faults, 4);
  EXPECT_EQ(c.expected, 4);
  EXPECT_EQ(c.detected, 4);
  EXPECT_EQ(c.entity_ok, 3);
  EXPECT_EQ(c.raised, 4);
  EXPECT_EQ(c.raised_ok, 3);
  EXPECT_EQ(c.ttd_seconds.size(), 4u);
  EXPECT_TRUE(runs[0].passed());
  EXPECT_FALSE(runs[1].passed());

  const std::string md = SweepMarkdown(runs, "# header\n");
  // value (hits/trials) ≥ Wilson lower bound: 3/4 → 0.30.
  EXPECT_NE(md.find("| link_down | 2 | 4 | 4 | 3 | 1 | 0.75 (3/4) ≥ 0.30 | 1.00 (4/4) ≥ 0.51 | "
                    "0.75 (3/4) ≥ 0.30 | — | 1.0 / 2.0 / 2.0 s |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("Incidents no injected fault explains: 1 in 0.07 simulated node-hours"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("By kind: congestion 1."), std::string::npos) << md;
  EXPECT_NE(md.find("| two_downs | 1 | 60 s | 0.50 | 2/2 | 0 | pass |"), std::string::npos) << md;
  EXPECT_NE(md.find("| two_downs | 2 | 60 s | 0.50 | 1/2 | 1 | **fail** | link_down "
                    "device=mlx5_2 node=node-02: got link_down #2"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("1 of 2 runs passed."), std::string::npos) << md;
  EXPECT_NE(md.find("### two_downs seed 2"), std::string::npos) << md;
  EXPECT_EQ(md.find("### two_downs seed 1"), std::string::npos) << md;
}

TEST_F(SweepScoringTest, NegativeClassesAndFailedRunsInTheReport) {
  absl::StatusOr<Scenario> s = ParseScenario(R"(
name: reset
duration: 60s
cluster: {nodes: 2, gpus: 4}
faults:
  - {kind: counter_reset, node: node-02, start: 10s, duration: 1s}
)");
  ASSERT_TRUE(s.ok()) << s.status();
  SweepRun bad;
  bad.scenario = *s;
  bad.score = Score(*s, t0_, absl::Seconds(60), {Inc(1, "link_down", "node-02", "mlx5_0", 12)});
  SweepRun broken;  // the cluster did not start: not pooled
  broken.scenario = *s;
  broken.error = "agent did not start";
  const std::string md = SweepMarkdown({bad, broken}, "");
  EXPECT_NE(md.find("| counter_reset | 1 | 1 | 0 | — | 1 | 1 raised |"), std::string::npos) << md;
  EXPECT_NE(md.find("agent did not start"), std::string::npos) << md;
  EXPECT_NE(md.find("0 of 2 runs passed."), std::string::npos) << md;
}

TEST_F(SweepScoringTest, RunResultRoundTripsThroughJson) {
  SweepRun r = RunOf({Inc(1, "link_down", "node-01", "mlx5_0", 11.5),
                      Inc(2, "link_down", "node-02", "mlx5_1", 15),
                      Inc(3, "congestion", "node-01", "mlx5_3", 50)}, 9);
  r.problems = {"the agent of node-02 exited"};
  r.interrupted = true;
  SweepRun back;
  back.scenario = r.scenario;
  ASSERT_TRUE(SweepRunFromJson(SweepRunToJson(r), &back).ok());
  EXPECT_EQ(back.wall_seconds, 60);
  EXPECT_EQ(back.cpu_seconds, 30);
  EXPECT_TRUE(back.interrupted);
  EXPECT_EQ(back.problems, r.problems);
  EXPECT_EQ(back.score.node_hours, r.score.node_hours);
  ASSERT_EQ(back.score.expectations.size(), 2u);
  EXPECT_EQ(back.score.expectations[0].time_to_detect, absl::Seconds(1.5));
  EXPECT_EQ(back.score.expectations[0].expect.entity, r.score.expectations[0].expect.entity);
  EXPECT_FALSE(back.score.expectations[1].entity_ok);
  EXPECT_EQ(back.score.expectations[1].got, r.score.expectations[1].got);
  ASSERT_EQ(back.score.false_alarms.size(), 1u);
  EXPECT_EQ(back.score.false_alarms[0].kind, "congestion");
  EXPECT_EQ(back.score.false_alarms[0].opened, t0_ + absl::Seconds(50));
  EXPECT_EQ(SweepMarkdown({back}, ""), SweepMarkdown({r}, ""));
  SweepRun junk;
  EXPECT_FALSE(SweepRunFromJson("{\"wall_seconds\": 1}", &junk).ok());
  EXPECT_FALSE(SweepRunFromJson("not json", &junk).ok());
}

TEST(ForkPoolTest, RunsEveryTaskAtMostJobsAtOnce) {
  ringside::testing::TempDir dir;
  const std::string d = dir.path();
  std::map<int, int> codes;
  ForkPoolOptions o;
  o.jobs = 2;
  const int started = RunInChildren(
      6,
      [&](int i) {
        // Count the tasks running now (each holds a marker file while it runs).
        const std::string me = absl::StrCat(d, "/running-", i);
        ::close(::open(me.c_str(), O_CREAT | O_WRONLY, 0644));
        int peak = 0;
        for (int k = 0; k < 20; ++k) {
          int now = 0;
          for (const auto& e : std::filesystem::directory_iterator(d)) {
            now += e.path().filename().string().rfind("running-", 0) == 0;
          }
          peak = std::max(peak, now);
          usleep(5000);
        }
        std::filesystem::remove(me);
        return peak > 2 ? 99 : 10 + i;
      },
      [&](int i, int rc) { codes[i] = rc; }, o);
  EXPECT_EQ(started, 6);
  ASSERT_EQ(codes.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(codes[i], 10 + i) << "task " << i;
}

TEST(ForkPoolTest, StopStartsNothingMore) {
  volatile std::sig_atomic_t stop = 0;
  ForkPoolOptions o;
  o.jobs = 1;
  o.stop = &stop;
  std::vector<int> done;
  const int started = RunInChildren(
      5, [](int) { return 0; },
      [&](int i, int) {
        done.push_back(i);
        stop = 1;  // as a signal handler would
      },
      o);
  EXPECT_EQ(started, 1);
  EXPECT_EQ(done, std::vector<int>{0});
}

TEST(SweepSeedTest, TheJobModelsTimelineDependsOnTheSeed) {
  Scenario s;
  s.nodes = 2;
  s.gpus = 4;
  s.jitter = 0.02;
  auto timeline = [&](uint64_t seed) {
    s.seed = seed;
    JobModel m(s, 1'700'000'000'000'000'000);
    std::vector<int64_t> t;
    for (int i = 0; i < 20; ++i) {
      const Iteration& it = m.Next();
      t.insert(t.end(), it.arrive_ns.begin(), it.arrive_ns.end());
      t.push_back(it.end_ns);
    }
    return t;
  };
  EXPECT_EQ(timeline(7), timeline(7));
  EXPECT_NE(timeline(7), timeline(8));
  // And the last rank to arrive changes with the seed (jitter, not a fixed order).
  std::set<int> lasts;
  for (uint64_t seed : SweepSeeds(1, 8)) {
    s.seed = seed;
    JobModel m(s, 0);
    const Iteration& it = m.Next();
    lasts.insert(static_cast<int>(
        std::max_element(it.arrive_ns.begin(), it.arrive_ns.end()) - it.arrive_ns.begin()));
  }
  EXPECT_GT(lasts.size(), 1u);
}

TEST(SweepSeedTest, TheClocksPhaseAgainstSamplingDependsOnTheSeed) {
  std::set<int> tenths;
  for (uint64_t seed : SweepSeeds(11, 20)) {
    const double p = SeedPhase(seed);
    EXPECT_GE(p, 0.0);
    EXPECT_LT(p, 1.0);
    tenths.insert(static_cast<int>(p * 10));
  }
  EXPECT_EQ(SeedPhase(11), SeedPhase(11));
  EXPECT_GE(tenths.size(), 5u);  // spread over the interval, not one phase
}

TEST(SweepSeedTest, TheAnimatorsCountersDependOnTheSeed) {
  auto counters = [](uint64_t seed) {
    ringside::testing::TempDir dir;
    SysfsTreeWriter tree(dir.path() + "/sys");
    HcaSpec h;
    h.name = "mlx5_0";
    h.link_layer = "Ethernet";
    h.netdev = "eth0";
    EXPECT_TRUE(tree.AddHca(h).ok());
    AnimatedPort p;
    p.device = "mlx5_0";
    p.roce = true;
    p.netdev = "eth0";
    NodeAnimator a(&tree, {p}, seed, "", AnimatorOptions{});
    for (int i = 1; i <= 20; ++i) EXPECT_TRUE(a.Step(absl::Milliseconds(250 * i)).ok());
    return ringside::testing::ReadFileOrEmpty(tree.root() + "/" + tree.IbPortDir("mlx5_0", 1) +
                                              "/counters/port_xmit_data");
  };
  const std::string a = counters(1000003), b = counters(2000006);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, counters(1000003));
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace ringside::sim
