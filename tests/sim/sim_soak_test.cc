// The virtual-clock soak (sim/soak.h): a fault-free cluster soaked for simulated node-hours raises
// nothing; the same path raises the expected incidents when a pause storm, a link flap or a
// straggler is injected (so "0 false alarms" means something); runs are deterministic in the
// seed; scenarios the soak cannot simulate are refused.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/scenario.h"
#include "sim/soak.h"
#include "tests/testing/temp_dir.h"

namespace ringside::sim {
namespace {

// The trees are rewritten every cycle: on tmpfs when the machine has one (as ringside-sim does).
class WorkDir {
 public:
  WorkDir() {
    std::string tmpl = "/dev/shm/ringside-soak-test-XXXXXX";
    if (access("/dev/shm", W_OK) == 0 && mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~WorkDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.empty() ? fallback_.path() : path_; }

 private:
  std::string path_;
  ringside::testing::TempDir fallback_;
};

absl::StatusOr<SoakResult> Soak(const Scenario& s, double node_hours) {
  WorkDir dir;
  SoakOptions o;
  o.node_hours = node_hours;
  o.work_dir = dir.path();
  return RunSoak(s, o);
}

std::string Describe(const SoakResult& r) {
  std::string out;
  for (const SimIncident& i : r.incidents) {
    absl::StrAppend(&out, i.kind, " ", EntityText(i.entity), " at +",
                    absl::FormatDuration(i.opened - r.t0), "; ");
  }
  return out;
}

bool Raised(const SoakResult& r, const std::string& kind, const std::string& node,
            const std::string& device) {
  return std::any_of(r.incidents.begin(), r.incidents.end(), [&](const SimIncident& i) {
    auto n = i.entity.find("node");
    auto d = i.entity.find("device");
    return i.kind == kind && n != i.entity.end() && n->second == node &&
           (device.empty() || (d != i.entity.end() && d->second == device));
  });
}

TEST(SimSoakTest, FaultFreeNoisyClusterRaisesNothingOverNodeHours) {
  absl::StatusOr<Scenario> s =
      LoadScenario(std::string(RINGSIDE_SOURCE_DIR) + "/tests/scenarios/fault_free_noisy.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->faults.empty());
  // Four nodes of four rails of the scenario (its noise, background noise and job jitter) sampled
  // at 1 s, the production interval, for 2 node-hours (30 simulated minutes).
  s->nodes = 4;
  s->gpus = 4;
  s->interval = absl::Seconds(1);
  absl::StatusOr<SoakResult> r = Soak(*s, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->node_hours, 2, 0.01);
  EXPECT_EQ(r->simulated, absl::Seconds(1800));
  EXPECT_EQ(r->cycles, 4u * 1800u);
  EXPECT_EQ(r->read_errors, 0u);
  // Every port's counters went through: 4 rails, dozens of series each, per node and cycle.
  EXPECT_GT(r->samples, r->cycles * 4 * 20);
  // All-reduces of 16 ranks every ~135 ms.
  EXPECT_GT(r->collective_records, 1800u * 16 * 6);
  EXPECT_TRUE(r->incidents.empty()) << Describe(*r);
  EXPECT_EQ(r->false_alarms(), 0u);
  EXPECT_EQ(r->false_alarms_per_1000h(), 0.0);
  EXPECT_GT(r->speedup(), 1.0);
}

constexpr char kPauseStorm[] = R"(
name: soak_pause_storm
seed: 15
duration: 30s
cluster: {nodes: 4, gpus: 4, nodes_per_leaf: 4, interval: 1s}
job: {compute: 80ms, collective: 10ms}
faults:
  - kind: pause_storm
    node: node-02
    device: mlx5_3
    rank: 7
    slowdown_pct: 40
    start: 8s
    duration: 18s
)";

TEST(SimSoakTest, SamePathRaisesAnInjectedPauseStormAndItsStraggler) {
  absl::StatusOr<Scenario> s = ParseScenario(kPauseStorm);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<SoakResult> r = Soak(*s, 4 * 90 / 3600.0);  // 90 s
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(Raised(*r, "pause_storm", "node-02", "mlx5_3")) << Describe(*r);
  EXPECT_TRUE(Raised(*r, "straggler", "node-02", "")) << Describe(*r);
  EXPECT_TRUE(r->score.all_detected()) << Describe(*r);
  EXPECT_EQ(r->false_alarms(), 0u) << Describe(*r);
  // The soak counts what no fault explains: the same incidents with the fault taken away from the
  // ground truth are false alarms.
  Scenario blind = *s;
  blind.faults.clear();
  ScoreReport score = Score(blind, r->t0, r->simulated, r->incidents);
  EXPECT_EQ(score.false_alarms.size(), r->incidents.size());
}

TEST(SimSoakTest, SamePathRaisesAnInjectedLinkFlap) {
  absl::StatusOr<Scenario> s = ParseScenario(R"(
name: soak_link_flap
seed: 11
cluster: {nodes: 3, gpus: 4, nodes_per_leaf: 3, interval: 1s}
job: {compute: 80ms, collective: 10ms}
faults:
  - kind: link_flap
    node: node-02
    device: mlx5_1
    start: 8s
    duration: 20s
)");
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<SoakResult> r = Soak(*s, 3 * 60 / 3600.0);  // 60 s
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(Raised(*r, "link_flapping", "node-02", "mlx5_1")) << Describe(*r);
  EXPECT_TRUE(r->score.all_detected()) << Describe(*r);
  EXPECT_EQ(r->false_alarms(), 0u) << Describe(*r);
}

TEST(SimSoakTest, DeterministicInTheSeed) {
  absl::StatusOr<Scenario> s = ParseScenario(kPauseStorm);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<SoakResult> a = Soak(*s, 4 * 60 / 3600.0);
  absl::StatusOr<SoakResult> b = Soak(*s, 4 * 60 / 3600.0);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->samples, b->samples);
  EXPECT_EQ(a->collective_records, b->collective_records);
  ASSERT_EQ(a->incidents.size(), b->incidents.size());
  ASSERT_FALSE(a->incidents.empty());
  for (size_t i = 0; i < a->incidents.size(); ++i) {
    EXPECT_EQ(a->incidents[i].kind, b->incidents[i].kind);
    EXPECT_EQ(a->incidents[i].entity, b->incidents[i].entity);
    EXPECT_EQ(a->incidents[i].opened, b->incidents[i].opened);
  }
}

TEST(SimSoakTest, RefusesWhatItCannotSimulate) {
  absl::StatusOr<Scenario> crash = ParseScenario(R"(
name: c
cluster: {nodes: 2, gpus: 2}
faults:
  - kind: agent_crash
    node: node-01
    start: 5s
)");
  ASSERT_TRUE(crash.ok()) << crash.status();
  EXPECT_EQ(Soak(*crash, 0.01).status().code(), absl::StatusCode::kInvalidArgument);

  absl::StatusOr<Scenario> args = ParseScenario(R"(
name: a
cluster: {nodes: 2, gpus: 2}
aggregator_args: ["--max-nodes=3"]
)");
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(Soak(*args, 0.01).status().code(), absl::StatusCode::kInvalidArgument);

  absl::StatusOr<Scenario> ok = ParseScenario("name: z\ncluster: {nodes: 2, gpus: 2}\n");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(Soak(*ok, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringside::sim
