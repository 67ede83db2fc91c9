// The GPU signals of NvmlCollector (collectors/nvml/gpu_signals.h) and its XID events
// (xid_events.h) against the fake libnvidia-ml.so.1, loaded through the collector's own dlopen
// path: the series contract the straggler cause chain reads (source "gpu", device = the NVML
// index, port ""), the slow/cheap split, both numberings of the throttle-time fields, an older
// driver's missing symbols, and XIDs queued in the fake.
#include "collectors/nvml/gpu_signals.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "collectors/common/pci_bus_id.h"
#include "collectors/nvml/nvml_collector.h"
#include "collectors/nvml/xid_events.h"
#include "daemon/agent/xid_reader.h"
#include "tests/testing/temp_dir.h"

namespace ringside::collectors {
namespace {

// An H200 as the reference measured it under load: power-capped (0x4), SM clock below its max,
// 100 % busy, the power-cap counter ticking 1 s per s, the thermal counters still.
constexpr char kH200[] = R"(
nvml_version 13.580.159.04
gpu
name NVIDIA H200
uuid GPU-aaaaaaaa-0000-0000-0000-000000000001
pci_bus_id 00000000:00:06.0
clocks_event_reasons 0x4
signal sm_clock 1620
signal sm_clock_max 1980
signal temperature 61
signal power 690000
signal power_limit 700000
signal utilization 100
signal pcie_gen 5
signal pcie_gen_max 5
signal pcie_width 16
signal pcie_width_max 16
signal pcie_replay 1
signal ecc_uncorrected 0
signal remap_pending 0
signal remap_failure 0
processes 4242 4343
gpu_field 74 5000000000 1000000000
gpu_field 269 0
gpu_field 270 0
gpu_field 271 0
)";

struct Cycle {
  CollectorSnapshot snap;
  CycleErrors errors;
};

class GpuSignalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = dir_.path() + "/fake_nvml.conf";
    journal_ = dir_.path() + "/journal";
    setenv("RINGSIDE_FAKE_NVML_CONFIG", config_.c_str(), 1);
    setenv("RINGSIDE_FAKE_NVML_JOURNAL", journal_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("RINGSIDE_FAKE_NVML_CONFIG");
    unsetenv("RINGSIDE_FAKE_NVML_JOURNAL");
  }
  void WriteConfig(const std::string& text) {
    const std::string tmp = config_ + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << "driver_version 580.159.04\n" << text;
    }
    ASSERT_EQ(std::rename(tmp.c_str(), config_.c_str()), 0);
  }
  std::unique_ptr<NvmlCollector> Open(absl::Duration slow = absl::Seconds(10),
                                      const std::string& library = FAKE_NVML_COMPLETE) {
    NvmlOptions o;
    o.library = library;
    o.slow_interval = slow;
    return std::make_unique<NvmlCollector>(o);
  }
  Cycle Run(NvmlCollector& c, absl::Time now) {
    Cycle cycle;
    c.Collect(now, cycle.snap, cycle.errors);
    EXPECT_EQ(cycle.snap.values.size(), cycle.snap.table->defs.size());
    return cycle;
  }
  static std::optional<Value> Get(const Cycle& c, const std::string& gpu,
                                  const std::string& counter) {
    for (size_t i = 0; i < c.snap.table->defs.size(); ++i) {
      const SeriesDef& d = c.snap.table->defs[i];
      if (d.source == "gpu" && d.device == gpu && d.counter == counter) {
        EXPECT_EQ(d.port, "");
        return c.snap.values[i];
      }
    }
    return std::nullopt;
  }
  static const SeriesDef* Def(const Cycle& c, const std::string& gpu, const std::string& counter) {
    for (const SeriesDef& d : c.snap.table->defs) {
      if (d.source == "gpu" && d.device == gpu && d.counter == counter) return &d;
    }
    return nullptr;
  }
  static const InfoRecord* Info(const Cycle& c, const std::string& source,
                                const std::string& device) {
    for (const InfoRecord& r : c.snap.table->info) {
      if (r.source == source && r.device == device) return &r;
    }
    return nullptr;
  }
  size_t JournalCount(const std::string& function) const {
    size_t n = 0;
    for (absl::string_view line :
         absl::StrSplit(ringside::testing::ReadFileOrEmpty(journal_), '\n')) {
      if (line == function) ++n;
    }
    return n;
  }
  void ClearJournal() { std::ofstream(journal_, std::ios::trunc); }

  static constexpr absl::Time kT0 = absl::FromUnixSeconds(1700000000);
  ringside::testing::TempDir dir_;
  std::string config_, journal_;
};

