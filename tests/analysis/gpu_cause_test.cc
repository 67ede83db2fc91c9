// Why a straggler is late, past the fabric: the whole analysis (FabricAnalysis) fed the agent's
// GPU and host series and the plugin's collective records, on the test's clock. A GPU in hardware
// thermal slowdown is its rank's cause; a power cap every GPU shares blames nobody; a rank whose
// cgroup is throttled by its CPU quota gets that host evidence; a clean one gets `host` with what
// was checked. And the order: a fabric incident first, then the rank's own GPU, then the host.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "analysis/fabric_analysis.h"
#include "analysis/sqlite_incident_store.h"
#include "analysis/straggler_cause.h"
#include "tests/analysis/fabric_sim.h"
#include "tests/testing/temp_dir.h"

namespace ringside::analysis {
namespace {

using ::testing::HasSubstr;
using testing::SimCounter;
using testing::SimState;

const char* const kNodes[] = {"node-a", "node-b"};

std::string Bus(int gpu) { return absl::StrFormat("0000:%02x:00.0", 0x19 + gpu); }
std::string Cgroup(int rank) { return absl::StrCat("/kubepods/burstable/pod-r", rank); }

// Two nodes, four GPUs and four ranks each: rank r runs on node r/4, GPU r%4.
class Cluster {
 public:
  struct Gpu {
    uint64_t bits = 0;
    double clock = 1980;
    uint64_t hw_thermal_ns_per_s = 0, power_cap_ns_per_s = 0;
  };
  Gpu gpu[8];
  double slow[8] = {};                // extra compute of rank r, as a fraction
  double cgroup_throttled[8] = {};    // share of rank r's CFS periods throttled
  double cpu_pressure[2] = {};        // share of node n's time some task stalled on CPU
  double processes[8] = {1, 1, 1, 1, 1, 1, 1, 1};  // compute processes on rank r's GPU

  explicit Cluster(FabricAnalysis& a) : a_(a), clock_ns_(absl::ToUnixNanos(t_)) {
    for (int r = 0; r < 8; ++r) {
      const std::string node = kNodes[r / 4], idx = std::to_string(r % 4);
      a.MapGpu(node, idx, absl::StrFormat("00000000:%02X:00.0", 0x19 + r % 4));  // NVML's form
      for (const char* c : {"throttle_hw_thermal_ns", "throttle_power_cap_ns"}) {
        counters_.push_back(std::make_unique<SimCounter>(node, "gpu", idx, "", c));
      }
      for (const char* c : {"nr_periods", "nr_throttled"}) {
        counters_.push_back(std::make_unique<SimCounter>(node, "cgroup", Cgroup(r), "", c));
      }
      for (const char* c : {"clock_event_reasons", "sm_clock_max_mhz", "utilization_gpu_percent",
                            "sm_clock_mhz", "compute_processes"}) {
        gauges_.push_back(std::make_unique<SimState>(node, "gpu", idx, "", c));
      }
    }
    for (const char* n : kNodes) {
      counters_.push_back(std::make_unique<SimCounter>(n, "host", "", "", "cpu_pressure_some_us"));
    }
  }

