// NvmlCollector against a fake libnvidia-ml.so.1 (tests/fake_nvml), loaded through the
// collector's own dlopen path. The fake reads its GPUs from a config file on every call, so a
// test changes them between cycles by rewriting the file.
#include "collectors/nvml/nvml_collector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "collectors/nvml/nvml_api.h"
#include "tests/testing/temp_dir.h"

namespace ringside::collectors {
namespace {

using ::testing::HasSubstr;

// GPU 0: Hopper, 18 links, link 5 down, legacy DL counters.
constexpr char kHopper[] = R"(
gpu
name NVIDIA H100 80GB HBM3
uuid GPU-11111111-2222-3333-4444-555555555555
pci_bus_id 00000000:18:00.0
arch 9
links 18
down 5
counter replay * 7
counter recovery * 1
counter crc_flit * 100
counter crc_data * 20
counter replay 2 42
counter crc_flit 17 18446744073709551615
)";

// A Blackwell-style GPU: 36 links, the DL counter call answers NOT_SUPPORTED, NVLink5 fields
// answer.
constexpr char kBlackwell[] = R"(
gpu
name NVIDIA B200
uuid GPU-bbbbbbbb-0000-0000-0000-000000000001
pci_bus_id 00000000:1B:00.0
arch 10
links 36
fail nvmlDeviceGetNvLinkErrorCounter NOT_SUPPORTED
field 215 * 3
field 213 * 2
field 214 * 1
field 221 * 1000
field 221 35 123456789012
field 219 * 5
field 220 * 0x30c
field 222 * 0xfff ui
)";

constexpr char kLegacyNames[][16] = {"replay_errors", "recovery_errors", "crc_flit_errors",
                                     "crc_data_errors"};
constexpr char kFieldNames[][27] = {
    "recovery_events", "recovery_successful_events", "recovery_failed_events",
    "symbol_errors",   "effective_errors",           "effective_ber",
    "symbol_ber"};

struct Cycle {
  CollectorSnapshot snap;
  CycleErrors errors;
};

class NvmlCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    config_ = dir_.path() + "/fake_nvml.conf";
    journal_ = dir_.path() + "/journal";
    setenv("RINGSIDE_FAKE_NVML_CONFIG", config_.c_str(), 1);
    setenv("RINGSIDE_FAKE_NVML_JOURNAL", journal_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("RINGSIDE_FAKE_NVML_CONFIG");
    unsetenv("RINGSIDE_FAKE_NVML_JOURNAL");
  }

  // Replaces the config atomically (write, then rename).
  void WriteConfig(const std::string& text) {
    const std::string tmp = config_ + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << "driver_version 570.86.15\n" << text;
    }
    ASSERT_EQ(std::rename(tmp.c_str(), config_.c_str()), 0);
  }

  std::unique_ptr<NvmlCollector> Open(const std::string& library = FAKE_NVML_COMPLETE,
                                      absl::Duration rediscover = absl::Seconds(30)) {
    return std::make_unique<NvmlCollector>(NvmlOptions{library, rediscover});
  }

  Cycle Run(NvmlCollector& c, absl::Time now = kT0) {
    Cycle cycle;
    c.Collect(now, cycle.snap, cycle.errors);
    EXPECT_EQ(cycle.snap.collector, "nvml");
    EXPECT_NE(cycle.snap.table, nullptr);
    if (cycle.snap.table) {
      EXPECT_EQ(cycle.snap.values.size(), cycle.snap.table->defs.size());
    }
    return cycle;
  }

  // Index of a series, or -1.
  static int IndexOf(const CollectorSnapshot& s, const std::string& device, const std::string& port,
                     const std::string& counter) {
    for (size_t i = 0; i < s.table->defs.size(); ++i) {
      const SeriesDef& d = s.table->defs[i];
      if (d.source == "nvlink" && d.device == device && d.port == port && d.counter == counter) {
        return static_cast<int>(i);
      }
    }
    return -1;
  }
  static std::optional<Value> Get(const CollectorSnapshot& s, const std::string& device, int port,
                                  const std::string& counter) {
    int i = IndexOf(s, device, absl::StrCat(port), counter);
    if (i < 0) return std::nullopt;
    return s.values[i];
  }
  static uint64_t Ok(const CollectorSnapshot& s, const std::string& device, int port,
                     const std::string& counter) {
    std::optional<Value> v = Get(s, device, port, counter);
    EXPECT_TRUE(v.has_value()) << device << "/" << port << "/" << counter;
    if (!v) return 0;
    EXPECT_EQ(v->status, ValueStatus::kOk) << device << "/" << port << "/" << counter;
    return v->raw;
  }
  static ValueStatus StatusOf(const CollectorSnapshot& s, const std::string& device, int port,
                              const std::string& counter) {
    std::optional<Value> v = Get(s, device, port, counter);
    EXPECT_TRUE(v.has_value()) << device << "/" << port << "/" << counter;
    return v ? v->status : ValueStatus::kOk;
  }
  static const InfoRecord* Info(const CollectorSnapshot& s, const std::string& device) {
    for (const InfoRecord& r : s.table->info) {
      if (r.source == "gpu" && r.device == device) return &r;
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
  std::string config_;
  std::string journal_;
};

TEST_F(NvmlCollectorTest, HopperEighteenLinksWithLinkFiveDownReportedNotDropped) {
  WriteConfig(kHopper);
  auto c = Open();
  ASSERT_TRUE(c->status().ok()) << c->status();
  EXPECT_TRUE(c->enabled());
  Cycle cycle = Run(*c);
  const CollectorSnapshot& s = cycle.snap;
  EXPECT_EQ(cycle.errors.count, 0u) << cycle.errors.messages.size();

  ASSERT_EQ(s.table->defs.size(), 18u * 5);
  for (int link = 0; link < 18; ++link) {
    EXPECT_EQ(Ok(s, "0", link, "link_state"), link == 5 ? 0u : 1u) << link;
  }
  for (const char* name : kLegacyNames) {
    EXPECT_EQ(StatusOf(s, "0", 5, name), ValueStatus::kUnavailable) << name;
  }
  EXPECT_EQ(Ok(s, "0", 2, "replay_errors"), 42u);
  EXPECT_EQ(Ok(s, "0", 0, "replay_errors"), 7u);
  EXPECT_EQ(Ok(s, "0", 6, "recovery_errors"), 1u);
  EXPECT_EQ(Ok(s, "0", 4, "crc_flit_errors"), 100u);
  EXPECT_EQ(Ok(s, "0", 17, "crc_flit_errors"), UINT64_MAX);
  EXPECT_EQ(Ok(s, "0", 17, "crc_data_errors"), 20u);
  EXPECT_FALSE(Get(s, "0", 0, "symbol_errors").has_value());
  EXPECT_FALSE(Get(s, "0", 18, "link_state").has_value());

  const SeriesDef& state = s.table->defs[IndexOf(s, "0", "5", "link_state")];
  EXPECT_EQ(state.kind, SeriesKind::kState);
  EXPECT_EQ(state.unit, Unit::kEnum);
  EXPECT_EQ(state.width, 0);
  const SeriesDef& replay = s.table->defs[IndexOf(s, "0", "5", "replay_errors")];
  EXPECT_EQ(replay.kind, SeriesKind::kCounter);
  EXPECT_EQ(replay.unit, Unit::kCount);
  EXPECT_EQ(replay.width, 64);
  EXPECT_FALSE(replay.saturates);

  const InfoRecord* info = Info(s, "0");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->port, "");
  EXPECT_EQ(info->labels.at("uuid"), "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(info->labels.at("name"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(info->labels.at("pci_bus_id"), "00000000:18:00.0");
  EXPECT_EQ(info->labels.at("architecture"), "hopper");
  EXPECT_EQ(info->labels.at("driver_version"), "570.86.15");
  EXPECT_EQ(info->labels.at("nvlink_count"), "18");
  EXPECT_EQ(info->labels.at("nvlink_error_api"), "legacy");
}

TEST_F(NvmlCollectorTest, BlackwellThirtySixLinksUsesFieldValuesWhereLegacyIsNotSupported) {
  WriteConfig(absl::StrCat(kHopper, kBlackwell));
  auto c = Open();
  ASSERT_TRUE(c->status().ok()) << c->status();
  Cycle cycle = Run(*c);
  const CollectorSnapshot& s = cycle.snap;
  EXPECT_EQ(cycle.errors.count, 0u);
  ASSERT_EQ(s.table->defs.size(), 18u * 5 + 36u * 8);

  for (int link = 0; link < 36; ++link) {
    EXPECT_EQ(Ok(s, "1", link, "link_state"), 1u) << link;
    for (const char* name : kLegacyNames) EXPECT_FALSE(Get(s, "1", link, name).has_value());
    EXPECT_EQ(Ok(s, "1", link, "recovery_events"), 3u);
    EXPECT_EQ(Ok(s, "1", link, "recovery_successful_events"), 2u);
    EXPECT_EQ(Ok(s, "1", link, "recovery_failed_events"), 1u);
    EXPECT_EQ(Ok(s, "1", link, "symbol_errors"), link == 35 ? 123456789012u : 1000u);
    EXPECT_EQ(Ok(s, "1", link, "effective_errors"), 5u);
    EXPECT_EQ(Ok(s, "1", link, "effective_ber"), 0x30cu);
    EXPECT_EQ(Ok(s, "1", link, "symbol_ber"), 0xfffu);  // delivered as unsigned int
  }
  EXPECT_FALSE(Get(s, "1", 36, "link_state").has_value());
  EXPECT_DOUBLE_EQ(DecodeNvlinkBer(Ok(s, "1", 0, "effective_ber")), 3e-12);
  EXPECT_EQ(DecodeNvlinkBer(Ok(s, "1", 0, "symbol_ber")), 0.0);

  const SeriesDef& ber = s.table->defs[IndexOf(s, "1", "0", "effective_ber")];
  EXPECT_EQ(ber.kind, SeriesKind::kGauge);
  EXPECT_EQ(ber.unit, Unit::kPackedBer);
  EXPECT_EQ(ber.width, 0);
  const SeriesDef& symbols = s.table->defs[IndexOf(s, "1", "0", "symbol_errors")];
  EXPECT_EQ(symbols.kind, SeriesKind::kCounter);
  EXPECT_EQ(symbols.width, 64);

  const InfoRecord* info = Info(s, "1");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->labels.at("architecture"), "blackwell");
  EXPECT_EQ(info->labels.at("nvlink_count"), "36");
  EXPECT_EQ(info->labels.at("nvlink_error_api"), "nvlink5_fields");
  EXPECT_EQ(info->labels.at("uuid"), "GPU-bbbbbbbb-0000-0000-0000-000000000001");

  // A steady cycle: one batched field read for the Blackwell GPU, one DL call per Hopper
  // (link, counter), no discovery.
  ClearJournal();
  Cycle next = Run(*c);
  EXPECT_EQ(next.snap.table.get(), s.table.get());
  EXPECT_EQ(JournalCount("nvmlDeviceGetFieldValues"), 1u);
  EXPECT_EQ(JournalCount("nvmlDeviceGetNvLinkErrorCounter"), 18u * 4);
  EXPECT_EQ(JournalCount("nvmlDeviceGetNvLinkState"), 18u + 36u);
  EXPECT_EQ(JournalCount("nvmlDeviceGetHandleByIndex_v2"), 0u);
}