TEST_F(GpuSignalsTest, EverySignalOfAnH200UnderTheSeriesContract) {
  WriteConfig(kH200);
  auto c = Open();
  ASSERT_TRUE(c->enabled()) << c->status();
  Cycle cycle = Run(*c, kT0);
  EXPECT_EQ(cycle.errors.count, 0u)
      << (cycle.errors.messages.empty() ? "" : cycle.errors.messages[0]);
  struct Want {
    const char* counter;
    uint64_t value;
    SeriesKind kind;
    Unit unit;
  };
  const Want want[] = {
      {"clock_event_reasons", 0x4, SeriesKind::kGauge, Unit::kEnum},
      {"sm_clock_mhz", 1620, SeriesKind::kGauge, Unit::kMegahertz},
      {"sm_clock_max_mhz", 1980, SeriesKind::kGauge, Unit::kMegahertz},
      {"temperature_c", 61, SeriesKind::kGauge, Unit::kCelsius},
      {"power_mw", 690000, SeriesKind::kGauge, Unit::kMilliwatts},
      {"power_limit_mw", 700000, SeriesKind::kGauge, Unit::kMilliwatts},
      {"utilization_gpu_percent", 100, SeriesKind::kGauge, Unit::kPercent},
      {"pcie_link_gen", 5, SeriesKind::kGauge, Unit::kCount},
      {"pcie_link_gen_max", 5, SeriesKind::kGauge, Unit::kCount},
      {"pcie_link_width", 16, SeriesKind::kGauge, Unit::kCount},
      {"pcie_link_width_max", 16, SeriesKind::kGauge, Unit::kCount},
      {"throttle_sw_thermal_ns", 0, SeriesKind::kCounter, Unit::kNanoseconds},
      {"throttle_hw_thermal_ns", 0, SeriesKind::kCounter, Unit::kNanoseconds},
      {"throttle_hw_power_brake_ns", 0, SeriesKind::kCounter, Unit::kNanoseconds},
      {"ecc_uncorrected_volatile", 0, SeriesKind::kCounter, Unit::kCount},
      {"remap_pending", 0, SeriesKind::kGauge, Unit::kCount},
      {"remap_failure", 0, SeriesKind::kGauge, Unit::kCount},
      {"pcie_replay", 1, SeriesKind::kCounter, Unit::kCount},
      {"compute_processes", 2, SeriesKind::kGauge, Unit::kCount},
  };
  for (const Want& w : want) {
    SCOPED_TRACE(w.counter);
    const SeriesDef* d = Def(cycle, "0", w.counter);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->kind, w.kind);
    EXPECT_EQ(d->unit, w.unit);
    if (w.kind == SeriesKind::kCounter) {
      EXPECT_GE(d->width, 32);
    }
    std::optional<Value> v = Get(cycle, "0", w.counter);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->status, ValueStatus::kOk);
    EXPECT_EQ(v->raw, w.value);
  }
  // The power-cap counter ticks by itself (1 s per s from 5 s).
  std::optional<Value> cap = Get(cycle, "0", "throttle_power_cap_ns");
  ASSERT_TRUE(cap.has_value());
  EXPECT_GE(cap->raw, 5000000000u);
  EXPECT_EQ(Def(cycle, "0", "throttle_power_cap_ns")->width, 64);
  // No XID series: the fake's GPU does not support XID events.
  EXPECT_EQ(Def(cycle, "0", "xid_events"), nullptr);

  const InfoRecord* info = Info(cycle, "gpu", "0");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->labels.at("pci_bus_id"), "00000000:00:06.0");
  EXPECT_EQ(info->labels.at("pci_bus_id_sysfs"), "0000:00:06.0");
  EXPECT_EQ(info->labels.at("clocks_event_reasons_api"), "nvmlDeviceGetCurrentClocksEventReasons");
  const InfoRecord* procs = Info(cycle, "gpu_processes", "0");
  ASSERT_NE(procs, nullptr);
  EXPECT_EQ(procs->labels.at("pids"), "4242,4343");
}

