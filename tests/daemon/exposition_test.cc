#include "daemon/agent/exposition.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "collectors/ethtool/ethtool_collector.h"
#include "collectors/infiniband/infiniband_collector.h"
#include "collectors/netdev/netdev_collector.h"
#include "prometheus/text_serializer.h"
#include "sim/sysfs_tree.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

class ExpositionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::HcaSpec ib;
    ASSERT_TRUE(w_.AddHca(ib).ok());
    sim::HcaSpec roce;
    roce.name = "mlx5_8";
    roce.pci = "0000:8a:00.0";
    roce.link_layer = "Ethernet";
    roce.netdev = "ens1f0np0";
    ASSERT_TRUE(w_.AddHca(roce).ok());
    ASSERT_TRUE(w_.SetIbCounter("mlx5_0", 1, "port_rcv_data", 1000).ok());
    ASSERT_TRUE(w_.SetHwCounter("mlx5_8", 1, "np_ecn_marked_roce_packets", 31).ok());
    ASSERT_TRUE(w_.SetNetdevStat("ens1f0np0", "rx_bytes", 5000).ok());
  }

  testing::PromText Scrape() {
    std::vector<std::unique_ptr<collectors::Collector>> cs;
    cs.push_back(std::make_unique<collectors::InfinibandCollector>(
        collectors::InfinibandOptions{tmp_.path()}));
    cs.push_back(
        std::make_unique<collectors::NetdevCollector>(collectors::NetdevOptions{tmp_.path()}));
    sampler_ = std::make_unique<Sampler>(SamplerOptions{"gpu-node-17"}, std::move(cs));
    sampler_->RunOnce();
    SnapshotCollectable collectable(sampler_.get(), ExpositionOptions{"1.2.3"});
    text_ = prometheus::TextSerializer().Serialize(collectable.Collect());
    return testing::ParsePromText(text_);
  }

  testing::TempDir tmp_;
  sim::SysfsTreeWriter w_{tmp_.path()};
  std::unique_ptr<Sampler> sampler_;
  std::string text_;
};

TEST_F(ExpositionTest, CountersInBaseUnitsWithNodeDevicePort) {
  testing::PromText p = Scrape();
  auto rcv = p.Find("ringside_ib_port_received_bytes_total",
                    {{"node", "gpu-node-17"}, {"device", "mlx5_0"}, {"port", "1"}});
  ASSERT_EQ(rcv.size(), 1u);
  EXPECT_DOUBLE_EQ(rcv[0].value, 4000);  // 1000 four-byte words
  EXPECT_EQ(p.types["ringside_ib_port_received_bytes_total"], "counter");
  auto ecn = p.Find("ringside_rdma_np_ecn_marked_roce_packets_total", {{"device", "mlx5_8"}});
  ASSERT_EQ(ecn.size(), 1u);
  EXPECT_DOUBLE_EQ(ecn[0].value, 31);
  EXPECT_EQ(p.types["ringside_ib_port_state"], "gauge");
  auto lifespan = p.Find("ringside_rdma_hw_counters_lifespan_seconds", {{"device", "mlx5_0"}});
  ASSERT_EQ(lifespan.size(), 1u);
  EXPECT_DOUBLE_EQ(lifespan[0].value, 0.01);
}

// A RoCE netdev's series carry the RDMA device and port, so they join the port counters.
TEST_F(ExpositionTest, RoceNetdevJoinsItsRdmaPort) {
  testing::PromText p = Scrape();
  auto rx = p.Find("ringside_netdev_rx_bytes_total", {{"netdev", "ens1f0np0"}});
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].labels["device"], "mlx5_8");
  EXPECT_EQ(rx[0].labels["port"], "1");
  EXPECT_DOUBLE_EQ(rx[0].value, 5000);
  auto info = p.Find("ringside_ib_port_info", {{"device", "mlx5_8"}, {"port", "1"}});
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].labels["link_layer"], "Ethernet");
  EXPECT_EQ(info[0].labels["netdev"], "ens1f0np0");
  auto dev = p.Find("ringside_ib_device_info", {{"device", "mlx5_0"}});
  ASSERT_EQ(dev.size(), 1u);
  EXPECT_EQ(dev[0].labels["hca_type"], "MT4129");
  EXPECT_EQ(dev[0].labels["firmware_version"], "28.39.1002");
}

