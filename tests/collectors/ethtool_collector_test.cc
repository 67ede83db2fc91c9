#include "collectors/ethtool/ethtool_collector.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectors/ethtool/ethtool_names.h"
#include "collectors/ethtool/ethtool_pause.h"
#include "collectors/ethtool/ethtool_text.h"
#include "tests/testing/temp_dir.h"

namespace ringside::collectors {
namespace {

// ---------------------------------------------------------------------------------------------
// Helpers shared by the tests.

struct Cycle {
  CollectorSnapshot snap;
  CycleErrors errors;
  std::map<std::string, Value> values;  // "device/counter"
  std::map<std::string, SeriesDef> defs;

  const InfoRecord* Caps(const std::string& device) const {
    for (const InfoRecord& r : snap.table->info) {
      if (r.source == "ethtool_caps" && r.device == device) return &r;
    }
    return nullptr;
  }
  std::string Cap(const std::string& device, const std::string& label) const {
    const InfoRecord* r = Caps(device);
    if (r == nullptr) return "<no record>";
    auto it = r->labels.find(label);
    return it == r->labels.end() ? "<no label>" : it->second;
  }
  std::string FirstError() const { return errors.messages.empty() ? "" : errors.messages[0]; }
};

Cycle RunCycle(EthtoolCollector& c, absl::Time now) {
  Cycle out;
  c.Collect(now, out.snap, out.errors);
  EXPECT_EQ(out.snap.collector, "ethtool");
  EXPECT_EQ(out.snap.values.size(), out.snap.table->defs.size());
  for (size_t i = 0; i < out.snap.table->defs.size(); ++i) {
    const SeriesDef& d = out.snap.table->defs[i];
    const std::string key = absl::StrCat(d.device, "/", d.counter);
    EXPECT_EQ(out.values.count(key), 0u) << "series twice: " << key;
    out.values[key] = out.snap.values[i];
    out.defs[key] = d;
  }
  return out;
}

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

// An mlx5 port's `ethtool -S` stats, named as in reference/ib-roce-counters.md §5.2, with PFC
// enabled on the priorities in `pfc`.
class Mlx5Port {
 public:
  explicit Mlx5Port(std::vector<int> pfc = {3}) : pfc_(std::move(pfc)) {
    for (const char* n : {"rx_packets",
                          "rx_bytes",
                          "tx_packets",
                          "tx_bytes",
                          "rx0_ecn_mark",
                          "rx1_ecn_mark",
                          "rx_out_of_buffer",
                          "rx_packets_phy",
                          "rx_bytes_phy",
                          "tx_packets_phy",
                          "tx_bytes_phy",
                          "rx_crc_errors_phy",
                          "rx_symbol_err_phy",
                          "rx_pcs_symbol_err_phy",
                          "rx_corrected_bits_phy",
                          "rx_bits_phy",
                          "rx_discards_phy",
                          "tx_discards_phy",
                          "rx_pause_ctrl_phy",
                          "tx_pause_ctrl_phy",
                          "link_down_events_phy",
                          "rx_buffer_passed_thres_phy",
                          "outbound_pci_stalled_rd",
                          "outbound_pci_stalled_wr"}) {
      Add(n);
    }
    for (int p = 0; p < 8; ++p) {
      for (const char* f : {"rx_prio%d_bytes", "rx_prio%d_packets", "rx_prio%d_discards",
                            "tx_prio%d_bytes", "tx_prio%d_packets"}) {
        Add(Fmt(f, p));
      }
    }
    for (int p : pfc_) {
      for (const char* f : {"rx_prio%d_pause", "rx_prio%d_pause_duration", "tx_prio%d_pause",
                            "tx_prio%d_pause_duration", "rx_prio%d_pause_transition"}) {
        Add(Fmt(f, p));
      }
      for (const char* f :
           {"rx_prio%d_buf_discard", "rx_prio%d_cong_discard", "rx_prio%d_marked"}) {
        Add(Fmt(f, p));
      }
    }
    Add("tx_pause_storm_warning_events");
    Add("tx_pause_storm_error_events");
  }

  static std::string Fmt(const char* f, int p) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), f, p);
    return buf;
  }
  void Add(const std::string& name) {
    index_[name] = names_.size();
    names_.push_back(name);
    values_.push_back(0);
  }
  uint64_t& operator[](const std::string& name) {
    auto it = index_.find(name);
    EXPECT_NE(it, index_.end()) << name;
    return values_[it->second];
  }
  std::string Text() const { return FormatEthtoolText(names_, values_); }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<uint64_t>& values() const { return values_; }

 private:
  std::vector<int> pfc_;
  std::vector<std::string> names_;
  std::vector<uint64_t> values_;
  std::map<std::string, size_t> index_;
};

// Writes a dump the way a replayer or the simulator should: a hidden temporary, then a rename.
void WriteDump(const std::string& dir, const std::string& ifname, const std::string& text) {
  const std::string tmp = absl::StrCat(dir, "/.", ifname, ".tmp");
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
  }
  std::filesystem::rename(tmp, absl::StrCat(dir, "/", ifname));
}

// ---------------------------------------------------------------------------------------------
// Names: unit, priority, kind, capabilities.