TEST_F(GpuSignalsTest, ExpensiveSignalsAreReadAtTheSlowIntervalAndCarriedOverAsStale) {
  WriteConfig(kH200);
  auto c = Open(absl::Seconds(10));
  Cycle first = Run(*c, kT0);
  ClearJournal();
  WriteConfig(absl::StrCat(kH200, "signal temperature 75\nsignal pcie_replay 9\n"));
  Cycle second = Run(*c, kT0 + absl::Seconds(1));
  EXPECT_EQ(JournalCount("nvmlDeviceGetFieldValues"), 0u) << "no throttle-field read at +1 s";
  EXPECT_EQ(JournalCount("nvmlDeviceGetComputeRunningProcesses_v3"), 0u);
  EXPECT_EQ(Get(second, "0", "temperature_c")->raw, 75u) << "cheap: read every cycle";
  EXPECT_EQ(Get(second, "0", "temperature_c")->status, ValueStatus::kOk);
  std::optional<Value> replay = Get(second, "0", "pcie_replay");
  EXPECT_EQ(replay->status, ValueStatus::kStale) << "slow: carried over, not uploaded again";
  EXPECT_EQ(replay->raw, 1u);
  EXPECT_EQ(Get(second, "0", "throttle_power_cap_ns")->status, ValueStatus::kStale);
  EXPECT_EQ(Get(second, "0", "throttle_power_cap_ns")->raw,
            Get(first, "0", "throttle_power_cap_ns")->raw);

  Cycle third = Run(*c, kT0 + absl::Seconds(10));
  EXPECT_EQ(JournalCount("nvmlDeviceGetFieldValues"), 1u) << "one batch for the four fields";
  EXPECT_EQ(Get(third, "0", "pcie_replay")->status, ValueStatus::kOk);
  EXPECT_EQ(Get(third, "0", "pcie_replay")->raw, 9u);
  EXPECT_GE(Get(third, "0", "throttle_power_cap_ns")->raw,
            Get(first, "0", "throttle_power_cap_ns")->raw);
}

TEST_F(GpuSignalsTest, ThrottleFieldNumberingFollowsTheDriverBranch) {
  // A GPU in hardware thermal slowdown: bit 0x40, and the HW thermal counter under both numbers
  // with different values, so the test sees which one was read.
  const std::string gpu = R"(
gpu
pci_bus_id 00000000:18:00.0
clocks_event_reasons 0x40
gpu_field 74 0
gpu_field 269 11
gpu_field 270 22
gpu_field 271 33
gpu_field 251 44
gpu_field 252 55
gpu_field 253 66
)";
  for (const bool old : {false, true}) {
    SCOPED_TRACE(old ? "branch 570: fields 251-253" : "branch 580: fields 269-271");
    WriteConfig(
        absl::StrCat(old ? "nvml_version 12.570.86.10\n" : "nvml_version 13.580.159.04\n", gpu));
    auto c = Open(absl::ZeroDuration());
    Cycle cycle = Run(*c, kT0);
    EXPECT_EQ(Get(cycle, "0", "clock_event_reasons")->raw, 0x40u);
    EXPECT_EQ(Get(cycle, "0", "throttle_sw_thermal_ns")->raw, old ? 44u : 11u);
    EXPECT_EQ(Get(cycle, "0", "throttle_hw_thermal_ns")->raw, old ? 55u : 22u);
    EXPECT_EQ(Get(cycle, "0", "throttle_hw_power_brake_ns")->raw, old ? 66u : 33u);
  }
}

TEST_F(GpuSignalsTest, ThrottleCountersTickBetweenReads) {
  WriteConfig(R"(
gpu
gpu_field 270 0 500000000
)");
  auto c = Open(absl::ZeroDuration());
  Cycle a = Run(*c, kT0);
  absl::SleepFor(absl::Milliseconds(100));
  Cycle b = Run(*c, kT0 + absl::Seconds(1));
  const uint64_t da =
      Get(b, "0", "throttle_hw_thermal_ns")->raw - Get(a, "0", "throttle_hw_thermal_ns")->raw;
  EXPECT_GE(da, 40000000u) << "0.5 s/s over at least 0.1 s";
  EXPECT_EQ(Get(b, "0", "throttle_power_cap_ns"), std::nullopt) << "field 74 not supported: absent";
}

TEST_F(GpuSignalsTest, AnOlderDriverLacksNewerSymbolsAndLosesOnlyThoseSignals) {
  WriteConfig(absl::StrCat(kH200, "xid_events yes\n"));
  auto c = Open(absl::Seconds(10), FAKE_NVML_OLD_DRIVER_PATH);
  ASSERT_TRUE(c->enabled()) << c->status();
  Cycle cycle = Run(*c, kT0);
  EXPECT_EQ(cycle.errors.count, 0u);
  EXPECT_EQ(Get(cycle, "0", "clock_event_reasons")->raw, 0x4u) << "from ...ThrottleReasons";
  EXPECT_EQ(Info(cycle, "gpu", "0")->labels.at("clocks_event_reasons_api"),
            "nvmlDeviceGetCurrentClocksThrottleReasons");
  EXPECT_EQ(Def(cycle, "0", "compute_processes"), nullptr) << "no _v3 entry point: absent";
  EXPECT_EQ(Info(cycle, "gpu_processes", "0"), nullptr);
  EXPECT_EQ(c->xid_events(), nullptr) << "no nvmlEventSetWait_v2: XIDs off";
  EXPECT_EQ(Def(cycle, "0", "xid_events"), nullptr);
  EXPECT_EQ(Get(cycle, "0", "temperature_c")->raw, 61u);
}

