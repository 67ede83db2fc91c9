// The GPU detector on synthetic NVML series (the agent's source "gpu" contract), driven by the
// test's clock: which GPU faults raise which incident, and what is left alone (a power cap every
// GPU shares, an XID that is the application's, a PCIe link an idle GPU lowered).
#include "analysis/gpu_detector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "analysis/detection_options.h"
#include "analysis/pci_bus_id.h"
#include "tests/analysis/fabric_sim.h"

namespace ringside::analysis {
namespace {

using ::testing::HasSubstr;
using testing::SimCounter;
using testing::SimState;
using testing::T0;

TEST(PciBusIdTest, NvmlCudaAndSysfsSpellingsMeetInTheSysfsForm) {
  EXPECT_EQ(NormalizePciBusId("00000000:00:06.0"), "0000:00:06.0");  // NVML (H200 in a VM)
  EXPECT_EQ(NormalizePciBusId("00000000:1A:00.0"), "0000:1a:00.0");
  EXPECT_EQ(NormalizePciBusId("0000:1A:00.0"), "0000:1a:00.0");      // CUDA
  EXPECT_EQ(NormalizePciBusId("0000:1a:00.0"), "0000:1a:00.0");      // sysfs
  EXPECT_EQ(NormalizePciBusId("1a:00.0"), "0000:1a:00.0");
  EXPECT_EQ(NormalizePciBusId("00010000:1a:00.1"), "10000:1a:00.1");  // a domain past 0xffff
  EXPECT_EQ(NormalizePciBusId(""), "");
  EXPECT_EQ(NormalizePciBusId("GPU-1234"), "");
  EXPECT_EQ(NormalizePciBusId("0000:1a:00"), "");
}

TEST(GpuDetectorTest, ParseXid) {
  EXPECT_EQ(ParseXid("XID 79"), 79);
  EXPECT_EQ(ParseXid("Xid 119, pid=5"), 119);
  EXPECT_EQ(ParseXid("XID"), -1);
}

// One node's GPUs as the agent samples them every second.
class Gpus {
 public:
  explicit Gpus(int n, std::string node = "node-05") {
    for (int i = 0; i < n; ++i) {
      const std::string idx = std::to_string(i);
      for (const char* c : {"throttle_hw_thermal_ns", "throttle_power_cap_ns", "pcie_replay",
                            "ecc_uncorrected_volatile", "xid_events"}) {
        counters_.push_back(std::make_unique<SimCounter>(node, "gpu", idx, "", c));
      }
      for (const char* c : {"clock_event_reasons", "sm_clock_mhz", "sm_clock_max_mhz",
                            "utilization_gpu_percent", "temperature_c", "pcie_link_gen",
                            "pcie_link_gen_max", "pcie_link_width", "pcie_link_width_max",
                            "remap_failure", "last_xid"}) {
        gauges_.push_back(std::make_unique<SimState>(node, "gpu", idx, "", c));
      }
      state_.push_back(State{});
    }
    directory_.Map(node, "3", "00000000:1A:00.0");
  }
  struct State {
    uint64_t bits = 0;
    double clock = 1980, util = 95, temp = 60;
    uint64_t hw_thermal_ns_per_s = 0, power_cap_ns_per_s = 0, ecc = 0, xids = 0;
    double gen = 5, width = 16, last_xid = 0, remap_failure = 0;
  };
  State& operator[](int i) { return state_[i]; }
  const GpuDirectory* directory() const { return &directory_; }

  // One second: every series of every GPU, in the agent's order.
  void Second(GpuDetector& d, std::vector<Finding>& out) {
    t_ += absl::Seconds(1);
    for (size_t i = 0; i < state_.size(); ++i) {
      const State& s = state_[i];
      const double gauges[] = {static_cast<double>(s.bits), s.clock, 1980, s.util, s.temp,
                               s.gen, 5, s.width, 16, s.remap_failure, s.last_xid};
      for (size_t g = 0; g < 11; ++g) d.ObserveState(gauges_[i * 11 + g]->At(t_, gauges[g]), out);
      const uint64_t incs[] = {s.hw_thermal_ns_per_s, s.power_cap_ns_per_s, 0, s.ecc, s.xids};
      for (size_t c = 0; c < 5; ++c) d.ObserveCounter(counters_[i * 5 + c]->Step(t_, incs[c]), out);
      state_[i].ecc = 0;
      state_[i].xids = 0;
    }
    d.Advance(t_, out);
  }
  absl::Time now() const { return t_; }

