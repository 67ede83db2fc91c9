#include "collectors/ethtool/ethtool_text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

#include "tests/testing/temp_dir.h"

namespace ringside::collectors {
namespace {

std::map<std::string, uint64_t> AsMap(const EthtoolText& t) {
  std::map<std::string, uint64_t> m;
  for (size_t i = 0; i < t.names.size(); ++i) m[t.names[i]] = t.values[i];
  return m;
}

std::string Fixture(const std::string& rel) {
  std::string text = testing::ReadFileOrEmpty(testing::SharedDir() + "/fixtures/" + rel);
  EXPECT_FALSE(text.empty()) << rel;
  return text;
}

// node_exporter's e1000e capture: a "# ethtool -S eth0" comment, the header, 16 stats.
TEST(EthtoolTextTest, NodeExporterFixture) {
  EthtoolText t = ParseEthtoolText(Fixture("ethtool/node_exporter/eth0/statistics"));
  EXPECT_EQ(t.malformed, 0u) << t.first_malformed;
  ASSERT_EQ(t.names.size(), 16u);
  EXPECT_EQ(t.names.front(), "tx_packets");
  EXPECT_EQ(t.values.front(), 961500u);
  EXPECT_EQ(t.names.back(), "duplicate_metric");
  std::map<std::string, uint64_t> m = AsMap(t);
  EXPECT_EQ(m["rx_packets"], 1260062u);
  EXPECT_EQ(m["port.rx_dropped"], 12028u);
  EXPECT_EQ(m["rx_missed"], 401u);
  // "duplicate metric" and "duplicate_metric" are two different driver names; they collide only
  // once sanitized into a Prometheus metric name (node_exporter then drops both). The raw names
  // are kept here, each with its own value.
  EXPECT_EQ(m["duplicate metric"], 1u);
  EXPECT_EQ(m["duplicate_metric"], 2u);
  EXPECT_TRUE(t.duplicates.empty());
  EXPECT_FALSE(t.error.has_value());
}

// bond0's capture is only "ERROR: 1", without a newline: reading it failed with errno 1 (EPERM).
TEST(EthtoolTextTest, NodeExporterBondFixtureIsOnlyAnError) {
  EthtoolText t = ParseEthtoolText(Fixture("ethtool/node_exporter/bond0/statistics"));
  EXPECT_TRUE(t.names.empty());
  EXPECT_EQ(t.malformed, 0u);
  ASSERT_TRUE(t.error.has_value());
  EXPECT_EQ(*t.error, 1);
}

TEST(EthtoolTextTest, StopsAtErrorLine) {
  EthtoolText t = ParseEthtoolText("NIC statistics:\n     a: 1\nERROR: 95\n     b: 2\n");
  ASSERT_EQ(t.names.size(), 1u);
  EXPECT_EQ(t.names[0], "a");
  EXPECT_EQ(t.error, 95);
}

// A name the driver really repeats: the first value is kept (the driver's order is stable, so it
// is always the same counter) and the repeat is reported.
TEST(EthtoolTextTest, RepeatedNameKeepsFirst) {
  EthtoolText t = ParseEthtoolText(
      "NIC statistics:\n     rx_bytes: 10\n     tx_bytes: 20\n     rx_bytes: 30\n");
  ASSERT_EQ(t.names.size(), 2u);
  EXPECT_EQ(AsMap(t)["rx_bytes"], 10u);
  ASSERT_EQ(t.duplicates.size(), 1u);
  EXPECT_EQ(t.duplicates[0], "rx_bytes");
}

// Driver names with spaces, dots, brackets and ": " inside (names node_exporter's own tests use).
TEST(EthtoolTextTest, OddNames) {
  EthtoolText t = ParseEthtoolText(
      "NIC statistics:\n"
      "     Tx LPI entry count: 7\n"
      "     Queue[0] AllocFails: 3\n"
      "     port.VF_admin_queue_requests: 4\n"
      "     [3]: tx_bytes: 42\n"
      "     big: 18446744073709551615\n");
  EXPECT_EQ(t.malformed, 0u) << t.first_malformed;
  std::map<std::string, uint64_t> m = AsMap(t);
  EXPECT_EQ(m["Tx LPI entry count"], 7u);
  EXPECT_EQ(m["Queue[0] AllocFails"], 3u);
  EXPECT_EQ(m["port.VF_admin_queue_requests"], 4u);
  EXPECT_EQ(m["[3]: tx_bytes"], 42u);
  EXPECT_EQ(m["big"], UINT64_MAX);
}

// A real mlx5 dump (ConnectX-4 Lx, kernel 4.15) with header and indentation stripped by the tool
// that saved it.
TEST(EthtoolTextTest, HeaderlessMlx5Dump) {
  EthtoolText t = ParseEthtoolText(Fixture(
      "tool-outputs/ethtool/ethq_ethtool-S_mlx5_cx4lx_ubuntu18.04-k4.15_whitespace-stripped.txt"));
  EXPECT_EQ(t.malformed, 0u) << t.first_malformed;
  EXPECT_EQ(t.names.size(), 751u);
  EXPECT_TRUE(t.duplicates.empty());
  std::map<std::string, uint64_t> m = AsMap(t);
  EXPECT_EQ(m["rx_packets"], 845320277u);
  EXPECT_EQ(m["rx_bytes"], 2195783498134u);
  EXPECT_EQ(m.count("rx_global_pause_duration"), 1u);
  EXPECT_EQ(m.count("link_down_events_phy"), 1u);
}

TEST(EthtoolTextTest, IndentedDumpWithoutHeader) {
  EthtoolText t =
      ParseEthtoolText(Fixture("tool-outputs/ethtool/ethq_ethtool-S_mlx5_cx4lx_ubuntu16.04.txt"));
  EXPECT_EQ(t.malformed, 0u) << t.first_malformed;
  EXPECT_EQ(t.names.size(), 309u);
  EXPECT_EQ(AsMap(t)["rx_packets"], 5487361u);
}

// Lines that are not ethtool's: counted, never guessed at; the good lines around them are kept.
TEST(EthtoolTextTest, MalformedLinesAreCounted) {
  EthtoolText t = ParseEthtoolText(
      "NIC statistics:\n"
      "     rx_bytes: 100\n"
      "     negative: -1\n"
      "     glued:5\n"
      "     hex: 0x10\n"
      "     float: 1.5\n"
      "     : 3\n"
      "some prose without a value\n"
      "     tx_bytes: 200\n"
      "     rx_prio3_pau");  // cut off while being written
  EXPECT_EQ(t.names.size(), 2u);
  EXPECT_EQ(AsMap(t)["tx_bytes"], 200u);
  EXPECT_EQ(t.malformed, 7u);
  EXPECT_EQ(t.first_malformed, "negative: -1");
  EXPECT_FALSE(t.error.has_value());
}

TEST(EthtoolTextTest, NoStatsAndOtherHeaders) {
  EthtoolText none = ParseEthtoolText("no stats available\n");
  EXPECT_TRUE(none.names.empty());
  EXPECT_EQ(none.malformed, 0u);
  EthtoolText empty = ParseEthtoolText("");
  EXPECT_TRUE(empty.names.empty());
  EXPECT_EQ(empty.malformed, 0u);
  EthtoolText groups = ParseEthtoolText(
      "Standard stats for eth0:\n\teth-mac-FramesTransmittedOK: 5\r\n\r\nNIC statistics:\r\n"
      "     rx_bytes: 9\r\n");
  EXPECT_EQ(groups.malformed, 0u) << groups.first_malformed;
  EXPECT_EQ(AsMap(groups)["eth-mac-FramesTransmittedOK"], 5u);
  EXPECT_EQ(AsMap(groups)["rx_bytes"], 9u);
}

TEST(EthtoolTextTest, FormatRoundTrips) {
  std::vector<std::string> names = {"rx_prio3_pause", "tx_prio3_pause_duration", "Tx LPI count"};
  std::vector<uint64_t> values = {1, 18446744073709551615u, 0};
  std::string text = FormatEthtoolText(names, values);
  EXPECT_EQ(text.substr(0, 37), "NIC statistics:\n     rx_prio3_pause: ");
  EthtoolText t = ParseEthtoolText(text);
  EXPECT_EQ(t.names, names);
  EXPECT_EQ(t.values, values);
}

}  // namespace
}  // namespace ringside::collectors