TEST_F(GpuSignalsTest, UnsupportedSignalsAreAbsentAndFailingOnesAreCountedErrors) {
  WriteConfig(R"(
gpu
signal temperature 50
signal power 100000
signal sm_clock 1400
fail nvmlDeviceGetPowerUsage UNKNOWN
)");
  auto c = Open();
  Cycle cycle = Run(*c, kT0);  // discovery says the failing one once
  EXPECT_EQ(Def(cycle, "0", "clock_event_reasons"), nullptr);
  EXPECT_EQ(Def(cycle, "0", "remap_pending"), nullptr);
  EXPECT_EQ(Def(cycle, "0", "throttle_hw_thermal_ns"), nullptr);
  Cycle next = Run(*c, kT0 + absl::Seconds(1));
  EXPECT_EQ(Get(next, "0", "temperature_c")->raw, 50u);
  EXPECT_EQ(Get(next, "0", "sm_clock_mhz")->raw, 1400u);
  EXPECT_EQ(Get(next, "0", "power_mw")->status, ValueStatus::kError);
  EXPECT_EQ(next.errors.count, 1u);
  ASSERT_FALSE(next.errors.messages.empty());
  EXPECT_NE(next.errors.messages[0].find("nvmlDeviceGetPowerUsage"), std::string::npos)
      << next.errors.messages[0];
}

TEST_F(GpuSignalsTest, ComputeProcessesFollowTheGpu) {
  WriteConfig(R"(
gpu
processes 10 20 30
gpu
processes
)");
  auto c = Open(absl::ZeroDuration());
  Cycle a = Run(*c, kT0);
  EXPECT_EQ(Get(a, "0", "compute_processes")->raw, 3u);
  EXPECT_EQ(Get(a, "1", "compute_processes")->raw, 0u);
  EXPECT_EQ(Info(a, "gpu_processes", "0")->labels.at("pids"), "10,20,30");
  EXPECT_EQ(Info(a, "gpu_processes", "1"), nullptr) << "no record for an idle GPU";
  WriteConfig(R"(
gpu
processes 20
gpu
processes 7
)");
  Cycle b = Run(*c, kT0 + absl::Seconds(1));
  EXPECT_EQ(Info(b, "gpu_processes", "0")->labels.at("pids"), "20");
  EXPECT_EQ(Info(b, "gpu_processes", "1")->labels.at("pids"), "7");
  EXPECT_NE(a.snap.table, b.snap.table) << "a changed pid set publishes a new table";
}

TEST_F(GpuSignalsTest, XidsQueuedInTheDriverArriveAsEventsAndSeries) {
  // XID 13 happened before the agent watched: lost, as NVML loses it.
  WriteConfig("gpu\nxid 13\ngpu\nxid_events yes\n");
  auto c = Open();
  XidEvents* xid = c->xid_events();
  ASSERT_NE(xid, nullptr);
  Cycle a = Run(*c, kT0);  // discovery registers both GPUs
  EXPECT_EQ(Get(a, "0", "xid_events")->raw, 0u);
  EXPECT_EQ(Get(a, "0", "last_xid")->status, ValueStatus::kUnavailable) << "none until the first";
  absl::StatusOr<std::vector<LinkEvent>> none = xid->Wait(absl::Milliseconds(30), kT0);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());

  WriteConfig("gpu\nxid 13 79\ngpu\nxid_events yes\nxid 48\n");
  std::vector<LinkEvent> got;
  for (int i = 0; i < 10 && got.size() < 2; ++i) {
    absl::StatusOr<std::vector<LinkEvent>> e = xid->Wait(absl::Milliseconds(200), kT0);
    ASSERT_TRUE(e.ok()) << e.status();
    for (LinkEvent& ev : *e) got.push_back(ev);
  }
  ASSERT_EQ(got.size(), 2u);
  std::sort(got.begin(), got.end(),
            [](const LinkEvent& x, const LinkEvent& y) { return x.device < y.device; });
  EXPECT_EQ(got[0].source, "nvml_xid");
  EXPECT_EQ(got[0].device, "0");
  EXPECT_EQ(got[0].port, "");
  EXPECT_EQ(got[0].detail, "XID 79");
  EXPECT_EQ(got[0].to, LinkState::kUnknown);
  EXPECT_EQ(got[1].device, "1");
  EXPECT_EQ(got[1].detail, "XID 48");

  Cycle b = Run(*c, kT0 + absl::Seconds(1));
  EXPECT_EQ(Get(b, "0", "xid_events")->raw, 1u);
  EXPECT_EQ(Get(b, "0", "last_xid")->raw, 79u);
  EXPECT_EQ(Get(b, "1", "xid_events")->raw, 1u);
  EXPECT_EQ(Get(b, "1", "last_xid")->raw, 48u);
}