 private:
  absl::Time t_ = T0();
  std::vector<std::unique_ptr<SimCounter>> counters_;
  std::vector<std::unique_ptr<SimState>> gauges_;
  std::vector<State> state_;
  GpuDirectory directory_;
};

TEST(GpuDetectorTest, HwThermalSlowdownOpensGpuThrottledWithItsShareAndStart) {
  Gpus gpus(4);
  GpuDetector d({}, gpus.directory());
  std::vector<Finding> out;
  for (int s = 0; s < 10; ++s) gpus.Second(d, out);
  EXPECT_TRUE(out.empty());
  const absl::Time began = gpus.now();
  gpus[3].bits = 0x40;
  gpus[3].hw_thermal_ns_per_s = 700'000'000;
  gpus[3].clock = 990;
  gpus[3].temp = 91;
  for (int s = 0; s < 20; ++s) gpus.Second(d, out);
  ASSERT_EQ(testing::CountActive(out, IncidentKind::kGpuThrottled), 1);
  const Finding* f = testing::First(out, IncidentKind::kGpuThrottled, true);
  EXPECT_EQ(f->severity, Severity::kCritical);
  EXPECT_EQ(f->entity, (std::map<std::string, std::string>{
                           {"node", "node-05"}, {"gpu", "3"}, {"pci_bus_id", "0000:1a:00.0"}}));
  EXPECT_GE(f->evidence.at("share_hw_thermal"), 0.2);
  EXPECT_NEAR(f->evidence.at("since_unix_s"), absl::ToUnixSeconds(began), 1.0);
  EXPECT_THAT(f->summary, HasSubstr("GPU 3 (0000:1a:00.0) on node-05 in hardware thermal slowdown"));
  EXPECT_THAT(f->summary, HasSubstr("SM 990 of 1980 MHz, 91 °C"));
  // It cools down: resolved within a window.
  gpus[3] = Gpus::State{};
  out.clear();
  for (int s = 0; s < 35; ++s) gpus.Second(d, out);
  EXPECT_NE(testing::First(out, IncidentKind::kGpuThrottled, false), nullptr);
}

TEST(GpuDetectorTest, HwSlowdownBitOnlyWhenSustained) {
  Gpus gpus(2);
  GpuDetector d({}, gpus.directory());
  std::vector<Finding> out;
  for (int s = 0; s < 10; ++s) gpus.Second(d, out);
  gpus[1].bits = 0x8;  // "may be also reported during PState or clock change": one sample
  gpus.Second(d, out);
  gpus[1].bits = 0;
  for (int s = 0; s < 10; ++s) gpus.Second(d, out);
  EXPECT_TRUE(out.empty());
  gpus[1].bits = 0x8 | 0x4;
  for (int s = 0; s < 12; ++s) gpus.Second(d, out);
  const Finding* f = testing::First(out, IncidentKind::kGpuThrottled, true);
  ASSERT_NE(f, nullptr);
  EXPECT_THAT(f->summary, HasSubstr("hardware slowdown"));
}

TEST(GpuDetectorTest, EveryGpuPowerCappedBlamesNoneButASlowerOneIsBlamed) {
  Gpus gpus(8);
  GpuDetector d({}, gpus.directory());
  std::vector<Finding> out;
  for (int i = 0; i < 8; ++i) {  // full load on an H200: capped, 1440–1620 MHz of 1980
    gpus[i].bits = 0x4;
    gpus[i].power_cap_ns_per_s = 1'000'000'000;
    gpus[i].clock = 1500 + 10 * (i % 3);
  }
  for (int s = 0; s < 60; ++s) gpus.Second(d, out);
  EXPECT_TRUE(out.empty()) << out[0].summary;
  gpus[3].clock = 1200;  // the same cap, but this one runs 20 % slower than its peers
  for (int s = 0; s < 40; ++s) gpus.Second(d, out);
  ASSERT_EQ(testing::CountActive(out, IncidentKind::kGpuThrottled), 1);
  const Finding* f = testing::First(out, IncidentKind::kGpuThrottled, true);
  EXPECT_EQ(f->entity.at("gpu"), "3");
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_NEAR(f->evidence.at("peer_clock_ratio"), 1510.0 / 1980, 0.01);
  EXPECT_THAT(f->summary, HasSubstr("power cap"));
}

TEST(GpuDetectorTest, XidSeventyNineIsCriticalAnApplicationXidIsNot) {
  Gpus gpus(4);
  GpuDetector d({}, gpus.directory());
  std::vector<Finding> out;
  gpus.Second(d, out);
  d.ObserveXid("node-05", "2", gpus.now(), "XID 13", out);  // graphics engine exception: the app
  EXPECT_TRUE(out.empty());
  d.ObserveXid("node-05", "3", gpus.now(), "XID 79", out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, IncidentKind::kGpuXid);
  EXPECT_EQ(out[0].severity, Severity::kCritical);
  EXPECT_EQ(out[0].evidence.at("xid"), 79);
  EXPECT_EQ(out[0].entity.at("pci_bus_id"), "0000:1a:00.0");
  EXPECT_THAT(out[0].summary, HasSubstr("XID 79 on GPU 3 (0000:1a:00.0) on node-05"));
  // The agent's count of the same XID is not a second one.
  gpus[3].xids = 1;
  gpus[3].last_xid = 79;
  gpus.Second(d, out);
  EXPECT_EQ(out.size(), 1u);
  // An XID whose event was lost still comes through the count (with last_xid).
  gpus[0].last_xid = 48;
  gpus.Second(d, out);
  gpus[0].xids = 1;
  gpus.Second(d, out);
  ASSERT_EQ(testing::CountActive(out, IncidentKind::kGpuXid), 2);
  EXPECT_EQ(out.back().entity.at("gpu"), "0");
  EXPECT_EQ(out.back().evidence.at("xid"), 48);
  // Held for xid_hold, then resolved.
  out.clear();
  GpuOptions o;
  for (int s = 0; s < absl::ToInt64Seconds(o.xid_hold) + 2; ++s) gpus.Second(d, out);
  EXPECT_EQ(std::count_if(out.begin(), out.end(),
                          [](const Finding& f) { return f.kind == IncidentKind::kGpuXid && !f.active; }),
            2);
}

TEST(GpuDetectorTest, UncorrectableEccAndRowRemapFailureAreMemoryErrors) {
  Gpus gpus(2);
  GpuDetector d({}, gpus.directory());
  std::vector<Finding> out;
  gpus.Second(d, out);
  gpus[1].ecc = 2;
  gpus.Second(d, out);
  const Finding* f = testing::First(out, IncidentKind::kGpuMemoryError, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kCritical);
  EXPECT_EQ(f->evidence.at("ecc_uncorrected"), 2);
  gpus[0].remap_failure = 1;
  gpus.Second(d, out);
  EXPECT_EQ(testing::CountActive(out, IncidentKind::kGpuMemoryError), 2);
  EXPECT_THAT(out.back().summary, HasSubstr("row remapping failed"));
}

TEST(GpuDetectorTest, PcieBelowItsMaximumOnlyCountsWhileBusy) {
  Gpus gpus(2);
  GpuDetector d({}, gpus.directory());
  std::vector<Finding> out;
  gpus[0].gen = 1;  // idle: the link steps down to save power
  gpus[0].util = 0;
  gpus[0].bits = 0x1;
  for (int s = 0; s < 60; ++s) gpus.Second(d, out);
  EXPECT_TRUE(out.empty());
  gpus[1].width = 8;  // busy at x8 of x16
  for (int s = 0; s < 40; ++s) gpus.Second(d, out);
  const Finding* f = testing::First(out, IncidentKind::kGpuPcieDegraded, true);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->entity.at("gpu"), "1");
  EXPECT_EQ(f->evidence.at("pcie_link_width"), 8);
  EXPECT_THAT(f->summary, HasSubstr("Gen5 x8 of Gen5 x16"));
}

TEST(GpuDetectorTest, OptionsAreDetectionOptions) {
  FabricAnalysisOptions o;
  ASSERT_TRUE(ParseDetectionConfig("gpu.xids = 79 119\ngpu.throttle_share = 0.3\n", o).ok());
  EXPECT_EQ(o.gpu.xids, (std::vector<int>{79, 119}));
  EXPECT_DOUBLE_EQ(o.gpu.throttle_share, 0.3);
  ASSERT_TRUE(ParseDetectionAssignments("gpu.critical_xids=79;48,host.window=10s", o).ok());
  EXPECT_EQ(o.gpu.critical_xids, (std::vector<int>{79, 48}));
  EXPECT_EQ(o.host.window, absl::Seconds(10));
  EXPECT_FALSE(ParseDetectionConfig("gpu.xids = 79 abc\n", o).ok());
}

}  // namespace
}  // namespace ringside::analysis