  // One second of every agent's samples and the collectives that completed in it, then a flush.
  void Second() {
    t_ += absl::Seconds(1);
    for (int r = 0; r < 8; ++r) {
      const Gpu& g = gpu[r];
      const double values[] = {static_cast<double>(g.bits), 1980, 95, g.clock, processes[r]};
      for (int i = 0; i < 5; ++i) a_.OnState(gauges_[r * 5 + i]->At(t_, values[i]));
      a_.OnCounter(counters_[r * 4 + 0]->Step(t_, g.hw_thermal_ns_per_s));
      a_.OnCounter(counters_[r * 4 + 1]->Step(t_, g.power_cap_ns_per_s));
      a_.OnCounter(counters_[r * 4 + 2]->Step(t_, 10));  // 100 ms CFS periods
      a_.OnCounter(counters_[r * 4 + 3]->Step(t_, static_cast<uint64_t>(10 * cgroup_throttled[r])));
    }
    for (int n = 0; n < 2; ++n) {
      a_.OnCounter(counters_[32 + n]->Step(t_, static_cast<uint64_t>(1e6 * cpu_pressure[n])));
    }
    std::normal_distribution<double> jitter(0, 0.0005);
    while (clock_ns_ < absl::ToUnixNanos(t_)) {
      int64_t arrive[8], latest = 0;
      for (int r = 0; r < 8; ++r) {
        arrive[r] = clock_ns_ + static_cast<int64_t>((0.1 * (1 + slow[r]) + std::abs(jitter(rng_))) * 1e9);
        latest = std::max(latest, arrive[r]);
      }
      for (int r = 0; r < 8; ++r) {
        CollectiveObservation o;
        o.job = "job-1";
        o.comm_id = 7;
        o.rank = r;
        o.nranks = 8;
        o.global_rank = r;
        o.function = "AllReduce";
        o.seq = seq_;
        o.bytes = 1 << 26;
        o.start_ns = arrive[r];
        o.stop_ns = latest + 5'000'000;
        o.host = kNodes[r / 4];
        o.gpu_pci_bus_id = Bus(r % 4);
        o.cgroup = Cgroup(r);
        a_.OnCollective(o);
      }
      ++seq_;
      clock_ns_ = latest + 5'000'000;
    }
    ASSERT_TRUE(a_.Flush(t_).ok());
  }
  void Seconds(int n) {
    for (int i = 0; i < n; ++i) Second();
  }
  const Incident* Open(IncidentKind kind) const {
    for (const Incident* inc : a_.incidents().Open()) {
      if (inc->kind == kind) return inc;
    }
    return nullptr;
  }

 private:
  FabricAnalysis& a_;
  absl::Time t_ = testing::T0();
  int64_t clock_ns_;
  uint64_t seq_ = 0;
  std::mt19937_64 rng_{5};
  std::vector<std::unique_ptr<SimCounter>> counters_;
  std::vector<std::unique_ptr<SimState>> gauges_;
};

TEST(GpuCauseTest, AGpuInHwThermalSlowdownIsItsRanksStragglerCause) {
  FabricAnalysis a({}, nullptr);
  Cluster c(a);
  c.Seconds(10);
  EXPECT_TRUE(a.incidents().Open().empty());
  // Rank 6 runs on node-b GPU 2 (0000:1b:00.0): it overheats, its clocks halve, it falls behind.
  c.gpu[6] = {0x40, 990, 800'000'000, 0};
  c.slow[6] = 0.5;
  c.Seconds(20);
  const Incident* gpu = c.Open(IncidentKind::kGpuThrottled);
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->entity.at("node"), "node-b");
  EXPECT_EQ(gpu->entity.at("gpu"), "2");
  EXPECT_EQ(gpu->entity.at("pci_bus_id"), "0000:1b:00.0");
  const Incident* s = c.Open(IncidentKind::kStraggler);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->entity.at("rank"), "6");
  ASSERT_FALSE(s->causes.empty());
  EXPECT_EQ(s->causes[0].kind, "gpu_throttled");
  EXPECT_EQ(s->causes[0].scope, "gpu");
  EXPECT_EQ(s->causes[0].incident_id, gpu->id);
  EXPECT_EQ(s->causes[0].key, StableIncidentKey(*gpu));
  EXPECT_THAT(s->causes[0].summary, HasSubstr("hardware thermal slowdown"));
  EXPECT_EQ(a.incidents().Open().size(), 2u);
}