// The agent's XID thread puts each XID into the link-event log as it arrives (the uploader then
// streams it at once), and stops promptly.
TEST_F(GpuSignalsTest, TheXidThreadLogsEachXidAsItArrives) {
  WriteConfig("gpu\nxid_events yes\n");
  auto c = Open();
  Run(*c, kT0);
  daemon::LinkEventLog log;
  daemon::XidReaderOptions o;
  o.wait = absl::Milliseconds(100);
  auto reader = std::make_unique<daemon::XidReader>(c->xid_events(), &log, o);
  WriteConfig("gpu\nxid 62\n");
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (log.last_seq() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  std::vector<daemon::LinkEventLog::Entry> got = log.Since(0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].event.source, "nvml_xid");
  EXPECT_EQ(got[0].event.device, "0");
  EXPECT_EQ(got[0].event.detail, "XID 62");
  EXPECT_EQ(reader->xids(), 1u);
  const absl::Time stop = absl::Now();
  reader.reset();
  EXPECT_LT(absl::Now() - stop, absl::Seconds(2)) << "stops within about one wait";
}

TEST_F(GpuSignalsTest, AFailedWaitIsAnErrorNotACrash) {
  WriteConfig("gpu\nxid_events yes\n");
  auto c = Open();
  Run(*c, kT0);
  WriteConfig("fail nvmlEventSetWait_v2 GPU_IS_LOST\ngpu\nxid_events yes\n");
  absl::StatusOr<std::vector<LinkEvent>> e = c->xid_events()->Wait(absl::Milliseconds(10), kT0);
  EXPECT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("GPU_IS_LOST"), std::string::npos) << e.status();
}

TEST(PciBusIdTest, NvmlAndCudaSpellingsMeetInTheSysfsForm) {
  const std::pair<const char*, const char*> cases[] = {
      {"00000000:1B:00.0", "0000:1b:00.0"},   // NVML
      {"0000:1B:00.0", "0000:1b:00.0"},       // CUDA
      {"0000:1b:00.0", "0000:1b:00.0"},       // sysfs
      {"1b:00.0", "0000:1b:00.0"},            // no domain
      {"00010000:E1:1F.7", "10000:e1:1f.7"},  // a VMD domain keeps its digits
      {" 0000:3b:00.1 ", "0000:3b:00.1"},
  };
  for (const auto& [in, want] : cases) {
    char out[kPciBusIdSize];
    ASSERT_TRUE(NormalizePciBusId(in, strlen(in), out, sizeof(out))) << in;
    EXPECT_STREQ(out, want) << in;
  }
  for (const char* bad : {"", "0000:1b:00", "0000:1b:20.0", "0000:1b:00.8", "000000000:1b:00.0",
                          "0000:123:00.0", "0000-1b-00.0", "gpu0", "0000:1b:00.0.1"}) {
    char out[kPciBusIdSize] = "x";
    EXPECT_FALSE(NormalizePciBusId(bad, strlen(bad), out, sizeof(out))) << bad;
    EXPECT_STREQ(out, "") << bad;
  }
}

TEST(DriverBranchTest, FromDriverAndNvmlVersions) {
  EXPECT_EQ(DriverBranch("580.159.04"), 580u);
  EXPECT_EQ(DriverBranch("13.580.159.04"), 580u);
  EXPECT_EQ(DriverBranch("12.570.86.10"), 570u);
  EXPECT_EQ(DriverBranch("570.86"), 570u);
  EXPECT_EQ(DriverBranch("999.99-fake"), 0u);
  EXPECT_EQ(DriverBranch(""), 0u);
}

}  // namespace
}  // namespace ringside::collectors
