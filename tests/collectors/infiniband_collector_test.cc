#include "collectors/infiniband/infiniband_collector.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "sim/sysfs_tree.h"
#include "tests/testing/fault_fs.h"
#include "tests/testing/temp_dir.h"

namespace ringside::collectors {
namespace {

namespace fs = std::filesystem;

struct Found {
  const SeriesDef* def;
  Value value;
};

class InfinibandCollectorTest : public ::testing::Test {
 protected:
  // Runs one cycle of `c` at `now` and indexes the result by "source/device/port/counter".
  std::map<std::string, Found> Cycle(InfinibandCollector& c, absl::Time now = absl::Now()) {
    snap_ = CollectorSnapshot{};
    errors_ = CycleErrors{};
    c.Collect(now, snap_, errors_);
    std::map<std::string, Found> out;
    for (size_t i = 0; i < snap_.table->defs.size(); ++i) {
      const SeriesDef& d = snap_.table->defs[i];
      out[absl::StrCat(d.source, "/", d.device, "/", d.port, "/", d.counter)] =
          Found{&d, snap_.values[i]};
    }
    return out;
  }

  CollectorSnapshot snap_;
  CycleErrors errors_;
};

// Every counter and hw_counter file of mlx5_0, mlx4_0 and hfi1_0 in the procfs fixture appears,
// with the file's own value.
TEST_F(InfinibandCollectorTest, ProcfsFixtureEveryFileAppears) {
  const std::string sys = testing::SharedDir() + "/fixtures/sysfs/procfs/sys";
  InfinibandCollector c(InfinibandOptions{sys});
  auto series = Cycle(c);
  EXPECT_EQ(errors_.count, 0u);
  int checked = 0;
  for (const char* dev : {"mlx5_0", "mlx4_0", "hfi1_0"}) {
    const fs::path ports = fs::path(sys) / "class/infiniband" / dev / "ports";
    for (const auto& port : fs::directory_iterator(ports)) {
      for (const auto& [sub, source] : {std::pair{"counters", "infiniband"},
                                        std::pair{"hw_counters", "infiniband_hw"}}) {
        if (!fs::exists(port.path() / sub)) continue;
        for (const auto& file : fs::directory_iterator(port.path() / sub)) {
          const std::string key = absl::StrCat(source, "/", dev, "/", port.path().filename().string(),
                                               "/", file.path().filename().string());
          auto it = series.find(key);
          ASSERT_NE(it, series.end()) << key;
          std::string text = testing::ReadFileOrEmpty(file.path());
          if (text.find("N/A") != std::string::npos) {
            EXPECT_EQ(it->second.value.status, ValueStatus::kUnavailable) << key;
          } else {
            ASSERT_EQ(it->second.value.status, ValueStatus::kOk) << key;
            EXPECT_EQ(it->second.value.raw, std::stoull(text)) << key;
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 60);
  // Widths and units from the reference.
  EXPECT_EQ(series["infiniband/mlx5_0/1/link_downed"].def->width, 8);
  EXPECT_EQ(series["infiniband/mlx5_0/1/symbol_error"].def->width, 16);
  EXPECT_EQ(series["infiniband/mlx5_0/1/local_link_integrity_errors"].def->width, 4);
  EXPECT_EQ(series["infiniband/mlx5_0/1/port_rcv_data"].def->unit, Unit::kFourByteWords);
  EXPECT_EQ(series["infiniband/mlx5_0/1/port_rcv_data"].def->width, 64);
  EXPECT_TRUE(series["infiniband/mlx5_0/1/port_rcv_data"].def->saturates);
  EXPECT_EQ(series["infiniband_hw/mlx5_0/1/out_of_sequence"].def->width, 64);  // a u64 sum in sysfs
  // hfi1_0 and mlx4_0 have no device/driver link in the fixture and no unicast files: a data
  // counter already past 2^32 - 1 (hfi1 rcv 345091702026, mlx4 xmit 26509113295) says 64-bit.
  EXPECT_EQ(series["infiniband/hfi1_0/1/port_rcv_data"].def->width, 64);
  EXPECT_EQ(series["infiniband/mlx4_0/1/port_rcv_data"].def->width, 64);
  EXPECT_FALSE(series["infiniband_hw/mlx5_0/1/out_of_sequence"].def->saturates);
  EXPECT_EQ(series["infiniband/hfi1_0/1/port_rcv_data"].value.raw, 345091702026u);
  // Port attributes.
  EXPECT_EQ(series["infiniband_port/mlx5_0/1/state"].value.raw, 4u);
  EXPECT_EQ(series["infiniband_port/mlx5_0/1/phys_state"].value.raw, 4u);  // the fixture says "4: ACTIVE"
  EXPECT_EQ(series["infiniband_port/mlx5_0/1/rate"].value.raw, 3125000000u);  // 25 Gb/s
}

// Devices as rdma-core's udev rules name them (ibp<bus>s<slot>, rocep<bus>s<slot>f<fn>): the PMA
// width comes from the driver the kernel shows (device/driver), not the name, and hw_counters are
// 64-bit files that already hold more than 32 bits once per-QP counters are bound.
TEST_F(InfinibandCollectorTest, RenamedDevicesGetWidthsFromTheDriverAndTheFiles) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  sim::HcaSpec ib;  // mlx5 whose PMA answers EXT_WIDTH_NOIETF: no unicast files, 64-bit data
  ib.name = "ibp23s0";
  ib.pma_unicast = false;
  ASSERT_TRUE(w.AddHca(ib).ok());
  sim::HcaSpec roce;
  roce.name = "rocep138s0f0";
  roce.pci = "0000:8a:00.0";
  roce.link_layer = "Ethernet";
  roce.netdev = "ens1f0np0";
  roce.hw_counter_start = (uint64_t{1} << 32) + 5;  // a Q counter plus its bound QP counters
  ASSERT_TRUE(w.AddHca(roce).ok());
  sim::HcaSpec old;  // a driver without 64-bit PMA data (e.g. qib) and the 32-bit table
  old.name = "ibp3s0";
  old.pci = "0000:03:00.0";
  old.driver = "ib_qib";
  old.pma_unicast = false;
  ASSERT_TRUE(w.AddHca(old).ok());
  ASSERT_TRUE(w.SetIbCounter("ibp23s0", 1, "port_rcv_data", 100).ok());
  ASSERT_TRUE(w.WriteFile("class/infiniband/rocep138s0f0/ports/1/hw_counters/vport_rx_write_requests",
                          "7\n")
                  .ok());
  ASSERT_TRUE(w.WriteFile(
                   "class/infiniband/rocep138s0f0/ports/1/hw_counters/req_transport_retries_exceeded",
                   "3\n")
                  .ok());

  InfinibandCollector c(InfinibandOptions{tmp.path()});
  auto series = Cycle(c);
  EXPECT_EQ(errors_.count, 0u);
  ASSERT_NE(series["infiniband/ibp23s0/1/port_rcv_data"].def, nullptr);
  EXPECT_EQ(series["infiniband/ibp23s0/1/port_rcv_data"].def->width, 64);
  EXPECT_EQ(series["infiniband/ibp23s0/1/port_xmit_packets"].def->width, 64);
  EXPECT_EQ(series.count("infiniband/ibp23s0/1/unicast_rcv_packets"), 0u);
  EXPECT_EQ(series["infiniband/ibp3s0/1/port_rcv_data"].def->width, 32);
  EXPECT_EQ(series["infiniband/rocep138s0f0/1/port_rcv_data"].def->width, 64);

  auto seq = series["infiniband_hw/rocep138s0f0/1/out_of_sequence"];
  ASSERT_NE(seq.def, nullptr);
  EXPECT_EQ(seq.value.status, ValueStatus::kOk);
  EXPECT_EQ(seq.value.raw, (uint64_t{1} << 32) + 5);
  EXPECT_EQ(seq.def->width, 64);
  EXPECT_FALSE(seq.def->saturates);
  EXPECT_EQ(seq.def->term_width, 32);  // a sum of 32-bit Q counters: a ~2^32 drop is a wrap
  EXPECT_EQ(series["infiniband_hw/rocep138s0f0/1/rp_cnp_handled"].def->term_width, 0);
  for (const char* name : {"vport_rx_write_requests", "req_transport_retries_exceeded"}) {
    const auto& f = series[absl::StrCat("infiniband_hw/rocep138s0f0/1/", name)];
    ASSERT_NE(f.def, nullptr) << name;
    EXPECT_EQ(f.def->width, 64) << name;
    EXPECT_EQ(f.def->kind, SeriesKind::kCounter) << name;
  }
}

TEST_F(InfinibandCollectorTest, DeviceAndPortInfo) {
  const std::string sys = testing::SharedDir() + "/fixtures/sysfs/procfs/sys";
  InfinibandCollector c(InfinibandOptions{sys});
  Cycle(c);
  std::map<std::string, std::map<std::string, std::string>> info;
  for (const InfoRecord& r : snap_.table->info) info[r.source + "/" + r.device + "/" + r.port] = r.labels;
  EXPECT_EQ(info["infiniband_device/mlx4_0/"]["hca_type"], "MT4099");
  EXPECT_FALSE(info["infiniband_device/mlx4_0/"]["fw_ver"].empty());
  EXPECT_EQ(info["infiniband_device/hfi1_0/"].count("hca_type"), 0u);  // hfi1 has none
  EXPECT_EQ(info["infiniband_port/mlx5_0/1"]["link_layer"], "InfiniBand");
}

// i40iw0's counters all read "N/A (no PMA)": not available, not errors.
TEST_F(InfinibandCollectorTest, NoPmaIsUnavailableNotError) {
  const std::string sys = testing::SharedDir() + "/fixtures/sysfs/node_exporter/sys";
  InfinibandCollector c(InfinibandOptions{sys});
  auto series = Cycle(c);
  EXPECT_EQ(errors_.count, 0u) << (errors_.messages.empty() ? "" : errors_.messages[0]);
  EXPECT_EQ(series["infiniband/i40iw0/1/symbol_error"].value.status, ValueStatus::kUnavailable);
  EXPECT_EQ(series["infiniband_port/i40iw0/1/state"].value.status, ValueStatus::kOk);
  // The saturated 32-bit port_xmit_wait of mlx4_0 port 1 is read as it is.
  EXPECT_EQ(series["infiniband/mlx4_0/1/port_xmit_wait"].value.raw, 4294967295u);
  EXPECT_EQ(series["infiniband/mlx4_0/1/port_xmit_wait"].def->width, 32);
  // counters_ext.
  EXPECT_EQ(series["infiniband_ext/mlx4_0/1/port_rcv_data_64"].value.raw, 4631917u);
}

// Newer kernels fail the read with EINVAL where old ones wrote N/A: also "not available".
TEST_F(InfinibandCollectorTest, PmaReadEinvalIsUnavailable) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  ASSERT_TRUE(w.AddHca(sim::HcaSpec{}).ok());
  testing::FaultFileSystem ffs;
  ffs.FailReads("counters/symbol_error", absl::InvalidArgumentError("read: Invalid argument"));
  InfinibandCollector c(InfinibandOptions{tmp.path()}, &ffs);
  auto series = Cycle(c);
  EXPECT_EQ(series["infiniband/mlx5_0/1/symbol_error"].value.status, ValueStatus::kUnavailable);
  EXPECT_EQ(errors_.count, 0u);
}

// A RoCE port: link_layer Ethernet, the mlx5 congestion counters present and read.
TEST_F(InfinibandCollectorTest, RocePortWithCongestionCounters) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  sim::HcaSpec roce;
  roce.name = "mlx5_4";
  roce.link_layer = "Ethernet";
  roce.rate = "200 Gb/sec (4X HDR)";
  roce.netdev = "ens3f0np0";
  ASSERT_TRUE(w.AddHca(roce).ok());
  ASSERT_TRUE(w.SetHwCounter("mlx5_4", 1, "np_ecn_marked_roce_packets", 123456789012).ok());
  ASSERT_TRUE(w.SetHwCounter("mlx5_4", 1, "rp_cnp_handled", 777).ok());
  InfinibandCollector c(InfinibandOptions{tmp.path()});
  auto series = Cycle(c);
  EXPECT_EQ(errors_.count, 0u);
  auto ecn = series["infiniband_hw/mlx5_4/1/np_ecn_marked_roce_packets"];
  ASSERT_NE(ecn.def, nullptr);
  EXPECT_EQ(ecn.value.raw, 123456789012u);
  EXPECT_EQ(ecn.def->width, 64);
  EXPECT_EQ(series["infiniband_hw/mlx5_4/1/rp_cnp_handled"].value.raw, 777u);
  ASSERT_NE(series["infiniband_hw/mlx5_4/1/np_cnp_sent"].def, nullptr);
  ASSERT_NE(series["infiniband_hw/mlx5_4/1/rp_cnp_ignored"].def, nullptr);
  EXPECT_EQ(series["infiniband_hw/mlx5_4/1/lifespan"].def->kind, SeriesKind::kGauge);
  EXPECT_EQ(series["infiniband_port/mlx5_4/1/rate"].value.raw, 25000000000u);
  bool ethernet = false;
  for (const InfoRecord& r : snap_.table->info) {
    if (r.source == "infiniband_port" && r.device == "mlx5_4") {
      ethernet = r.labels.at("link_layer") == "Ethernet";
    }
  }
  EXPECT_TRUE(ethernet);
}

// Values move between cycles through the descriptors kept open; a port going DOWN is seen at the
// next sample.
TEST_F(InfinibandCollectorTest, PortGoingDownBetweenSamples) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  ASSERT_TRUE(w.AddHca(sim::HcaSpec{}).ok());
  testing::FaultFileSystem ffs;
  InfinibandCollector c(InfinibandOptions{tmp.path()}, &ffs);
  absl::Time t0 = absl::FromUnixSeconds(1000);
  auto first = Cycle(c, t0);
  const int opens_after_first = ffs.opens();
  EXPECT_EQ(first["infiniband_port/mlx5_0/1/state"].value.raw, 4u);
  ASSERT_TRUE(w.SetPortState("mlx5_0", 1, 1, 2).ok());  // DOWN, Polling
  ASSERT_TRUE(w.SetIbCounter("mlx5_0", 1, "link_downed", 1).ok());
  auto second = Cycle(c, t0 + absl::Seconds(1));
  EXPECT_EQ(second["infiniband_port/mlx5_0/1/state"].value.raw, 1u);
  EXPECT_EQ(second["infiniband_port/mlx5_0/1/phys_state"].value.raw, 2u);
  EXPECT_EQ(second["infiniband/mlx5_0/1/link_downed"].value.raw, 1u);
  EXPECT_EQ(ffs.opens(), opens_after_first) << "descriptors are kept open between cycles";
}

// A counter saturated at its width is reported with its value and width, so the analysis can
// tell saturation from a wrap.
TEST_F(InfinibandCollectorTest, SaturatedCounter) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  ASSERT_TRUE(w.AddHca(sim::HcaSpec{}).ok());
  ASSERT_TRUE(w.SetIbCounter("mlx5_0", 1, "symbol_error", 65535).ok());
  ASSERT_TRUE(w.SetIbCounter("mlx5_0", 1, "link_downed", 255).ok());
  InfinibandCollector c(InfinibandOptions{tmp.path()});
  auto series = Cycle(c);
  EXPECT_EQ(series["infiniband/mlx5_0/1/symbol_error"].value.raw, 65535u);
  EXPECT_EQ(series["infiniband/mlx5_0/1/symbol_error"].def->width, 16);
  EXPECT_TRUE(series["infiniband/mlx5_0/1/symbol_error"].def->saturates);
  EXPECT_EQ(series["infiniband/mlx5_0/1/link_downed"].value.raw, 255u);
}

// A device that vanishes leaves the table at the next cycle and returns when it comes back.
TEST_F(InfinibandCollectorTest, DeviceVanishesAndComesBack) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  sim::HcaSpec a;
  sim::HcaSpec b;
  b.name = "mlx5_1";
  b.pci = "0000:18:00.0";
  ASSERT_TRUE(w.AddHca(a).ok());
  ASSERT_TRUE(w.AddHca(b).ok());
  ASSERT_TRUE(w.SetIbCounter("mlx5_1", 1, "port_xmit_data", 1000).ok());
  InfinibandCollector c(InfinibandOptions{tmp.path()});
  absl::Time t = absl::FromUnixSeconds(1000);
  auto s1 = Cycle(c, t);
  EXPECT_EQ(s1.count("infiniband/mlx5_1/1/port_xmit_data"), 1u);