TEST(GpuCauseTest, EveryGpuPowerCappedBlamesNobody) {
  FabricAnalysis a({}, nullptr);
  Cluster c(a);
  for (int r = 0; r < 8; ++r) c.gpu[r] = {0x4, 1500.0 + 20 * (r % 2), 0, 1'000'000'000};
  c.Seconds(60);
  EXPECT_TRUE(a.incidents().Open().empty()) << IncidentJson(*a.incidents().Open()[0]);
}

TEST(GpuCauseTest, ACpuThrottledCgroupIsItsRanksHostCause) {
  FabricAnalysis a({}, nullptr);
  Cluster c(a);
  c.cgroup_throttled[1] = 0.4;  // rank 1's pod hits its CPU limit ...
  c.Seconds(40);
  c.slow[1] = 0.5;  // ... and once its step needs more CPU, its launches come late
  c.Seconds(20);
  const Incident* s = c.Open(IncidentKind::kStraggler);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->entity.at("rank"), "1");
  ASSERT_FALSE(s->causes.empty());
  const CauseLink& cause = s->causes[0];
  EXPECT_EQ(cause.kind, "cgroup_cpu_throttled");
  EXPECT_EQ(cause.scope, "host");
  EXPECT_EQ(cause.entity.at("cgroup"), Cgroup(1));
  EXPECT_NEAR(cause.evidence.at("cgroup_throttled_share"), 0.4, 0.01);
  EXPECT_THAT(cause.summary, HasSubstr("was throttled in 40% of its CFS periods"));
  // The numbers stay as when the cause was chosen: later flushes do not rewrite it.
  const auto causes = s->causes;
  c.cgroup_throttled[1] = 0.45;
  c.Seconds(3);
  s = c.Open(IncidentKind::kStraggler);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->causes, causes);
}

TEST(GpuCauseTest, NothingFoundIsHostWithWhatWasChecked) {
  FabricAnalysis a({}, nullptr);
  Cluster c(a);
  c.cpu_pressure[0] = 0.03;
  c.processes[2] = 3;  // rank 2's GPU is time-shared with two other processes
  c.Seconds(40);
  c.slow[2] = 0.5;
  c.Seconds(20);
  const Incident* s = c.Open(IncidentKind::kStraggler);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->causes.size(), 1u);
  const CauseLink& cause = s->causes[0];
  EXPECT_EQ(cause.kind, "host");
  EXPECT_EQ(cause.evidence.at("gpu_incidents"), 0);
  EXPECT_EQ(cause.evidence.at("cgroup_throttled_share"), 0);
  EXPECT_NEAR(cause.evidence.at("cpu_pressure_some_share"), 0.03, 0.005);
  EXPECT_THAT(cause.summary, HasSubstr("no GPU incident on GPU 2 (0000:1b:00.0)"));
  EXPECT_THAT(cause.summary, HasSubstr("CPU pressure 3%"));
  EXPECT_EQ(cause.evidence.at("gpu_compute_processes"), 3);
  EXPECT_THAT(cause.summary, HasSubstr("GPU 2 (0000:1b:00.0) shared by 3 compute processes"));
}

// The order, on hand-made incidents: fabric, then the rank's own GPU, then host evidence; `where`
// (the straggler detector's split) narrows the search.
class CauseOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_.Map("node-b", "2", "00000000:1B:00.0");
    CollectiveObservation o;
    o.job = "job-1";
    o.rank = 6;
    o.global_rank = 6;
    o.host = "node-b";
    o.stop_ns = absl::ToUnixNanos(t_);
    o.gpu_pci_bus_id = "0000:1b:00.0";
    o.cgroup = Cgroup(6);
    correlator_.ObserveCollective(o);
    correlator_.SetCauseContext(&directory_, &host_);
    straggler_.id = 10;
    straggler_.kind = IncidentKind::kStraggler;
    straggler_.entity = {{"job", "job-1"}, {"rank", "6"}, {"node", "node-b"}};
    straggler_.opened = straggler_.updated = t_;
    gpu_.id = 11;
    gpu_.kind = IncidentKind::kGpuXid;
    gpu_.entity = {{"node", "node-b"}, {"gpu", "2"}};  // no bus id: found through the directory
    gpu_.opened = t_ - absl::Minutes(1);
    gpu_.summary = "XID 79 on GPU 2 on node-b";
    other_gpu_ = gpu_;
    other_gpu_.id = 12;
    other_gpu_.entity = {{"node", "node-b"}, {"gpu", "3"}, {"pci_bus_id", "0000:1c:00.0"}};
    fabric_.id = 13;
    fabric_.kind = IncidentKind::kLinkFlapping;
    fabric_.entity = {{"node", "node-b"}, {"device", "mlx5_2"}, {"port", "1"}};
    fabric_.opened = t_ - absl::Minutes(1);
    // Rank 6's cgroup throttled in half its periods.
    SimCounter periods("node-b", "cgroup", Cgroup(6), "", "nr_periods");
    SimCounter throttled("node-b", "cgroup", Cgroup(6), "", "nr_throttled");
    for (int s = 1; s <= 10; ++s) {
      host_.ObserveCounter(periods.Step(t_ - absl::Seconds(10 - s), 10));
      host_.ObserveCounter(throttled.Step(t_ - absl::Seconds(10 - s), 5));
    }
  }
  std::vector<CauseLink> Causes(std::vector<const Incident*> candidates) {
    return correlator_.CausesOf(straggler_, candidates);
  }

  absl::Time t_ = testing::T0();
  GpuDirectory directory_;
  HostSignals host_;
  Correlator correlator_;
  Incident straggler_, gpu_, other_gpu_, fabric_;
};

