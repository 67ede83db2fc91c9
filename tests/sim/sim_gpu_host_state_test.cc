// The simulator's GPU and host knobs (sim/nvml_state.h, sim/host_state.h) read back through the
// agent's real collectors: a thermal slowdown on one GPU, the power cap, an XID, a throttled rank
// cgroup, and the gpu_*/cpu_throttled fault kinds in a scenario file.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>

#include "collectors/host/host_collector.h"
#include "collectors/nvml/nvml_collector.h"
#include "sim/host_state.h"
#include "sim/nvml_state.h"
#include "sim/scenario.h"
#include "tests/testing/temp_dir.h"

namespace ringside::sim {
namespace {

using collectors::CollectorSnapshot;
using collectors::CycleErrors;

std::optional<uint64_t> Get(const CollectorSnapshot& s, const std::string& source,
                            const std::string& device, const std::string& counter) {
  for (size_t i = 0; i < s.table->defs.size(); ++i) {
    const collectors::SeriesDef& d = s.table->defs[i];
    if (d.source == source && d.device == device && d.counter == counter &&
        (s.values[i].status == collectors::ValueStatus::kOk ||
         s.values[i].status == collectors::ValueStatus::kStale)) {
      return s.values[i].raw;
    }
  }
  return std::nullopt;
}

TEST(SimGpuStateTest, ThermalSlowdownPowerCapAndXidReachTheCollector) {
  testing::TempDir dir;
  const std::string config = dir.path() + "/nvml.conf";
  setenv("RINGSIDE_FAKE_NVML_CONFIG", config.c_str(), 1);
  NvmlState state(config, 0, 2, 1);
  ASSERT_TRUE(state.Write().ok());
  collectors::NvmlOptions o;
  o.library = FAKE_NVML_COMPLETE;
  o.slow_interval = absl::ZeroDuration();
  collectors::NvmlCollector c(o);
  ASSERT_TRUE(c.enabled()) << c.status();
  CollectorSnapshot s;
  CycleErrors e;
  c.Collect(absl::Now(), s, e);
  EXPECT_EQ(e.count, 0u);
  EXPECT_EQ(Get(s, "gpu", "1", "clock_event_reasons"), 0u);
  EXPECT_EQ(Get(s, "gpu", "1", "throttle_hw_thermal_ns"), 0u);
  EXPECT_EQ(Get(s, "gpu", "1", "compute_processes"), 0u);

  state.SetThermalSlowdown(1, true, absl::Now() - absl::Seconds(2));
  for (int g = 0; g < 2; ++g) state.SetPowerCap(g, true, absl::Now() - absl::Seconds(1));
  state.AddXid(0, 79);
  ASSERT_TRUE(state.Write().ok());
  c.Collect(absl::Now(), s, e);
  EXPECT_EQ(Get(s, "gpu", "1", "clock_event_reasons"), 0x48u);
  EXPECT_EQ(Get(s, "gpu", "1", "sm_clock_mhz"), 990u);
  EXPECT_GE(Get(s, "gpu", "1", "throttle_hw_thermal_ns").value_or(0), 1'900'000'000u);
  EXPECT_EQ(Get(s, "gpu", "0", "throttle_hw_thermal_ns"), 0u);
  EXPECT_GE(Get(s, "gpu", "0", "throttle_power_cap_ns").value_or(0), 900'000'000u);
  absl::StatusOr<std::vector<collectors::LinkEvent>> xid =
      c.xid_events()->Wait(absl::Milliseconds(500), absl::Now());
  ASSERT_TRUE(xid.ok()) << xid.status();
  ASSERT_EQ(xid->size(), 1u);
  EXPECT_EQ((*xid)[0].detail, "XID 79");

  // The slowdown ends: the counter stops where it was.
  state.SetThermalSlowdown(1, false, absl::Now());
  ASSERT_TRUE(state.Write().ok());
  c.Collect(absl::Now(), s, e);
  const uint64_t stopped = Get(s, "gpu", "1", "throttle_hw_thermal_ns").value_or(0);
  absl::SleepFor(absl::Milliseconds(50));
  c.Collect(absl::Now(), s, e);
  EXPECT_EQ(Get(s, "gpu", "1", "throttle_hw_thermal_ns"), stopped);
  EXPECT_EQ(Get(s, "gpu", "1", "clock_event_reasons"), 0x4u) << "still power-capped";
  unsetenv("RINGSIDE_FAKE_NVML_CONFIG");
}

TEST(SimHostStateTest, AThrottledRankCgroupGrowsItsThrottlingCounters) {
  testing::TempDir dir;
  HostState host(dir.path(), 8, 8);
  ASSERT_TRUE(host.Write(absl::ZeroDuration()).ok());
  EXPECT_EQ(testing::ReadFileOrEmpty(host.CgroupFile(9)), "0::/ringside-sim.slice/rank-9.scope\n");
  collectors::HostOptions o;
  o.procfs_root = host.procfs_root();
  o.sysfs_root = dir.path() + "/sys";
  o.cgroups = [] { return std::vector<std::string>{RankCgroup(9), RankCgroup(10)}; };
  collectors::HostCollector c(o);
  CollectorSnapshot s;
  CycleErrors e;
  c.Collect(absl::Now(), s, e);
  EXPECT_EQ(e.count, 0u);
  EXPECT_EQ(Get(s, "host", "", "cpu_pressure_some_us"), 1000u);
  EXPECT_EQ(Get(s, "cgroup", RankCgroup(9), "nr_throttled"), 0u);

  host.SetThrottled(9, 0.4, absl::Seconds(1));
  ASSERT_TRUE(host.Write(absl::Seconds(11)).ok());
  c.Collect(absl::Now(), s, e);
  EXPECT_EQ(Get(s, "cgroup", RankCgroup(9), "nr_throttled"), 100u);          // 10 s x 10/s
  EXPECT_EQ(Get(s, "cgroup", RankCgroup(9), "throttled_usec"), 4'000'000u);  // 40 % of 10 s
  EXPECT_EQ(Get(s, "cgroup", RankCgroup(10), "nr_throttled"), 0u);
}

TEST(SimScenarioTest, GpuAndHostFaultKindsParse) {
  absl::StatusOr<Scenario> s = ParseScenario(R"(
name: gpu-causes
cluster: {nodes: 2, gpus: 8}
faults:
  - {kind: gpu_thermal_slowdown, node: 1, gpu: 3, rank: 11, slowdown_pct: 30, start: 10s, duration: 40s}
  - {kind: gpu_power_cap, start: 0s, duration: 60s}
  - {kind: gpu_xid, node: 0, gpu: 2, xid: 48, start: 20s}
  - {kind: cpu_throttled, rank: 5, throttled_share: 0.5, slowdown_pct: 20, start: 30s}
)");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->faults.size(), 4u);
  EXPECT_EQ(s->faults[0].kind, FaultKind::kGpuThermalSlowdown);
  EXPECT_EQ(s->faults[0].gpu, 3);
  EXPECT_EQ(s->faults[1].kind, FaultKind::kGpuPowerCap);
  EXPECT_EQ(s->faults[2].xid, 48u);
  EXPECT_EQ(s->faults[3].kind, FaultKind::kCpuThrottled);
  EXPECT_EQ(s->faults[3].node, 0);
  EXPECT_DOUBLE_EQ(s->faults[3].throttled_share, 0.5);
  EXPECT_FALSE(ParseScenario("faults:\n  - {kind: cpu_throttled, start: 1s}\n").ok())
      << "cpu_throttled needs a rank";
}

}  // namespace
}  // namespace ringside::sim
