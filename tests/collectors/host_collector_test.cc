// HostCollector (collectors/host/) on generated /proc and /sys trees: node pressure (PSI) and the
// CPU throttling of the cgroups the NCCL plugins report.
#include "collectors/host/host_collector.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/testing/fault_fs.h"
#include "tests/testing/temp_dir.h"

namespace ringside::collectors {
namespace {

constexpr char kCpuPressure[] =
    "some avg10=1.50 avg60=0.80 avg300=0.20 total=123456\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=789\n";
constexpr char kMemoryPressure[] =
    "some avg10=0.00 avg60=0.00 avg300=0.00 total=11\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=7\n";
constexpr char kIoPressure[] =
    "some avg10=0.00 avg60=0.00 avg300=0.00 total=5000\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=4000\n";
// A throttled training container (kubelet CPU limit).
constexpr char kRankCgroup[] =
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/"
    "cri-containerd-abcd.scope";
constexpr char kCpuStat[] =
    "usage_usec 9000000\nuser_usec 8000000\nsystem_usec 1000000\ncore_sched.force_idle_usec 0\n"
    "nr_periods 100\nnr_throttled 40\nthrottled_usec 4000000\nnr_bursts 0\nburst_usec 0\n";

struct Cycle {
  CollectorSnapshot snap;
  CycleErrors errors;
};

class HostCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    proc_ = dir_.path() + "/proc";
    sys_ = dir_.path() + "/sys";
    Write(proc_ + "/pressure/cpu", kCpuPressure);
    Write(proc_ + "/pressure/memory", kMemoryPressure);
    Write(proc_ + "/pressure/io", kIoPressure);
    Write(sys_ + "/fs/cgroup" + kRankCgroup + "/cpu.stat", kCpuStat);
  }
  static void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::trunc) << text;
  }
  HostOptions Options() {
    HostOptions o;
    o.procfs_root = proc_;
    o.sysfs_root = sys_;
    o.cgroups = [this] { return cgroups_; };
    return o;
  }
  static Cycle Run(HostCollector& c) {
    Cycle cycle;
    c.Collect(absl::FromUnixSeconds(1700000000), cycle.snap, cycle.errors);
    EXPECT_EQ(cycle.snap.collector, "host");
    EXPECT_EQ(cycle.snap.values.size(), cycle.snap.table->defs.size());
    return cycle;
  }
  static std::optional<uint64_t> Get(const Cycle& c, const std::string& source,
                                     const std::string& device, const std::string& counter) {
    for (size_t i = 0; i < c.snap.table->defs.size(); ++i) {
      const SeriesDef& d = c.snap.table->defs[i];
      if (d.source == source && d.device == device && d.counter == counter) {
        EXPECT_EQ(c.snap.values[i].status, ValueStatus::kOk);
        EXPECT_EQ(d.kind, SeriesKind::kCounter);
        EXPECT_EQ(d.port, "");
        return c.snap.values[i].raw;
      }
    }
    return std::nullopt;
  }

  ringside::testing::TempDir dir_;
  std::string proc_, sys_;
  std::vector<std::string> cgroups_;
};

TEST_F(HostCollectorTest, NodePressureTotalsInMicroseconds) {
  HostCollector c(Options());
  Cycle cycle = Run(c);
  EXPECT_EQ(cycle.errors.count, 0u);
  EXPECT_EQ(Get(cycle, "host", "", "cpu_pressure_some_us"), 123456u);
  EXPECT_EQ(Get(cycle, "host", "", "cpu_pressure_full_us"), 789u);
  EXPECT_EQ(Get(cycle, "host", "", "memory_pressure_some_us"), 11u);
  EXPECT_EQ(Get(cycle, "host", "", "memory_pressure_full_us"), 7u);
  EXPECT_EQ(Get(cycle, "host", "", "io_pressure_some_us"), 5000u);
  EXPECT_EQ(Get(cycle, "host", "", "io_pressure_full_us"), 4000u);
  for (const SeriesDef& d : cycle.snap.table->defs) {
    EXPECT_EQ(d.unit, Unit::kMicroseconds) << d.counter;
    EXPECT_EQ(d.width, 64) << d.counter;
  }
  // Values move between cycles through the same descriptors.
  Write(proc_ + "/pressure/cpu",
        "some avg10=0 avg60=0 avg300=0 total=200000\nfull avg10=0 avg60=0 avg300=0 total=800\n");
  Cycle next = Run(c);
  EXPECT_EQ(Get(next, "host", "", "cpu_pressure_some_us"), 200000u);
  EXPECT_EQ(next.snap.table, cycle.snap.table) << "same series: same table";
}

TEST_F(HostCollectorTest, OldKernelWithoutCpuFullLineAndNoPsiAtAll) {
  Write(proc_ + "/pressure/cpu", "some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n");
  HostCollector c(Options());
  Cycle cycle = Run(c);
  EXPECT_EQ(cycle.errors.count, 0u);
  EXPECT_EQ(Get(cycle, "host", "", "cpu_pressure_some_us"), 42u);
  EXPECT_EQ(Get(cycle, "host", "", "cpu_pressure_full_us"), std::nullopt);
  std::filesystem::remove_all(proc_ + "/pressure");
  HostCollector none(Options());
  Cycle empty = Run(none);
  EXPECT_EQ(empty.errors.count, 0u) << "no PSI (psi=0, kernel before 4.20) is not an error";
  EXPECT_TRUE(empty.snap.table->defs.empty());
}