TEST_F(NvmlCollectorTest, ValuesFollowTheDeviceBetweenCycles) {
  WriteConfig(kHopper);
  auto c = Open();
  Cycle first = Run(*c);
  EXPECT_EQ(Ok(first.snap, "0", 2, "replay_errors"), 42u);

  // Link 5 comes back with counters; link 3 goes down; link 2 replays grow.
  std::string text = kHopper;
  text.replace(text.find("down 5"), 6, "down 3");
  WriteConfig(text + "counter replay 2 50\ncounter crc_data 5 9\n");
  Cycle second = Run(*c, kT0 + absl::Seconds(1));
  const CollectorSnapshot& s = second.snap;
  EXPECT_EQ(second.errors.count, 0u);
  EXPECT_EQ(s.table.get(), first.snap.table.get());  // same series, no rediscovery
  EXPECT_EQ(Ok(s, "0", 5, "link_state"), 1u);
  EXPECT_EQ(Ok(s, "0", 5, "crc_data_errors"), 9u);
  EXPECT_EQ(Ok(s, "0", 5, "replay_errors"), 7u);
  EXPECT_EQ(Ok(s, "0", 3, "link_state"), 0u);
  EXPECT_EQ(StatusOf(s, "0", 3, "replay_errors"), ValueStatus::kUnavailable);
  EXPECT_EQ(Ok(s, "0", 2, "replay_errors"), 50u);
}

