// On shared/fixtures/sysfs/node_exporter, every value node_exporter's own end-to-end test expects
// (shared/fixtures/node_exporter/infiniband_expected.txt) has an equal value in our /metrics for
// the same device, port and counter. Names differ; values and units must not.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collectors/infiniband/infiniband_collector.h"
#include "collectors/netdev/netdev_collector.h"
#include "daemon/agent/exposition.h"
#include "daemon/agent/sampler.h"
#include "prometheus/text_serializer.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

// node_exporter name → ours.
const std::map<std::string, std::string>& NameMap() {
  static const auto* m = new std::map<std::string, std::string>{
      {"node_infiniband_legacy_data_received_bytes_total", "ringside_ib_port_legacy_received_bytes_total"},
      {"node_infiniband_legacy_data_transmitted_bytes_total", "ringside_ib_port_legacy_transmitted_bytes_total"},
      {"node_infiniband_legacy_multicast_packets_received_total", "ringside_ib_port_legacy_multicast_received_packets_total"},
      {"node_infiniband_legacy_multicast_packets_transmitted_total", "ringside_ib_port_legacy_multicast_transmitted_packets_total"},
      {"node_infiniband_legacy_packets_received_total", "ringside_ib_port_legacy_received_packets_total"},
      {"node_infiniband_legacy_packets_transmitted_total", "ringside_ib_port_legacy_transmitted_packets_total"},
      {"node_infiniband_legacy_unicast_packets_received_total", "ringside_ib_port_legacy_unicast_received_packets_total"},
      {"node_infiniband_legacy_unicast_packets_transmitted_total", "ringside_ib_port_legacy_unicast_transmitted_packets_total"},
      {"node_infiniband_link_downed_total", "ringside_ib_port_link_downed_total"},
      {"node_infiniband_link_error_recovery_total", "ringside_ib_port_link_error_recoveries_total"},
      {"node_infiniband_multicast_packets_received_total", "ringside_ib_port_multicast_received_packets_total"},
      {"node_infiniband_multicast_packets_transmitted_total", "ringside_ib_port_multicast_transmitted_packets_total"},
      {"node_infiniband_physical_state_id", "ringside_ib_port_physical_state"},
      {"node_infiniband_port_constraint_errors_received_total", "ringside_ib_port_receive_constraint_errors_total"},
      {"node_infiniband_port_constraint_errors_transmitted_total", "ringside_ib_port_transmit_constraint_errors_total"},
      {"node_infiniband_port_data_received_bytes_total", "ringside_ib_port_received_bytes_total"},
      {"node_infiniband_port_data_transmitted_bytes_total", "ringside_ib_port_transmitted_bytes_total"},
      {"node_infiniband_port_discards_received_total", "ringside_ib_port_receive_discards_total"},
      {"node_infiniband_port_discards_transmitted_total", "ringside_ib_port_transmit_discards_total"},
      {"node_infiniband_port_errors_received_total", "ringside_ib_port_receive_errors_total"},
      {"node_infiniband_port_packets_received_total", "ringside_ib_port_received_packets_total"},
      {"node_infiniband_port_packets_transmitted_total", "ringside_ib_port_transmitted_packets_total"},
      {"node_infiniband_port_transmit_wait_total", "ringside_ib_port_transmit_wait_ticks_total"},
      {"node_infiniband_rate_bytes_per_second", "ringside_ib_port_rate_bytes_per_second"},
      {"node_infiniband_state_id", "ringside_ib_port_state"},
      {"node_infiniband_unicast_packets_received_total", "ringside_ib_port_unicast_received_packets_total"},
      {"node_infiniband_unicast_packets_transmitted_total", "ringside_ib_port_unicast_transmitted_packets_total"},
  };
  return *m;
}

testing::PromText OurMetrics(const std::string& sys) {
  std::vector<std::unique_ptr<collectors::Collector>> cs;
  cs.push_back(std::make_unique<collectors::InfinibandCollector>(collectors::InfinibandOptions{sys}));
  cs.push_back(std::make_unique<collectors::NetdevCollector>(collectors::NetdevOptions{sys}));
  Sampler sampler(SamplerOptions{"node-a"}, std::move(cs));
  auto snap = sampler.RunOnce();
  std::string text = prometheus::TextSerializer().Serialize(SnapshotToFamilies(*snap, ExpositionOptions{"test"}));
  std::vector<std::string> bad;
  testing::PromText parsed = testing::ParsePromText(text, &bad);
  EXPECT_TRUE(bad.empty()) << bad[0];
  return parsed;
}

TEST(NodeExporterParityTest, EveryExpectedValueIsOurs) {
  const std::string shared = testing::SharedDir();
  testing::PromText ours = OurMetrics(shared + "/fixtures/sysfs/node_exporter/sys");
  testing::PromText theirs = testing::ParsePromText(
      testing::ReadFileOrEmpty(shared + "/fixtures/node_exporter/infiniband_expected.txt"));
  ASSERT_GT(theirs.samples.size(), 50u);
  int compared = 0;
  for (const testing::PromSample& s : theirs.samples) {
    if (s.name == "node_infiniband_info") {
      auto mine = ours.Find("ringside_ib_device_info", {{"device", s.labels.at("device")}});
      ASSERT_EQ(mine.size(), 1u) << s.labels.at("device");
      for (const char* l : {"board_id", "firmware_version", "hca_type"}) {
        EXPECT_EQ(mine[0].labels[l], s.labels.at(l)) << l;
      }
      ++compared;
      continue;
    }
    auto name = NameMap().find(s.name);
    ASSERT_NE(name, NameMap().end()) << "no mapping for " << s.name;
    auto mine = ours.Find(name->second,
                          {{"device", s.labels.at("device")}, {"port", s.labels.at("port")}});
    ASSERT_EQ(mine.size(), 1u) << name->second << " " << s.labels.at("device") << "/"
                               << s.labels.at("port");
    EXPECT_DOUBLE_EQ(mine[0].value, s.value)
        << s.name << " " << s.labels.at("device") << "/" << s.labels.at("port");
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(theirs.samples.size()));
  // Like node_exporter, nothing is exported for i40iw0's "N/A (no PMA)" counters.
  EXPECT_TRUE(ours.Find("ringside_ib_port_symbol_errors_total", {{"device", "i40iw0"}}).empty());
}

}  // namespace
}  // namespace ringside::daemon