TEST(EthtoolNamesTest, UnitsPrioritiesAndKinds) {
  EXPECT_EQ(EthtoolUnit("rx_prio3_pause_duration"), Unit::kMicroseconds);
  EXPECT_EQ(EthtoolUnit("tx_global_pause_duration"), Unit::kMicroseconds);
  EXPECT_EQ(EthtoolUnit("rx_prio3_bytes"), Unit::kBytes);
  EXPECT_EQ(EthtoolUnit("rx_bytes_phy"), Unit::kBytes);
  EXPECT_EQ(EthtoolUnit("tx_prio0_packets"), Unit::kPackets);
  EXPECT_EQ(EthtoolUnit("rx_packets_phy"), Unit::kPackets);
  EXPECT_EQ(EthtoolUnit("rx_prio3_pause"), Unit::kCount);
  EXPECT_EQ(EthtoolUnit("link_down_events_phy"), Unit::kCount);
  // The size histogram counts packets per size bin, not bytes (mlx5 counters.rst).
  EXPECT_EQ(EthtoolUnit("rx_64_bytes_phy"), Unit::kPackets);
  EXPECT_EQ(EthtoolUnit("rx_65_to_127_bytes_phy"), Unit::kPackets);
  EXPECT_EQ(EthtoolUnit("rx_8192_to_10239_bytes_phy"), Unit::kPackets);
  EXPECT_EQ(EthtoolUnit("tx_bytes_phy"), Unit::kBytes);
  EXPECT_EQ(EthtoolUnit("tx_prio7_bytes"), Unit::kBytes);
  // mlx5 fills a few from 32-bit sources: they wrap at 2^32 inside the u64.
  EXPECT_EQ(EthtoolSeriesDef("eth0", "link_down_events_phy").width, 32);
  EXPECT_EQ(EthtoolSeriesDef("eth0", "outbound_pci_stalled_rd_events").width, 32);
  EXPECT_EQ(EthtoolSeriesDef("eth0", "rx_pci_signal_integrity").width, 32);
  EXPECT_EQ(EthtoolSeriesDef("eth0", "rx_bytes_phy").width, 64);
  EXPECT_EQ(EthtoolSeriesDef("eth0", "outbound_pci_stalled_rd").width, 0);  // a gauge

  EXPECT_EQ(EthtoolPriority("rx_prio3_pause"), 3);
  EXPECT_EQ(EthtoolPriority("tx_prio0_bytes"), 0);
  EXPECT_EQ(EthtoolPriority("rx_prio7_pause_transition"), 7);
  EXPECT_EQ(EthtoolPriority("prio5_x"), 5);
  EXPECT_EQ(EthtoolPriority("rx_priority_7_xon"), -1);
  EXPECT_EQ(EthtoolPriority("rx_prio_pause"), -1);
  EXPECT_EQ(EthtoolPriority("rx_prio3x_pause"), -1);
  EXPECT_EQ(EthtoolPriority("rx_myprio3_pause"), -1);
  EXPECT_EQ(EthtoolPriority("rx_prio16_pause"), -1);
  EXPECT_EQ(EthtoolPriority("rx_bytes"), -1);

  EXPECT_EQ(EthtoolNameTemplate("rx_prio3_pause_duration"), "rx_prio<N>_pause_duration");
  EXPECT_EQ(EthtoolNameTemplate("rx_bytes"), "rx_bytes");

  SeriesDef d = EthtoolSeriesDef("eth0", "tx_prio3_pause_duration");
  EXPECT_EQ(d.source, "ethtool");
  EXPECT_EQ(d.device, "eth0");
  EXPECT_EQ(d.counter, "tx_prio3_pause_duration");
  EXPECT_EQ(d.kind, SeriesKind::kCounter);
  EXPECT_EQ(d.width, 64);
  EXPECT_EQ(d.unit, Unit::kMicroseconds);
  EXPECT_EQ(d.priority, 3);
  EXPECT_TRUE(d.port.empty());
  EXPECT_EQ(EthtoolSeriesDef("veth0", "peer_ifindex").kind, SeriesKind::kGauge);
}

TEST(EthtoolNamesTest, CapabilitiesOfAnMlx5PortWithPfcOn3And5) {
  EthtoolCapabilities c = EthtoolCapabilitiesFromNames(Mlx5Port({3, 5}).names());
  EXPECT_EQ(c.pfc_pause, (1 << 3) | (1 << 5));
  EXPECT_EQ(c.pfc_pause_duration, (1 << 3) | (1 << 5));
  EXPECT_EQ(c.pfc_pause_transition, (1 << 3) | (1 << 5));
  EXPECT_EQ(c.ecn_marks, (1 << 3) | (1 << 5));
  EXPECT_FALSE(c.global_pause);
  EXPECT_TRUE(c.pause_storm_events);
  EXPECT_TRUE(c.link_down_events);
  EXPECT_TRUE(c.rx_discards_phy);
  EXPECT_TRUE(c.tx_discards_phy);
  EXPECT_TRUE(c.ring_ecn_marks);
  InfoRecord r = EthtoolCapabilitiesRecord("eth0", EthtoolSupport::kSupported, 99, c,
                                           "rx=on,tx=on,autoneg=off", 0);
  EXPECT_EQ(r.source, "ethtool_caps");
  EXPECT_EQ(r.labels["pfc_priorities"], "3,5");
  EXPECT_EQ(r.labels["n_stats"], "99");
  EXPECT_EQ(r.labels.count("duplicate_names"), 0u);

  EthtoolCapabilities none = EthtoolCapabilitiesFromNames({"peer_ifindex", "rx_prio3_bytes"});
  EXPECT_FALSE(none.any_pause());
  EXPECT_FALSE(none.pause_storm_events);
  EXPECT_EQ(none.ecn_marks, 0);
}

// ---------------------------------------------------------------------------------------------
// Folder source: `ethtool -S` dumps of mlx5 ports.

class EthtoolDumpTest : public ::testing::Test {
 protected:
  EthtoolCollector MakeCollector(std::vector<std::string> interfaces = {}) {
    EthtoolOptions o;
    o.source = *ParseEthtoolSource("dir:" + tmp_.path());
    o.interfaces = std::move(interfaces);
    return EthtoolCollector(o);
  }
  testing::TempDir tmp_;
};