TEST_F(NvmlCollectorTest, DownLinkFailingWithAnyCodeIsUnavailableNotAnError) {
  std::string blackwell = kBlackwell;
  WriteConfig(absl::StrCat(kHopper, "down_return UNKNOWN\n", blackwell, "down 10\n"));
  auto c = Open();
  Cycle cycle = Run(*c);
  EXPECT_EQ(cycle.errors.count, 0u);
  for (const char* name : kLegacyNames) {
    EXPECT_EQ(StatusOf(cycle.snap, "0", 5, name), ValueStatus::kUnavailable) << name;
  }
  EXPECT_EQ(Ok(cycle.snap, "1", 10, "link_state"), 0u);
  for (const char* name : kFieldNames) {
    EXPECT_EQ(StatusOf(cycle.snap, "1", 10, name), ValueStatus::kUnavailable) << name;
  }
  EXPECT_EQ(Ok(cycle.snap, "1", 11, "symbol_errors"), 1000u);
}

TEST_F(NvmlCollectorTest, BlackwellWithEveryLinkDownStillHasAllItsSeries) {
  std::string down = "down";
  for (int link = 0; link < 36; ++link) absl::StrAppend(&down, " ", link);
  WriteConfig(absl::StrCat(kBlackwell, down, "\n"));
  auto c = Open();
  Cycle cycle = Run(*c);
  EXPECT_EQ(cycle.errors.count, 0u);
  ASSERT_EQ(cycle.snap.table->defs.size(), 36u * 8);
  for (int link = 0; link < 36; ++link) {
    EXPECT_EQ(Ok(cycle.snap, "0", link, "link_state"), 0u);
    EXPECT_EQ(StatusOf(cycle.snap, "0", link, "recovery_events"), ValueStatus::kUnavailable);
  }
}

TEST_F(NvmlCollectorTest, LinkCountIsProbedWhenTheDeviceHasNoLinkCountField) {
  WriteConfig(absl::StrCat(kHopper, "link_count_field no\n"));
  auto c = Open();
  Cycle cycle = Run(*c);
  EXPECT_EQ(cycle.errors.count, 0u);
  EXPECT_EQ(cycle.snap.table->defs.size(), 18u * 5);
  EXPECT_EQ(Info(cycle.snap, "0")->labels.at("nvlink_count"), "18");
}

TEST_F(NvmlCollectorTest, LibraryWithoutFieldValuesApiTurnsOnlyThatFeatureOff) {
  WriteConfig(absl::StrCat(kHopper, kBlackwell));
  auto c = Open(FAKE_NVML_NO_FIELD_VALUES);
  ASSERT_TRUE(c->status().ok()) << c->status();
  Cycle cycle = Run(*c);
  const CollectorSnapshot& s = cycle.snap;
  EXPECT_EQ(cycle.errors.count, 0u);
  // Link counts come from probing the state call; the legacy counters still work on Hopper.
  ASSERT_EQ(s.table->defs.size(), 18u * 5 + 36u);
  EXPECT_EQ(Ok(s, "0", 2, "replay_errors"), 42u);
  EXPECT_EQ(Ok(s, "1", 35, "link_state"), 1u);
  EXPECT_FALSE(Get(s, "1", 0, "symbol_errors").has_value());
  EXPECT_EQ(Info(s, "1")->labels.at("nvlink_error_api"), "none");
}