TEST_F(HostCollectorTest, RankCgroupThrottling) {
  cgroups_ = {kRankCgroup};
  HostCollector c(Options());
  Cycle cycle = Run(c);
  EXPECT_EQ(cycle.errors.count, 0u);
  EXPECT_EQ(Get(cycle, "cgroup", kRankCgroup, "nr_periods"), 100u);
  EXPECT_EQ(Get(cycle, "cgroup", kRankCgroup, "nr_throttled"), 40u);
  EXPECT_EQ(Get(cycle, "cgroup", kRankCgroup, "throttled_usec"), 4000000u);
  EXPECT_EQ(Get(cycle, "cgroup", kRankCgroup, "usage_usec"), 9000000u);
  EXPECT_EQ(Get(cycle, "cgroup", kRankCgroup, "user_usec"), std::nullopt) << "not exported";
  // A cgroup without the cpu controller has no nr_* lines: only usage.
  const std::string plain = "/system.slice/job.scope";
  Write(sys_ + "/fs/cgroup" + plain + "/cpu.stat", "usage_usec 5\nuser_usec 3\nsystem_usec 2\n");
  cgroups_.push_back(plain);
  Cycle two = Run(c);
  EXPECT_EQ(Get(two, "cgroup", plain, "usage_usec"), 5u);
  EXPECT_EQ(Get(two, "cgroup", plain, "nr_throttled"), std::nullopt);
  // The rank ended: its cgroup is gone, its series go without an error.
  std::filesystem::remove_all(sys_ + "/fs/cgroup/kubepods.slice");
  Cycle gone = Run(c);
  EXPECT_EQ(gone.errors.count, 0u);
  EXPECT_EQ(Get(gone, "cgroup", kRankCgroup, "nr_throttled"), std::nullopt);
  EXPECT_EQ(Get(gone, "cgroup", plain, "usage_usec"), 5u);
}

TEST_F(HostCollectorTest, BadContentAndBadPathsAreCountedErrorsAndTheCycleGoesOn) {
  Write(proc_ + "/pressure/memory", "garbage\n");
  Write(sys_ + "/fs/cgroup" + kRankCgroup + "/cpu.stat", "nr_periods lots\n");
  cgroups_ = {kRankCgroup, "/../../etc", "relative/path", "/a//b"};
  HostCollector c(Options());
  Cycle cycle = Run(c);
  EXPECT_EQ(cycle.errors.count, 5u);  // memory PSI, cpu.stat, three refused paths
  EXPECT_EQ(Get(cycle, "host", "", "cpu_pressure_some_us"), 123456u) << "the rest still read";
  EXPECT_EQ(Get(cycle, "host", "", "memory_pressure_some_us"), std::nullopt);
  bool named = false;
  for (const std::string& m : cycle.errors.messages) {
    named |=
        m.find("/pressure/memory") != std::string::npos && m.find("DATA_LOSS") != std::string::npos;
  }
  EXPECT_TRUE(named) << cycle.errors.messages[0];
}

TEST_F(HostCollectorTest, AReadErrorIsCountedAndTheFileOpenedAgain) {
  ringside::testing::FaultFileSystem fs;
  HostOptions o = Options();
  o.fs = &fs;
  HostCollector c(o);
  Run(c);
  fs.FailReads("/pressure/io", absl::UnavailableError("EIO"));
  Cycle bad = Run(c);
  EXPECT_EQ(bad.errors.count, 1u);
  EXPECT_EQ(Get(bad, "host", "", "io_pressure_some_us"), std::nullopt);
  fs.Clear();
  Cycle good = Run(c);
  EXPECT_EQ(good.errors.count, 0u);
  EXPECT_EQ(Get(good, "host", "", "io_pressure_some_us"), 5000u);
}

TEST(HostParseTest, PressureAndKeyValues) {
  auto p = ParsePressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->at("some"), 1u);
  EXPECT_FALSE(ParsePressure("some avg10=0.00\n").ok());
  EXPECT_FALSE(ParsePressure("many total=1\n").ok());
  EXPECT_FALSE(ParsePressure("some total=-1\n").ok());
  auto kv = ParseKeyValues("a 1\nb 2\n");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->at("b"), 2u);
  EXPECT_FALSE(ParseKeyValues("a\n").ok());
  EXPECT_FALSE(ParseKeyValues("a 1 2\n").ok());
}

TEST(HostParseTest, CgroupPaths) {
  EXPECT_TRUE(ValidCgroupPath("/"));
  EXPECT_TRUE(ValidCgroupPath(kRankCgroup));
  EXPECT_TRUE(ValidCgroupPath("/user.slice/user-1000.slice/session-1.scope"));
  for (const char* bad : {"", "a/b", "/a/../b", "/..", "/a/.", "/a//b", "/a/b/", "/a b"}) {
    EXPECT_FALSE(ValidCgroupPath(bad)) << bad;
  }
}

}  // namespace
}  // namespace ringside::collectors
