#include "collectors/netdev/netdev_collector.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "sim/sysfs_tree.h"
#include "tests/testing/temp_dir.h"

namespace ringside::collectors {
namespace {

class NetdevCollectorTest : public ::testing::Test {
 protected:
  std::map<std::string, Value> Cycle(NetdevCollector& c, absl::Time now = absl::Now()) {
    snap_ = CollectorSnapshot{};
    errors_ = CycleErrors{};
    c.Collect(now, snap_, errors_);
    std::map<std::string, Value> out;
    for (size_t i = 0; i < snap_.table->defs.size(); ++i) {
      const SeriesDef& d = snap_.table->defs[i];
      out[absl::StrCat(d.device, "/", d.counter)] = snap_.values[i];
      defs_[absl::StrCat(d.device, "/", d.counter)] = d;
    }
    return out;
  }
  std::map<std::string, std::string> Info(const std::string& netdev) {
    for (const InfoRecord& r : snap_.table->info) {
      if (r.source == "netdev" && r.device == netdev) return r.labels;
    }
    return {};
  }

  CollectorSnapshot snap_;
  CycleErrors errors_;
  std::map<std::string, SeriesDef> defs_;
};

TEST_F(NetdevCollectorTest, ProcfsFixture) {
  NetdevCollector c(NetdevOptions{testing::SharedDir() + "/fixtures/sysfs/procfs/sys"});
  auto v = Cycle(c);
  EXPECT_EQ(errors_.count, 0u) << (errors_.messages.empty() ? "" : errors_.messages[0]);
  EXPECT_EQ(v["eth0/carrier_changes"].raw, 2u);
  EXPECT_EQ(v["eth0/carrier_up_count"].raw, 1u);
  EXPECT_EQ(v["eth0/carrier_down_count"].raw, 1u);
  EXPECT_EQ(v["eth0/operstate"].raw, 6u);  // up
  EXPECT_EQ(v["eth0/mtu"].raw, 1500u);
  EXPECT_EQ(v["eth0/speed"].raw, 1000u * 125000);  // 1000 Mb/s in bytes/s
  EXPECT_EQ(defs_["eth0/carrier_changes"].width, 32);
}

// A RoCE netdev: statistics read, and the netdev tied to its RDMA device and port.
TEST_F(NetdevCollectorTest, RoceNetdevStatisticsAndRdmaMapping) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  sim::HcaSpec roce;
  roce.name = "mlx5_8";
  roce.link_layer = "Ethernet";
  roce.netdev = "ens1f0np0";
  ASSERT_TRUE(w.AddHca(roce).ok());
  sim::NetdevSpec mgmt;
  mgmt.name = "eno1";
  mgmt.speed_mbps = 1000;
  ASSERT_TRUE(w.AddNetdev(mgmt).ok());
  ASSERT_TRUE(w.SetNetdevStat("ens1f0np0", "rx_bytes", 987654321098ull).ok());
  ASSERT_TRUE(w.SetNetdevStat("ens1f0np0", "tx_packets", 5555).ok());
  NetdevCollector c(NetdevOptions{tmp.path()});
  auto v = Cycle(c);
  EXPECT_EQ(errors_.count, 0u) << (errors_.messages.empty() ? "" : errors_.messages[0]);
  EXPECT_EQ(v["ens1f0np0/rx_bytes"].raw, 987654321098ull);
  EXPECT_EQ(defs_["ens1f0np0/rx_bytes"].unit, Unit::kBytes);
  EXPECT_EQ(v["ens1f0np0/tx_packets"].raw, 5555u);
  EXPECT_EQ(v["ens1f0np0/speed"].raw, 400000ull * 125000);
  EXPECT_EQ(Info("ens1f0np0")["rdma_device"], "mlx5_8");
  EXPECT_EQ(Info("ens1f0np0")["rdma_port"], "1");
  EXPECT_EQ(Info("eno1").count("rdma_device"), 0u);
  EXPECT_EQ(v.count("eno1/rx_bytes"), 1u);
}

// Without GID entries (no address configured yet) the PCI function's net/ folder maps it.
TEST_F(NetdevCollectorTest, MappingFromPciNetFolder) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  sim::HcaSpec roce;
  roce.name = "mlx5_2";
  roce.link_layer = "Ethernet";
  roce.netdev = "ens2np0";
  ASSERT_TRUE(w.AddHca(roce).ok());
  std::filesystem::remove_all(tmp.path() + "/" + w.IbPortDir("mlx5_2", 1) + "/gid_attrs");
  auto map = MapNetdevsToRdmaPorts(DefaultFileSystem(), tmp.path());
  ASSERT_EQ(map.count("ens2np0"), 1u);
  EXPECT_EQ(map["ens2np0"].device, "mlx5_2");
  EXPECT_EQ(map["ens2np0"].port, "1");
}

TEST_F(NetdevCollectorTest, CarrierFlapAndOperstate) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  sim::NetdevSpec nd;
  nd.name = "eth1";
  ASSERT_TRUE(w.AddNetdev(nd).ok());
  NetdevCollector c(NetdevOptions{tmp.path()});
  auto a = Cycle(c);
  EXPECT_EQ(a["eth1/operstate"].raw, 6u);
  ASSERT_TRUE(w.SetNetdevAttr("eth1", "operstate", "down\n").ok());
  ASSERT_TRUE(w.SetNetdevAttr("eth1", "carrier_changes", "3\n").ok());
  ASSERT_TRUE(w.SetNetdevAttr("eth1", "speed", "-1\n").ok());
  auto b = Cycle(c);
  EXPECT_EQ(b["eth1/operstate"].raw, 2u);
  EXPECT_EQ(b["eth1/carrier_changes"].raw, 3u);
  EXPECT_EQ(b["eth1/speed"].status, ValueStatus::kUnavailable);  // unknown speed: no value
  EXPECT_EQ(errors_.count, 0u);
  ASSERT_TRUE(w.SetNetdevAttr("eth1", "operstate", "sideways\n").ok());
  auto c2 = Cycle(c);
  EXPECT_EQ(c2["eth1/operstate"].status, ValueStatus::kError);
  EXPECT_EQ(errors_.count, 1u);
}

TEST_F(NetdevCollectorTest, OperStateIds) {
  EXPECT_EQ(*OperStateId("unknown\n"), 0u);
  EXPECT_EQ(*OperStateId("down\n"), 2u);
  EXPECT_EQ(*OperStateId("lowerlayerdown\n"), 3u);
  EXPECT_EQ(*OperStateId("up\n"), 6u);
  EXPECT_FALSE(OperStateId("").ok());
}

TEST_F(NetdevCollectorTest, InterfaceVanishes) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  sim::NetdevSpec nd;
  nd.name = "eth7";
  ASSERT_TRUE(w.AddNetdev(nd).ok());
  NetdevCollector c(NetdevOptions{tmp.path()});
  const absl::Time t = absl::FromUnixSeconds(100);
  EXPECT_EQ(Cycle(c, t).count("eth7/rx_bytes"), 1u);
  std::filesystem::remove(tmp.path() + "/class/net/eth7");
  // The class listing is read once per device_check_interval (1 s).
  EXPECT_EQ(Cycle(c, t + absl::Seconds(1)).count("eth7/rx_bytes"), 0u);
  EXPECT_EQ(errors_.count, 0u);
}

}  // namespace
}  // namespace ringside::collectors