TEST(EthtoolSourceTest, Flag) {
  EXPECT_EQ(ParseEthtoolSource("ioctl")->kind, EthtoolSource::Kind::kIoctl);
  absl::StatusOr<EthtoolSource> dir = ParseEthtoolSource("dir:/var/lib/replay");
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(dir->kind, EthtoolSource::Kind::kDir);
  EXPECT_EQ(dir->dir, "/var/lib/replay");
  EXPECT_TRUE(absl::IsInvalidArgument(ParseEthtoolSource("dir:").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseEthtoolSource("netlink").status()));
}

// The user-visible check of issue #3: a priority-3 PFC pause storm across several dumps shows as
// pause duration per interval. enp1s0f0np0 cannot drain priority 3 and sends pauses (tx: the
// origin); enp1s0f1np1 is paused by its peer (rx: a victim).
TEST_F(EthtoolDumpTest, Priority3PauseStormShowsAsPauseDurationPerInterval) {
  Mlx5Port origin, victim;
  // µs paused in each 1 s interval: quiet, rising, a storm of 3 intervals at 90 %, over.
  const std::vector<uint64_t> paused_us = {0, 200'000, 900'000, 950'000, 900'000, 0};
  EthtoolCollector c = MakeCollector();
  std::vector<Cycle> cycles;
  for (size_t k = 0; k <= paused_us.size(); ++k) {
    if (k > 0) {
      const uint64_t us = paused_us[k - 1];
      origin["tx_prio3_pause_duration"] += us;
      origin["tx_prio3_pause"] += us / 50;  // a pause frame every 50 µs of pause
      origin["rx_prio3_bytes"] += 1'000'000;
      victim["rx_prio3_pause_duration"] += us;
      victim["rx_prio3_pause"] += us / 50;
      if (us >= 900'000) victim["rx_prio3_pause_transition"] += 1;
      if (us >= 900'000) origin["rx_discards_phy"] += 17;
      if (k == 3) origin["tx_pause_storm_warning_events"] += 1;
    }
    WriteDump(tmp_.path(), "enp1s0f0np0", origin.Text());
    WriteDump(tmp_.path(), "enp1s0f1np1", victim.Text());
    cycles.push_back(RunCycle(c, kT0 + absl::Seconds(k)));
    ASSERT_EQ(cycles.back().errors.count, 0u) << cycles.back().FirstError();
  }

  const Cycle& last = cycles.back();
  ASSERT_EQ(last.values.size(), origin.names().size() + victim.names().size());
  EXPECT_EQ(last.values.at("enp1s0f0np0/tx_prio3_pause_duration").raw, 2'950'000u);
  EXPECT_EQ(last.values.at("enp1s0f0np0/tx_pause_storm_warning_events").raw, 1u);
  const SeriesDef& d = last.defs.at("enp1s0f0np0/tx_prio3_pause_duration");
  EXPECT_EQ(d.unit, Unit::kMicroseconds);
  EXPECT_EQ(d.priority, 3);
  EXPECT_EQ(d.width, 64);
  EXPECT_EQ(last.defs.at("enp1s0f0np0/rx_prio3_bytes").unit, Unit::kBytes);
  EXPECT_EQ(last.defs.at("enp1s0f0np0/link_down_events_phy").priority, -1);
  // The table is built once: the dumps kept their names.
  EXPECT_EQ(cycles.front().snap.table, last.snap.table);

  // Per interval: paused fraction per port, direction and priority.
  std::vector<double> origin_tx, victim_rx, origin_rx;
  for (size_t k = 1; k < cycles.size(); ++k) {
    std::vector<PauseInterval> iv = PauseDurationPerInterval(cycles[k - 1].snap, cycles[k].snap);
    // Only priority 3 has PFC: two devices × rx/tx × priority 3, and no global pause.
    ASSERT_EQ(iv.size(), 4u);
    for (const PauseInterval& p : iv) {
      EXPECT_EQ(p.priority, 3);
      EXPECT_EQ(p.interval, absl::Seconds(1));
      ASSERT_TRUE(p.pause_frames.has_value());
      EXPECT_EQ(*p.pause_frames, p.paused_us / 50);
      EXPECT_DOUBLE_EQ(p.paused_us_per_second, static_cast<double>(p.paused_us));
      if (p.device == "enp1s0f0np0" && p.direction == PauseDirection::kTx) {
        origin_tx.push_back(p.paused_fraction);
      } else if (p.device == "enp1s0f1np1" && p.direction == PauseDirection::kRx) {
        victim_rx.push_back(p.paused_fraction);
      } else if (p.device == "enp1s0f0np0" && p.direction == PauseDirection::kRx) {
        origin_rx.push_back(p.paused_fraction);
      }
    }
  }
  const std::vector<double> expected = {0.0, 0.2, 0.9, 0.95, 0.9, 0.0};
  EXPECT_EQ(origin_tx, expected);
  EXPECT_EQ(victim_rx, expected);
  EXPECT_EQ(origin_rx, std::vector<double>(6, 0.0));
  // The detector's rule, paused >= 50 % for >= 3 consecutive samples, holds for exactly the storm.
  int run = 0, longest = 0;
  for (double f : origin_tx) {
    run = f >= 0.5 ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  EXPECT_EQ(longest, 3);

  // Capabilities, stated once in the table.
  EXPECT_EQ(last.Cap("enp1s0f0np0", "stats"), "supported");
  EXPECT_EQ(last.Cap("enp1s0f0np0", "pfc_priorities"), "3");
  EXPECT_EQ(last.Cap("enp1s0f0np0", "pfc_duration_priorities"), "3");
  EXPECT_EQ(last.Cap("enp1s0f0np0", "ecn_mark_priorities"), "3");
  EXPECT_EQ(last.Cap("enp1s0f0np0", "global_pause"), "false");
  EXPECT_EQ(last.Cap("enp1s0f0np0", "pause_storm_events"), "true");
  EXPECT_EQ(last.Cap("enp1s0f0np0", "link_down_events"), "true");
  EXPECT_EQ(last.Cap("enp1s0f0np0", "rx_discards_phy"), "true");
  EXPECT_EQ(last.Cap("enp1s0f0np0", "pause_config"), "unknown");  // a dump has no configuration
}

// A counter that goes backwards (driver reload) gives no interval; a fraction over 1 (device
// counter read a little after the wall clock) is capped.
TEST(EthtoolPauseTest, ResetsAndJitter) {
  auto table = std::make_shared<SeriesTable>();
  for (const char* n : {"rx_prio3_pause_duration", "tx_prio3_pause_duration",
                        "rx_global_pause_duration", "rx_global_pause"}) {
    table->defs.push_back(EthtoolSeriesDef("eth0", n));
  }
  CollectorSnapshot a, b;
  a.table = b.table = table;
  a.timestamp = kT0;
  b.timestamp = kT0 + absl::Seconds(2);
  a.values = {{5'000'000, ValueStatus::kOk},
              {100, ValueStatus::kOk},
              {0, ValueStatus::kOk},
              {0, ValueStatus::kOk}};
  b.values = {{1'000, ValueStatus::kOk},
              {2'100'100, ValueStatus::kOk},
              {500'000, ValueStatus::kOk},
              {4, ValueStatus::kOk}};
  std::vector<PauseInterval> iv = PauseDurationPerInterval(a, b);
  ASSERT_EQ(iv.size(), 2u);
  EXPECT_EQ(iv[0].direction, PauseDirection::kRx);  // global, rx
  EXPECT_EQ(iv[0].priority, -1);
  EXPECT_EQ(iv[0].paused_us, 500'000u);
  EXPECT_DOUBLE_EQ(iv[0].paused_fraction, 0.25);
  EXPECT_EQ(iv[0].pause_frames, 4u);
  EXPECT_EQ(iv[1].direction, PauseDirection::kTx);
  EXPECT_EQ(iv[1].priority, 3);
  EXPECT_EQ(iv[1].paused_us, 2'100'000u);
  EXPECT_DOUBLE_EQ(iv[1].paused_fraction, 1.0);
  EXPECT_FALSE(iv[1].pause_frames.has_value());  // no tx_prio3_pause in this table
  // Same timestamp or reversed: nothing.
  EXPECT_TRUE(PauseDurationPerInterval(b, a).empty());
  // A value that is not good in one sample gives no interval.
  b.values[1].status = ValueStatus::kUnavailable;
  EXPECT_EQ(PauseDurationPerInterval(a, b).size(), 1u);
}

// PFC enabled on priority 4 between two dumps: the new names come with their values, so nothing
// is skipped; the table grows.
TEST_F(EthtoolDumpTest, NamesChangingBetweenDumps) {
  Mlx5Port before({3}), after({3, 4});
  before["rx_bytes"] = 1;
  after["rx_bytes"] = 2;
  after["rx_prio4_pause"] = 9;
  EthtoolCollector c = MakeCollector();
  WriteDump(tmp_.path(), "eth2", before.Text());
  Cycle c1 = RunCycle(c, kT0);
  WriteDump(tmp_.path(), "eth2", after.Text());
  Cycle c2 = RunCycle(c, kT0 + absl::Seconds(1));
  EXPECT_EQ(c2.errors.count, 0u) << c2.FirstError();
  EXPECT_NE(c1.snap.table, c2.snap.table);
  EXPECT_EQ(c1.values.count("eth2/rx_prio4_pause"), 0u);
  EXPECT_EQ(c2.values.at("eth2/rx_prio4_pause").raw, 9u);
  EXPECT_EQ(c2.values.at("eth2/rx_prio4_pause").status, ValueStatus::kOk);
  EXPECT_EQ(c2.values.at("eth2/rx_bytes").raw, 2u);
  EXPECT_EQ(c1.Cap("eth2", "pfc_priorities"), "3");
  EXPECT_EQ(c2.Cap("eth2", "pfc_priorities"), "3,4");
}

// A real mlx5 dump without PFC (global pause mode, no storm counters): it says so once, in its
// capabilities, and every cycle is clean.
TEST_F(EthtoolDumpTest, RealMlx5DumpWithoutPfcSaysSoOnce) {
  const std::string text = testing::ReadFileOrEmpty(
      testing::SharedDir() +
      "/fixtures/tool-outputs/ethtool/"
      "ethq_ethtool-S_mlx5_cx4lx_ubuntu18.04-k4.15_whitespace-stripped.txt");
  ASSERT_FALSE(text.empty());
  WriteDump(tmp_.path(), "enp5s0f0", text);
  EthtoolCollector c = MakeCollector();
  for (int k = 0; k < 3; ++k) {
    Cycle cy = RunCycle(c, kT0 + absl::Seconds(k));
    EXPECT_EQ(cy.errors.count, 0u) << cy.FirstError();
    EXPECT_EQ(cy.values.size(), 751u);
    EXPECT_EQ(cy.values.at("enp5s0f0/rx_bytes").raw, 2195783498134u);
    EXPECT_EQ(cy.Cap("enp5s0f0", "pfc_priorities"), "none");
    EXPECT_EQ(cy.Cap("enp5s0f0", "pfc_duration_priorities"), "none");
    EXPECT_EQ(cy.Cap("enp5s0f0", "global_pause"), "true");
    EXPECT_EQ(cy.Cap("enp5s0f0", "global_pause_duration"), "true");
    EXPECT_EQ(cy.Cap("enp5s0f0", "pause_storm_events"), "false");
    EXPECT_EQ(cy.Cap("enp5s0f0", "link_down_events"), "true");
    EXPECT_EQ(cy.Cap("enp5s0f0", "n_stats"), "751");
  }
}

// node_exporter's fixture folder (<if>/statistics): eth0's capture is clean, bond0's is only
// "ERROR: 1" (the capture failed with EPERM): an error at each cycle, and "stats=error".
TEST(EthtoolFixtureTest, NodeExporterFixtureFolder) {
  EthtoolOptions o;
  o.source = *ParseEthtoolSource("dir:" + testing::SharedDir() + "/fixtures/ethtool/node_exporter");
  EthtoolCollector c(o);
  Cycle cy = RunCycle(c, kT0);
  EXPECT_EQ(cy.errors.count, 1u);
  EXPECT_NE(cy.FirstError().find("bond0"), std::string::npos) << cy.FirstError();
  EXPECT_TRUE(cy.FirstError().rfind("PERMISSION_DENIED", 0) == 0) << cy.FirstError();
  EXPECT_EQ(cy.values.size(), 16u);
  EXPECT_EQ(cy.values.at("eth0/port.rx_dropped").raw, 12028u);
  EXPECT_EQ(cy.values.at("eth0/duplicate metric").raw, 1u);
  EXPECT_EQ(cy.values.at("eth0/duplicate_metric").raw, 2u);
  EXPECT_EQ(cy.values.at("eth0/rx_packets").status, ValueStatus::kOk);
  EXPECT_EQ(cy.defs.at("eth0/rx_packets").unit, Unit::kPackets);
  EXPECT_EQ(cy.Cap("eth0", "stats"), "supported");
  EXPECT_EQ(cy.Cap("bond0", "stats"), "error");

  o.interfaces = {"eth0"};
  EthtoolCollector only_eth0(o);
  Cycle one = RunCycle(only_eth0, kT0);
  EXPECT_EQ(one.errors.count, 0u);
  EXPECT_EQ(one.Caps("bond0"), nullptr);
}

TEST_F(EthtoolDumpTest, OddDumps) {
  // A driver that repeats a name, a dump cut off while written, a device without stats.
  WriteDump(tmp_.path(), "eth0", "NIC statistics:\n     rx_bytes: 5\n     rx_bytes: 6\n");
  WriteDump(tmp_.path(), "eth1", "NIC statistics:\n     rx_bytes: 5\n     tx_by");
  WriteDump(tmp_.path(), "lo", "no stats available\n");
  WriteDump(tmp_.path(), "dummy0", "ERROR: 95\n");  // EOPNOTSUPP: no statistics, not an error
  EthtoolCollector c = MakeCollector();
  Cycle cy = RunCycle(c, kT0);
  EXPECT_EQ(cy.errors.count, 1u);  // eth1's cut-off line
  EXPECT_NE(cy.FirstError().find("eth1"), std::string::npos) << cy.FirstError();
  EXPECT_EQ(cy.values.at("eth0/rx_bytes").raw, 5u);
  EXPECT_EQ(cy.Cap("eth0", "duplicate_names"), "1");
  EXPECT_EQ(cy.values.at("eth1/rx_bytes").raw, 5u);
  EXPECT_EQ(cy.Cap("lo", "stats"), "unsupported");
  EXPECT_EQ(cy.Cap("dummy0", "stats"), "unsupported");
  EXPECT_EQ(cy.values.size(), 2u);

  // A dump removed: gone from the table at the next cycle (one error for the cycle that lost it
  // at most).
  std::filesystem::remove(tmp_.path() + "/eth0");
  Cycle gone = RunCycle(c, kT0 + absl::Seconds(1));
  EXPECT_EQ(gone.Caps("eth0"), nullptr);
  EXPECT_EQ(gone.values.count("eth0/rx_bytes"), 0u);
}

TEST(EthtoolFixtureTest, MissingFolderIsOneErrorPerCycle) {
  EthtoolOptions o;
  o.source = *ParseEthtoolSource("dir:/nonexistent/ringside-ethtool");
  EthtoolCollector c(o);
  Cycle cy = RunCycle(c, kT0);
  EXPECT_EQ(cy.errors.count, 1u);
  EXPECT_TRUE(cy.snap.table->defs.empty());
}

// ---------------------------------------------------------------------------------------------
// ioctl source with a fake protocol: discovery from sysfs, capabilities, the count race.

class FakeEthtoolIoctl final : public EthtoolIoctl {
 public:
  struct Dev {
    Dev() = default;
    Dev(std::vector<std::string> n, std::vector<uint64_t> v)
        : names(std::move(n)), values(std::move(v)) {}
    std::vector<std::string> names;
    std::vector<uint64_t> values;
    absl::Status strings_status;
    absl::Status stats_status;
    absl::Status pause_status = absl::UnimplementedError("no pause");
    EthtoolPauseParam pause;
  };
  std::map<std::string, Dev> devs;
  // Runs at the start of every GetStats: lets a test change a set between two calls.
  std::function<void(const std::string&)> before_get_stats;
  std::map<std::string, int> string_set_calls, stats_calls;
  int force_changed = 0;  // answer this many GetStats calls with "changed"

  absl::StatusOr<std::vector<std::string>> GetStringSet(const std::string& ifname) override {
    ++string_set_calls[ifname];
    auto it = devs.find(ifname);
    if (it == devs.end()) return absl::NotFoundError(ifname);
    if (!it->second.strings_status.ok()) return it->second.strings_status;
    return it->second.names;
  }
  absl::StatusOr<EthtoolStats> GetStats(const std::string& ifname, size_t expected) override {
    ++stats_calls[ifname];
    if (before_get_stats) before_get_stats(ifname);
    auto it = devs.find(ifname);
    if (it == devs.end()) return absl::NotFoundError(ifname);
    if (!it->second.stats_status.ok()) return it->second.stats_status;
    EthtoolStats s;
    if (force_changed > 0 || expected != it->second.names.size()) {
      if (force_changed > 0) --force_changed;
      s.outcome = EthtoolStats::Outcome::kStringSetChanged;
      return s;
    }
    s.values = it->second.values;
    return s;
  }
  absl::StatusOr<EthtoolPauseParam> GetPauseParam(const std::string& ifname) override {
    auto it = devs.find(ifname);
    if (it == devs.end()) return absl::NotFoundError(ifname);
    if (!it->second.pause_status.ok()) return it->second.pause_status;
    return it->second.pause;
  }
};

class EthtoolIoctlCollectorTest : public ::testing::Test {
 protected:
  using Dev = FakeEthtoolIoctl::Dev;
  void SetUp() override {
    for (const char* itf : {"eth0", "eth1", "lo"}) AddNetdev(itf);
    Mlx5Port eth0(std::vector<int>{});  // PFC off
    fake_->devs["eth0"] = Dev(eth0.names(), eth0.values());
    fake_->devs["eth0"].pause_status = absl::OkStatus();
    fake_->devs["eth0"].pause = {false, true, true};
    fake_->devs["eth1"] = Dev({"rx_bytes", "tx_bytes", "rx_prio3_pause"}, {10, 20, 30});
    fake_->devs["lo"].strings_status = absl::UnimplementedError("no stats");
  }
  void AddNetdev(const std::string& itf) {
    std::filesystem::create_directories(absl::StrCat(tmp_.path(), "/class/net/", itf));
  }
  EthtoolCollector MakeCollector(std::vector<std::string> interfaces = {}) {
    EthtoolOptions o;
    o.sysfs_root = tmp_.path();
    o.interfaces = std::move(interfaces);
    o.rediscover_interval = absl::Seconds(30);
    auto fake = std::make_unique<FakeEthtoolIoctl>();
    fake->devs = fake_->devs;
    fake_ = fake.get();
    return EthtoolCollector(o, DefaultFileSystem(), std::move(fake));
  }
  // PFC turned on for priority 3 of eth0: mlx5 adds its five per-priority counters.
  void EnablePfc3OnEth0(FakeEthtoolIoctl* f) {
    Mlx5Port with({3});
    f->devs["eth0"].names = with.names();
    f->devs["eth0"].values = with.values();
    f->devs["eth0"].values.back() = 1234;  // tx_pause_storm_error_events
  }

  testing::TempDir tmp_;
  FakeEthtoolIoctl initial_;
  FakeEthtoolIoctl* fake_ = &initial_;
};

TEST_F(EthtoolIoctlCollectorTest, SeriesValuesAndCapabilities) {
  EthtoolCollector c = MakeCollector();
  Cycle cy = RunCycle(c, kT0);
  EXPECT_EQ(cy.errors.count, 0u) << cy.FirstError();
  EXPECT_EQ(cy.values.size(), fake_->devs["eth0"].names.size() + 3);
  EXPECT_EQ(cy.values.at("eth1/rx_prio3_pause").raw, 30u);
  EXPECT_EQ(cy.defs.at("eth1/rx_prio3_pause").priority, 3);
  EXPECT_EQ(cy.values.at("eth0/rx_bytes").status, ValueStatus::kOk);
  // eth0: no PFC (so no per-priority pause counters), but storm events and 802.3x pause config.
  EXPECT_EQ(cy.Cap("eth0", "pfc_priorities"), "none");
  EXPECT_EQ(cy.Cap("eth0", "pause_storm_events"), "true");
  EXPECT_EQ(cy.Cap("eth0", "pause_config"), "rx=on,tx=on,autoneg=off");
  // lo: no statistics at all; said once in its capabilities, no series, no error.
  EXPECT_EQ(cy.Cap("lo", "stats"), "unsupported");
  EXPECT_EQ(cy.Cap("lo", "pause_config"), "unsupported");
  EXPECT_EQ(cy.Cap("eth1", "pause_config"), "unsupported");
  for (int k = 1; k < 5; ++k) {
    Cycle again = RunCycle(c, kT0 + absl::Seconds(k));
    EXPECT_EQ(again.errors.count, 0u);
    EXPECT_EQ(again.snap.table, cy.snap.table);
  }
  EXPECT_EQ(fake_->stats_calls.count("lo"), 0u);
  EXPECT_EQ(fake_->string_set_calls["lo"], 1);
  EXPECT_EQ(fake_->stats_calls["eth0"], 5);
}

// The count race of reference §5.1: the set changes between reading the names and the stats.
// The names are read again at once, that one sample is skipped (unavailable, not an error), and
// the next cycle reads the new set.
TEST_F(EthtoolIoctlCollectorTest, CountChangeRereadsNamesAndSkipsTheSample) {
  EthtoolCollector c = MakeCollector();
  Cycle c1 = RunCycle(c, kT0);
  ASSERT_EQ(c1.errors.count, 0u);
  const size_t old_count = fake_->devs["eth0"].names.size();
  EXPECT_EQ(fake_->string_set_calls["eth0"], 1);

  FakeEthtoolIoctl* f = fake_;
  f->before_get_stats = [&](const std::string& ifname) {
    if (ifname == "eth0") EnablePfc3OnEth0(f);
  };
  Cycle c2 = RunCycle(c, kT0 + absl::Seconds(1));
  f->before_get_stats = nullptr;
  EXPECT_EQ(c2.errors.count, 0u) << c2.FirstError();
  EXPECT_EQ(f->string_set_calls["eth0"], 2);  // re-read once, right away
  EXPECT_NE(c2.snap.table, c1.snap.table);
  // The new table already has the new names; this cycle's eth0 values are skipped.
  EXPECT_EQ(c2.values.size(), old_count + 8 + 3);
  EXPECT_EQ(c2.values.at("eth0/rx_prio3_pause").status, ValueStatus::kUnavailable);
  EXPECT_EQ(c2.values.at("eth0/rx_bytes").status, ValueStatus::kUnavailable);
  EXPECT_EQ(c2.values.at("eth1/rx_bytes").status, ValueStatus::kOk);  // others unaffected
  EXPECT_EQ(c2.Cap("eth0", "pfc_priorities"), "3");

  Cycle c3 = RunCycle(c, kT0 + absl::Seconds(2));
  EXPECT_EQ(c3.errors.count, 0u);
  EXPECT_EQ(c3.snap.table, c2.snap.table);
  EXPECT_EQ(c3.values.at("eth0/rx_prio3_pause").status, ValueStatus::kOk);
  EXPECT_EQ(c3.values.at("eth0/tx_pause_storm_error_events").raw, 1234u);
  EXPECT_EQ(f->string_set_calls["eth0"], 2);
}

// A set that changes at every cycle (PFC flapping on and off): each sample is skipped, the names
// follow, and no cycle reports an error.
TEST_F(EthtoolIoctlCollectorTest, NoErrorStormWhileTheSetKeepsChanging) {
  EthtoolCollector c = MakeCollector();
  RunCycle(c, kT0);
  FakeEthtoolIoctl* f = fake_;
  const Mlx5Port off(std::vector<int>{}), on({3});
  bool pfc = false;
  f->before_get_stats = [&](const std::string& ifname) {
    if (ifname != "eth0") return;
    pfc = !pfc;
    const Mlx5Port& p = pfc ? on : off;
    f->devs["eth0"].names = p.names();
    f->devs["eth0"].values = p.values();
  };
  uint64_t errors = 0;
  for (int k = 1; k <= 10; ++k) {
    Cycle cy = RunCycle(c, kT0 + absl::Seconds(k));
    errors += cy.errors.count;
    EXPECT_EQ(cy.values.at("eth0/rx_bytes").status, ValueStatus::kUnavailable);
    EXPECT_EQ(cy.values.count("eth0/rx_prio3_pause"), pfc ? 1u : 0u);
    EXPECT_EQ(cy.values.at("eth1/rx_bytes").status, ValueStatus::kOk);
  }
  EXPECT_EQ(errors, 0u);
  EXPECT_EQ(f->string_set_calls["eth0"], 11);  // one re-read per changed cycle, no more
}

// The set changed and changed back between two calls (the kernel answered "changed", the names
// read again are the ones held): one skipped sample, the same table, no error.
TEST_F(EthtoolIoctlCollectorTest, ChangedAndChangedBack) {
  EthtoolCollector c = MakeCollector({"eth1"});
  Cycle c1 = RunCycle(c, kT0);
  EXPECT_EQ(c1.Caps("eth0"), nullptr);  // filtered out
  FakeEthtoolIoctl* f = fake_;
  f->force_changed = 1;
  Cycle c2 = RunCycle(c, kT0 + absl::Seconds(1));
  EXPECT_EQ(c2.errors.count, 0u);
  EXPECT_EQ(c2.values.at("eth1/rx_bytes").status, ValueStatus::kUnavailable);
  EXPECT_EQ(f->string_set_calls["eth1"], 2);
  EXPECT_EQ(c2.snap.table, c1.snap.table);
  Cycle c3 = RunCycle(c, kT0 + absl::Seconds(2));
  EXPECT_EQ(c3.values.at("eth1/rx_bytes").raw, 10u);
  EXPECT_EQ(c3.values.at("eth1/rx_bytes").status, ValueStatus::kOk);
}

// PFC moved from priority 3 to 4 between two cycles keeps the count: the names are caught up at
// the next rediscovery (the documented bound on a same-count change).
// PFC moves from priority 3 to 4: the count stays, so no kernel says the set changed. The new
// priority's counters start lower than the old one's in the same slots; that backwards step makes
// the collector re-read the names, skip that one sample, and file the next under rx_prio4_*.
TEST_F(EthtoolIoctlCollectorTest, SameCountRenameIsCaughtWhenACounterGoesBackwards) {
  EthtoolCollector c = MakeCollector();
  RunCycle(c, kT0);
  EnablePfc3OnEth0(fake_);
  RunCycle(c, kT0 + absl::Seconds(1));  // count changed: names re-read (PFC on 3)
  fake_->devs["eth0"].values.back() = 5000;  // tx_pause_storm_error_events climbs on prio 3
  Cycle on3 = RunCycle(c, kT0 + absl::Seconds(2));
  EXPECT_EQ(on3.values.at("eth0/tx_pause_storm_error_events").raw, 5000u);
  EXPECT_EQ(c.name_checks(), 0u);

  Mlx5Port p4({4});
  ASSERT_EQ(p4.names().size(), fake_->devs["eth0"].names.size());
  fake_->devs["eth0"].names = p4.names();
  fake_->devs["eth0"].values = p4.values();
  Cycle renamed = RunCycle(c, kT0 + absl::Seconds(3));  // long before the 30 s rediscovery
  EXPECT_EQ(c.name_checks(), 1u);
  EXPECT_EQ(renamed.errors.count, 0u) << renamed.FirstError();
  EXPECT_EQ(renamed.Cap("eth0", "pfc_priorities"), "4");
  EXPECT_EQ(renamed.values.count("eth0/rx_prio3_pause"), 0u);
  EXPECT_EQ(renamed.values.at("eth0/rx_prio4_pause").status, ValueStatus::kUnavailable);
  Cycle next = RunCycle(c, kT0 + absl::Seconds(4));
  EXPECT_EQ(next.values.at("eth0/rx_prio4_pause").status, ValueStatus::kOk);
  EXPECT_EQ(next.values.at("eth0/rx_prio4_pause").raw,
            p4.values()[std::find(p4.names().begin(), p4.names().end(), "rx_prio4_pause") -
                        p4.names().begin()]);
}

// A counter that goes backwards under the same names (a driver reset) is a value, not a rename:
// the names are checked once, the sample is kept.
TEST_F(EthtoolIoctlCollectorTest, ResetUnderTheSameNamesKeepsTheSample) {
  EthtoolCollector c = MakeCollector();
  RunCycle(c, kT0);
  for (uint64_t& v : fake_->devs["eth1"].values) v = 0;
  Cycle reset = RunCycle(c, kT0 + absl::Seconds(1));
  EXPECT_EQ(c.name_checks(), 1u);
  EXPECT_EQ(reset.values.at("eth1/rx_bytes").status, ValueStatus::kOk);
  EXPECT_EQ(reset.values.at("eth1/rx_bytes").raw, 0u);
}

// A same-count rename whose new counters are all at least the old ones does not show in the
// values: it is seen at the next rediscovery.
TEST_F(EthtoolIoctlCollectorTest, SameCountChangeWithoutABackwardsStepIsSeenAtRediscovery) {
  EthtoolCollector c = MakeCollector();
  RunCycle(c, kT0);
  EnablePfc3OnEth0(fake_);
  RunCycle(c, kT0 + absl::Seconds(1));  // count changed: names re-read (PFC on 3)
  Mlx5Port p4({4});
  fake_->devs["eth0"].names = p4.names();
  for (uint64_t& v : fake_->devs["eth0"].values) v += 1'000'000;
  Cycle stale = RunCycle(c, kT0 + absl::Seconds(2));
  EXPECT_EQ(stale.Cap("eth0", "pfc_priorities"), "3");
  Cycle fresh = RunCycle(c, kT0 + absl::Seconds(40));
  EXPECT_EQ(fresh.Cap("eth0", "pfc_priorities"), "4");
  EXPECT_EQ(fresh.values.at("eth0/rx_prio4_pause").status, ValueStatus::kOk);
  EXPECT_EQ(fresh.values.count("eth0/rx_prio3_pause"), 0u);
}

TEST_F(EthtoolIoctlCollectorTest, FailedReadMarksValuesAndCountsOnce) {
  EthtoolCollector c = MakeCollector();
  RunCycle(c, kT0);
  fake_->devs["eth1"].stats_status = absl::InternalError("SIOCETHTOOL GSTATS eth1: I/O error");
  Cycle cy = RunCycle(c, kT0 + absl::Seconds(1));
  EXPECT_EQ(cy.errors.count, 1u);  // one failed call, not one per value
  EXPECT_EQ(cy.values.at("eth1/rx_bytes").status, ValueStatus::kError);
  EXPECT_EQ(cy.values.at("eth1/rx_prio3_pause").status, ValueStatus::kError);
  EXPECT_EQ(cy.values.at("eth0/rx_bytes").status, ValueStatus::kOk);
}

TEST_F(EthtoolIoctlCollectorTest, InterfacesComeAndGo) {
  EthtoolCollector c = MakeCollector();
  Cycle c1 = RunCycle(c, kT0);
  std::filesystem::remove_all(tmp_.path() + "/class/net/eth1");
  fake_->devs.erase("eth1");
  Cycle c2 = RunCycle(c, kT0 + absl::Seconds(1));
  EXPECT_EQ(c2.errors.count, 0u) << c2.FirstError();
  EXPECT_EQ(c2.Caps("eth1"), nullptr);
  EXPECT_EQ(c2.values.count("eth1/rx_bytes"), 0u);

  AddNetdev("eth9");
  fake_->devs["eth9"] = Dev({"rx_bytes"}, {99});
  Cycle c3 = RunCycle(c, kT0 + absl::Seconds(2));
  EXPECT_EQ(c3.values.at("eth9/rx_bytes").raw, 99u);

  // The interface disappears between the listing and the read: one error, then it is gone.
  fake_->devs.erase("eth9");
  Cycle c4 = RunCycle(c, kT0 + absl::Seconds(3));
  EXPECT_EQ(c4.errors.count, 1u);
  EXPECT_EQ(c4.values.at("eth9/rx_bytes").status, ValueStatus::kError);
  std::filesystem::remove_all(tmp_.path() + "/class/net/eth9");
  Cycle c5 = RunCycle(c, kT0 + absl::Seconds(4));
  EXPECT_EQ(c5.errors.count, 0u);
  EXPECT_EQ(c5.Caps("eth9"), nullptr);
}

TEST_F(EthtoolIoctlCollectorTest, NoSysfsIsAnEmptyMachine) {
  EthtoolOptions o;
  o.sysfs_root = tmp_.path() + "/nonexistent";
  EthtoolCollector c(o, DefaultFileSystem(), std::make_unique<FakeEthtoolIoctl>());
  Cycle cy = RunCycle(c, kT0);
  EXPECT_EQ(cy.errors.count, 0u);
  EXPECT_TRUE(cy.snap.table->defs.empty());
}

}  // namespace
}  // namespace ringside::collectors