TEST_F(CauseOrderTest, FabricThenOwnGpuThenHost) {
  std::vector<CauseLink> c = Causes({&gpu_, &fabric_});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].kind, "link_flapping");
  c = Causes({&other_gpu_, &gpu_});  // another GPU of the node is not rank 6's
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].kind, "gpu_xid");
  EXPECT_EQ(c[0].incident_id, 11u);
  c = Causes({&other_gpu_});
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].kind, "cgroup_cpu_throttled");
  EXPECT_NEAR(c[0].evidence.at("cgroup_throttled_share"), 0.5, 1e-9);
}

TEST_F(CauseOrderTest, WhereNarrowsTheSearch) {
  StragglerCauseContext ctx;
  ctx.gpus = &directory_;
  ctx.host = &host_;
  const RankPlacement rank = correlator_.PlacementOf("job-1", 6);
  EXPECT_EQ(rank.gpu_pci_bus_id, "0000:1b:00.0");
  std::vector<CauseLink> c = NonFabricCauses(straggler_, rank, LatenessWhere::kHost, {&gpu_}, ctx);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].kind, "cgroup_cpu_throttled");  // late on the host: its GPU is not asked
  c = NonFabricCauses(straggler_, rank, LatenessWhere::kGpu, {&other_gpu_}, ctx);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].kind, "host");  // late on the GPU, nothing on it: host evidence is not asked
  EXPECT_EQ(c[0].evidence.count("cgroup_throttled_share"), 0u);
  EXPECT_THAT(c[0].summary, HasSubstr("compute behind it on the GPU"));
  straggler_.entity["where"] = "host";
  EXPECT_EQ(WhereOf(straggler_), LatenessWhere::kHost);
  c = Causes({&gpu_});
  EXPECT_EQ(c[0].kind, "cgroup_cpu_throttled");
}

TEST(CauseEvidenceTest, SurvivesTheStore) {
  ringside::testing::TempDir tmp;
  auto store = SqliteIncidentStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status();
  CauseLink host;
  host.kind = "host";
  host.scope = "host";
  host.evidence = {{"gpu_incidents", 0}, {"cgroup_throttled_share", 0.02}};
  {
    IncidentManager m(store->get());
    ASSERT_TRUE(m.Load(testing::T0()).ok());
    Finding f;
    f.kind = IncidentKind::kStraggler;
    f.entity = {{"job", "j"}, {"rank", "1"}};
    f.at = testing::T0();
    ASSERT_TRUE(m.Apply(f).ok());
    ASSERT_TRUE(m.SetCauses(m.Open()[0]->id, {host}, testing::T0()).ok());
  }
  IncidentManager m(store->get());
  ASSERT_TRUE(m.Load(testing::T0()).ok());
  ASSERT_EQ(m.Open().size(), 1u);
  ASSERT_EQ(m.Open()[0]->causes.size(), 1u);
  EXPECT_EQ(m.Open()[0]->causes[0].evidence, host.evidence);
}

}  // namespace
}  // namespace ringside::analysis