TEST_F(ExpositionTest, UnknownCounterUsesTheSourceFallbackWithItsName) {
  ASSERT_TRUE(w_.WriteFile(w_.IbPortDir("mlx5_0", 1) + "/hw_counters/brand_new_counter", "9\n").ok());
  testing::PromText p = Scrape();
  auto other = p.Find("ringside_rdma_other_hw_counter_total",
                      {{"device", "mlx5_0"}, {"counter", "brand_new_counter"}});
  ASSERT_EQ(other.size(), 1u);
  EXPECT_DOUBLE_EQ(other[0].value, 9);
}

TEST_F(ExpositionTest, FailedReadsAreNotExportedButCounted) {
  ASSERT_TRUE(w_.WriteFile(w_.IbPortDir("mlx5_0", 1) + "/counters/symbol_error", "junk\n").ok());
  testing::PromText p = Scrape();
  EXPECT_TRUE(p.Find("ringside_ib_port_symbol_errors_total", {{"device", "mlx5_0"}}).empty());
  auto errors = p.Find("ringside_agent_collector_read_errors_total", {{"collector", "infiniband"}});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_DOUBLE_EQ(errors[0].value, 1);
  auto series = p.Find("ringside_agent_collector_series", {{"collector", "infiniband"}});
  ASSERT_EQ(series.size(), 1u);
  EXPECT_GT(series[0].value, 100);
  auto duration = p.Find("ringside_agent_collector_duration_seconds", {{"collector", "netdev"}});
  ASSERT_EQ(duration.size(), 1u);
  EXPECT_GT(duration[0].value, 0);
  auto build = p.Find("ringside_agent_build_info", {{"version", "1.2.3"}});
  EXPECT_EQ(build.size(), 1u);
}

// PFC per priority from `ethtool -S` dumps: a priority label, durations in seconds, joined to the
// RoCE port; uncatalogued per-ring statistics stay off /metrics unless asked for.
TEST_F(ExpositionTest, EthtoolPfcSeriesWithPriorityAndRdmaPort) {
  const std::string dumps = tmp_.path() + "/ethtool";
  ASSERT_TRUE(w_.WriteFile("ethtool/ens1f0np0",
                           "NIC statistics:\n     rx_prio3_pause: 12\n     tx_prio3_pause: 400\n"
                           "     tx_prio3_pause_duration: 2500000\n"
                           "     tx_pause_storm_error_events: 1\n     rx0_packets: 77\n")
                  .ok());
  auto scrape = [&](bool all) {
    std::vector<std::unique_ptr<collectors::Collector>> cs;
    cs.push_back(std::make_unique<collectors::NetdevCollector>(
        collectors::NetdevOptions{tmp_.path()}));
    collectors::EthtoolOptions eo;
    eo.sysfs_root = tmp_.path();
    eo.source = *collectors::ParseEthtoolSource("dir:" + dumps);
    cs.push_back(std::make_unique<collectors::EthtoolCollector>(eo));
    Sampler sampler(SamplerOptions{"n"}, std::move(cs));
    auto snap = sampler.RunOnce();
    ExpositionOptions opts{"v"};
    opts.ethtool_all = all;
    return testing::ParsePromText(
        prometheus::TextSerializer().Serialize(SnapshotToFamilies(*snap, opts)));
  };
  testing::PromText p = scrape(false);
  auto tx = p.Find("ringside_pfc_tx_pause_duration_seconds_total",
                   {{"netdev", "ens1f0np0"}, {"priority", "3"}});
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_DOUBLE_EQ(tx[0].value, 2.5);
  EXPECT_EQ(tx[0].labels["device"], "mlx5_8");
  EXPECT_EQ(tx[0].labels["port"], "1");
  auto frames = p.Find("ringside_pfc_rx_pause_frames_total", {{"priority", "3"}});
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_DOUBLE_EQ(frames[0].value, 12);
  EXPECT_EQ(p.Find("ringside_ethtool_tx_pause_storm_error_events_total").size(), 1u);
  EXPECT_TRUE(p.Find("ringside_ethtool_other_statistic_total").empty());
  auto caps = p.Find("ringside_ethtool_capabilities_info", {{"netdev", "ens1f0np0"}});
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_EQ(caps[0].labels["pfc_priorities"].find('3') != std::string::npos, true)
      << caps[0].labels["pfc_priorities"];
  testing::PromText all = scrape(true);
  EXPECT_EQ(all.Find("ringside_ethtool_other_statistic_total", {{"counter", "rx0_packets"}}).size(),
            1u);
}

TEST_F(ExpositionTest, NoSnapshotYetMeansNoFamilies) {
  Sampler empty(SamplerOptions{"n"}, {});
  SnapshotCollectable collectable(&empty, ExpositionOptions{"x"});
  EXPECT_TRUE(collectable.Collect().empty());
}

}  // namespace
}  // namespace ringside::daemon