TEST_F(NvmlCollectorTest, LibraryLackingARequiredSymbolTurnsTheCollectorOff) {
  WriteConfig(kHopper);
  auto c = Open(FAKE_NVML_NO_ERROR_COUNTER);
  EXPECT_FALSE(c->enabled());
  EXPECT_EQ(c->status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(c->status().message(), HasSubstr("nvmlDeviceGetNvLinkErrorCounter"));
  EXPECT_THAT(c->status().message(), HasSubstr(FAKE_NVML_NO_ERROR_COUNTER));
  for (int i = 0; i < 3; ++i) {
    Cycle cycle = Run(*c, kT0 + absl::Seconds(i * 60));
    EXPECT_TRUE(cycle.snap.table->defs.empty());
    EXPECT_TRUE(cycle.snap.table->info.empty());
    EXPECT_TRUE(cycle.snap.values.empty());
    EXPECT_EQ(cycle.errors.count, 0u);  // off is a state, reported once through status()
  }
  EXPECT_EQ(JournalCount("nvmlInit_v2"), 0u);  // nothing is called in a half-resolved library
}

TEST_F(NvmlCollectorTest, NoLibraryTurnsTheCollectorOff) {
  const std::string missing = dir_.path() + "/no-driver/libnvidia-ml.so.1";
  auto c = Open(missing);
  EXPECT_FALSE(c->enabled());
  EXPECT_EQ(c->status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c->status().message(), HasSubstr(missing));
  Cycle cycle = Run(*c);
  EXPECT_TRUE(cycle.snap.table->defs.empty());
  EXPECT_TRUE(cycle.snap.values.empty());
  EXPECT_EQ(cycle.errors.count, 0u);
  EXPECT_EQ(NvmlOptions{}.library, "libnvidia-ml.so.1");
}

TEST_F(NvmlCollectorTest, FailedInitTurnsTheCollectorOffWithTheDriversReason) {
  WriteConfig(absl::StrCat("fail nvmlInit_v2 DRIVER_NOT_LOADED\n", kHopper));
  auto c = Open();
  EXPECT_FALSE(c->enabled());
  EXPECT_EQ(c->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c->status().message(), HasSubstr("nvmlInit_v2"));
  EXPECT_THAT(c->status().message(), HasSubstr("NVML_ERROR_DRIVER_NOT_LOADED"));
  EXPECT_THAT(c->status().message(), HasSubstr("fake: Driver Not Loaded"));
  EXPECT_TRUE(Run(*c).snap.values.empty());
  c.reset();
  EXPECT_EQ(JournalCount("nvmlInit_v2"), 1u);
  EXPECT_EQ(JournalCount("nvmlShutdown"), 0u);
}

TEST_F(NvmlCollectorTest, InitOnceAndShutdownOnceAtDestruction) {
  WriteConfig(kHopper);
  auto c = Open();
  Run(*c);
  Run(*c, kT0 + absl::Seconds(1));
  EXPECT_EQ(JournalCount("nvmlInit_v2"), 1u);
  EXPECT_EQ(JournalCount("nvmlShutdown"), 0u);
  c.reset();
  EXPECT_EQ(JournalCount("nvmlShutdown"), 1u);
}

TEST_F(NvmlCollectorTest, FailedReadsAreErrorsCountedAndTheCycleContinues) {
  WriteConfig(absl::StrCat(kHopper, kBlackwell));
  auto c = Open();
  Cycle clean = Run(*c);
  ASSERT_EQ(clean.errors.count, 0u);

  WriteConfig(absl::StrCat(kHopper,
                           "fail nvmlDeviceGetNvLinkErrorCounter UNKNOWN 3\n"
                           "fail nvmlDeviceGetNvLinkState UNKNOWN 7\n",
                           kBlackwell, "field_fail 221 4 NO_PERMISSION\n"));
  Cycle cycle = Run(*c, kT0 + absl::Seconds(1));
  const CollectorSnapshot& s = cycle.snap;
  EXPECT_EQ(s.table.get(), clean.snap.table.get());
  EXPECT_EQ(cycle.errors.count, 4u + 1u + 1u);
  for (const char* name : kLegacyNames) {
    EXPECT_EQ(StatusOf(s, "0", 3, name), ValueStatus::kError) << name;
  }
  EXPECT_EQ(StatusOf(s, "0", 7, "link_state"), ValueStatus::kError);
  EXPECT_EQ(StatusOf(s, "1", 4, "symbol_errors"), ValueStatus::kError);
  // Everything else was read.
  EXPECT_EQ(Ok(s, "0", 3, "link_state"), 1u);
  EXPECT_EQ(Ok(s, "0", 7, "replay_errors"), 7u);
  EXPECT_EQ(Ok(s, "0", 17, "crc_flit_errors"), UINT64_MAX);
  EXPECT_EQ(Ok(s, "1", 4, "recovery_events"), 3u);
  EXPECT_EQ(Ok(s, "1", 5, "symbol_errors"), 1000u);

  std::string all;
  for (const std::string& m : cycle.errors.messages) absl::StrAppend(&all, m, "\n");
  EXPECT_THAT(all, HasSubstr("nvml GPU 0 link 3: nvmlDeviceGetNvLinkErrorCounter(replay_errors): "
                             "NVML_ERROR_UNKNOWN (fake: Unknown Error)"));
  EXPECT_THAT(all, HasSubstr("nvml GPU 0 link 7: nvmlDeviceGetNvLinkState"));
  EXPECT_THAT(all, HasSubstr("nvml GPU 1 link 4: nvmlDeviceGetFieldValues(field 221): "
                             "NVML_ERROR_NO_PERMISSION"));

  // The device recovers: the same series read cleanly again.
  WriteConfig(absl::StrCat(kHopper, kBlackwell));
  Cycle after = Run(*c, kT0 + absl::Seconds(2));
  EXPECT_EQ(after.errors.count, 0u);
  EXPECT_EQ(Ok(after.snap, "0", 3, "replay_errors"), 7u);
}

TEST_F(NvmlCollectorTest, FailedBatchMarksEveryFieldOfThatGpuAsError) {
  WriteConfig(absl::StrCat(kHopper, kBlackwell));
  auto c = Open();
  ASSERT_EQ(Run(*c).errors.count, 0u);
  WriteConfig(absl::StrCat(kHopper, kBlackwell, "fail nvmlDeviceGetFieldValues UNKNOWN\n"));
  Cycle cycle = Run(*c, kT0 + absl::Seconds(1));
  EXPECT_EQ(cycle.errors.count, 36u * 7);
  EXPECT_EQ(cycle.errors.messages.size(), CycleErrors::kMaxMessages);
  for (int link = 0; link < 36; ++link) {
    EXPECT_EQ(Ok(cycle.snap, "1", link, "link_state"), 1u);
    for (const char* name : kFieldNames) {
      EXPECT_EQ(StatusOf(cycle.snap, "1", link, name), ValueStatus::kError);
    }
  }
  EXPECT_EQ(Ok(cycle.snap, "0", 2, "replay_errors"), 42u);
}

TEST_F(NvmlCollectorTest, GpuCountChangeOrLostGpuRediscovers) {
  WriteConfig(absl::StrCat(kHopper, kBlackwell));
  auto c = Open();
  Cycle two = Run(*c);
  ASSERT_NE(Info(two.snap, "1"), nullptr);

  WriteConfig(kHopper);  // GPU 1 fell off the bus
  Cycle one = Run(*c, kT0 + absl::Seconds(1));
  EXPECT_EQ(one.errors.count, 0u);
  EXPECT_NE(one.snap.table.get(), two.snap.table.get());
  EXPECT_EQ(one.snap.table->defs.size(), 18u * 5);
  EXPECT_EQ(Info(one.snap, "1"), nullptr);

  // A call answering GPU_IS_LOST: an error now, and discovery again at the next cycle.
  WriteConfig(absl::StrCat(kHopper, "fail nvmlDeviceGetNvLinkState GPU_IS_LOST 0\n"));
  Cycle lost = Run(*c, kT0 + absl::Seconds(2));
  EXPECT_EQ(lost.snap.table.get(), one.snap.table.get());
  EXPECT_EQ(StatusOf(lost.snap, "0", 0, "link_state"), ValueStatus::kError);
  EXPECT_EQ(lost.errors.count, 1u);
  WriteConfig(kHopper);
  Cycle again = Run(*c, kT0 + absl::Seconds(3));
  EXPECT_NE(again.snap.table.get(), one.snap.table.get());
  EXPECT_EQ(again.errors.count, 0u);
  EXPECT_EQ(Ok(again.snap, "0", 0, "link_state"), 1u);
}

TEST_F(NvmlCollectorTest, RediscoversAtTheInterval) {
  WriteConfig(kHopper);
  auto c = Open(FAKE_NVML_COMPLETE, absl::Seconds(10));
  Cycle a = Run(*c);
  Cycle b = Run(*c, kT0 + absl::Seconds(9));
  EXPECT_EQ(a.snap.table.get(), b.snap.table.get());
  Cycle d = Run(*c, kT0 + absl::Seconds(10));
  EXPECT_NE(a.snap.table.get(), d.snap.table.get());
  ASSERT_EQ(a.snap.table->defs.size(), d.snap.table->defs.size());
  for (size_t i = 0; i < a.snap.table->defs.size(); ++i) {
    EXPECT_EQ(a.snap.table->defs[i].port, d.snap.table->defs[i].port);
    EXPECT_EQ(a.snap.table->defs[i].counter, d.snap.table->defs[i].counter);
  }
}

TEST(NvlinkBerTest, DecodesPackedValues) {
  EXPECT_DOUBLE_EQ(DecodeNvlinkBer(0x30c), 3e-12);      // mantissa 3, exponent 12
  EXPECT_DOUBLE_EQ(DecodeNvlinkBer(0x10f), 1e-15);      // mantissa 1, exponent 15
  EXPECT_EQ(DecodeNvlinkBer(0xfff), 0.0);               // the "zero BER" encoding
  EXPECT_EQ(DecodeNvlinkBer(0x00c), 0.0);               // mantissa 0
  EXPECT_DOUBLE_EQ(DecodeNvlinkBer(0xf00), 15.0);       // exponent 0
  EXPECT_DOUBLE_EQ(DecodeNvlinkBer(0xABCD30c), 3e-12);  // bits above 11 are ignored
}

TEST(NvmlFieldValueTest, EveryIntegerTypeConverts) {
  nvml::FieldValue v{};
  v.field_id = 221;
  v.value_type = nvml::kValueUnsignedInt;
  v.value.ui = 4000000000u;
  EXPECT_EQ(*nvml::FieldValueToUint64(v), 4000000000u);
  v.value_type = nvml::kValueUnsignedLongLong;
  v.value.ull = UINT64_MAX;
  EXPECT_EQ(*nvml::FieldValueToUint64(v), UINT64_MAX);
  v.value_type = nvml::kValueUnsignedShort;
  v.value.ull = 0;
  v.value.us = 65535;
  EXPECT_EQ(*nvml::FieldValueToUint64(v), 65535u);
  v.value_type = nvml::kValueSignedLongLong;
  v.value.sll = 12;
  EXPECT_EQ(*nvml::FieldValueToUint64(v), 12u);
  v.value.sll = -1;
  EXPECT_EQ(nvml::FieldValueToUint64(v).status().code(), absl::StatusCode::kOutOfRange);
  v.value_type = nvml::kValueSignedInt;
  v.value.sll = 0;
  v.value.si = -5;
  EXPECT_FALSE(nvml::FieldValueToUint64(v).ok());
  v.value_type = nvml::kValueDouble;
  v.value.d = 17.0;
  EXPECT_EQ(*nvml::FieldValueToUint64(v), 17u);
  v.value_type = 42;
  EXPECT_EQ(nvml::FieldValueToUint64(v).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NvmlReturnTest, NamesAndCodes) {
  EXPECT_EQ(nvml::ReturnName(nvml::kErrorNotSupported), "NVML_ERROR_NOT_SUPPORTED");
  EXPECT_EQ(nvml::ReturnName(nvml::kErrorGpuIsLost), "NVML_ERROR_GPU_IS_LOST");
  EXPECT_EQ(nvml::ReturnName(123), "NVML_ERROR_123");
  EXPECT_EQ(nvml::StatusCodeFor(nvml::kErrorNotSupported), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(nvml::StatusCodeFor(nvml::kErrorNoPermission), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(nvml::StatusCodeFor(nvml::kErrorGpuIsLost), absl::StatusCode::kUnavailable);
  EXPECT_EQ(nvml::StatusCodeFor(nvml::kErrorUnknown), absl::StatusCode::kUnknown);
}

}  // namespace
}  // namespace ringside::collectors