  ASSERT_TRUE(w.RemoveHca("mlx5_1").ok());
  auto s2 = Cycle(c, t + absl::Seconds(1));
  EXPECT_EQ(s2.count("infiniband/mlx5_1/1/port_xmit_data"), 0u);
  EXPECT_EQ(s2.count("infiniband/mlx5_0/1/port_xmit_data"), 1u);
  EXPECT_EQ(errors_.count, 0u);

  // Back, with counters restarted (driver reload).
  ASSERT_TRUE(w.AddHca(b).ok());
  ASSERT_TRUE(w.SetIbCounter("mlx5_1", 1, "port_xmit_data", 7).ok());
  auto s3 = Cycle(c, t + absl::Seconds(2));
  ASSERT_EQ(s3.count("infiniband/mlx5_1/1/port_xmit_data"), 1u);
  EXPECT_EQ(s3["infiniband/mlx5_1/1/port_xmit_data"].value.raw, 7u);
  EXPECT_EQ(errors_.count, 0u);
}

// Garbage, empty, huge and unreadable files: one error per series, counted; the other values of
// the cycle are still read.
TEST_F(InfinibandCollectorTest, BadFilesAreCountedAndTheCycleGoesOn) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  ASSERT_TRUE(w.AddHca(sim::HcaSpec{}).ok());
  const std::string pd = w.IbPortDir("mlx5_0", 1);
  ASSERT_TRUE(w.WriteFile(pd + "/counters/symbol_error", "garbage\n").ok());
  ASSERT_TRUE(w.WriteFile(pd + "/counters/link_downed", "").ok());
  ASSERT_TRUE(w.WriteFile(pd + "/counters/port_rcv_errors", std::string(1 << 20, '7')).ok());
  ASSERT_TRUE(w.WriteFile(pd + "/state", "ACTIVE\n").ok());
  ASSERT_TRUE(w.WriteFile(pd + "/rate", "fast\n").ok());
  ASSERT_TRUE(w.SetIbCounter("mlx5_0", 1, "port_xmit_data", 42).ok());
  testing::FaultFileSystem ffs;
  ffs.FailReads("hw_counters/out_of_sequence", absl::InternalError("read: Input/output error"));
  InfinibandCollector c(InfinibandOptions{tmp.path()}, &ffs);
  auto series = Cycle(c);
  EXPECT_EQ(errors_.count, 6u);
  for (const char* key : {"infiniband/mlx5_0/1/symbol_error", "infiniband/mlx5_0/1/link_downed",
                          "infiniband/mlx5_0/1/port_rcv_errors", "infiniband_port/mlx5_0/1/state",
                          "infiniband_port/mlx5_0/1/rate",
                          "infiniband_hw/mlx5_0/1/out_of_sequence"}) {
    EXPECT_EQ(series[key].value.status, ValueStatus::kError) << key;
  }
  EXPECT_EQ(series["infiniband/mlx5_0/1/port_xmit_data"].value.status, ValueStatus::kOk);
  EXPECT_EQ(series["infiniband/mlx5_0/1/port_xmit_data"].value.raw, 42u);
  // Messages name the file.
  bool named = false;
  for (const std::string& m : errors_.messages) named |= m.find("symbol_error") != std::string::npos;
  EXPECT_TRUE(named);
  // The next cycle, after the files are repaired, reads them again.
  ffs.Clear();
  ASSERT_TRUE(w.SetIbCounter("mlx5_0", 1, "symbol_error", 3).ok());
  auto after = Cycle(c);
  EXPECT_EQ(after["infiniband/mlx5_0/1/symbol_error"].value.raw, 3u);
  EXPECT_EQ(after["infiniband_hw/mlx5_0/1/out_of_sequence"].value.status, ValueStatus::kOk);
}

TEST_F(InfinibandCollectorTest, NoInfinibandClassIsEmptyNotError) {
  testing::TempDir tmp;
  InfinibandCollector c(InfinibandOptions{tmp.path()});
  auto series = Cycle(c);
  EXPECT_TRUE(series.empty());
  EXPECT_EQ(errors_.count, 0u);
}

// Real kernels: class/infiniband/<dev> is a symbolic link into /sys/devices. Both kinds work.
TEST_F(InfinibandCollectorTest, ClassEntriesAsSymlinks) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  ASSERT_TRUE(w.AddHca(sim::HcaSpec{}).ok());
  ASSERT_TRUE(fs::is_symlink(tmp.path() + "/class/infiniband/mlx5_0"));
  InfinibandCollector c(InfinibandOptions{tmp.path()});
  auto series = Cycle(c);
  EXPECT_EQ(series.count("infiniband/mlx5_0/1/port_rcv_data"), 1u);
  EXPECT_EQ(series.count("infiniband_hw/mlx5_0/1/out_of_sequence"), 1u);
}

}  // namespace
}  // namespace ringside::collectors
