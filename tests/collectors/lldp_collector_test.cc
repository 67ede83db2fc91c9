// The LLDP collector over a scripted neighbour source: records, change detection and logs, and an
// lldpd that goes away and comes back. (The real lldpd path: tests/integration/lldp_netns_test.cc.)
#include "collectors/lldp/lldp_collector.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ringside::collectors {
namespace {

LldpNeighbor Peer(std::string netdev, std::string sw, std::string port) {
  LldpNeighbor n;
  n.netdev = std::move(netdev);
  n.protocol = "LLDP";
  n.chassis_id_subtype = "mac";
  n.chassis_id = sw == "leaf-1" ? "0c:00:00:00:00:01" : "0c:00:00:00:00:02";
  n.chassis_name = std::move(sw);
  n.port_id_subtype = "ifname";
  n.port_id = port;
  n.port_descr = port;
  n.mgmt_addr = "10.0.0.1";
  return n;
}

struct Harness {
  absl::StatusOr<std::vector<LldpNeighbor>> next = std::vector<LldpNeighbor>{};
  std::vector<std::string> logs;
  std::unique_ptr<LldpCollector> collector;
  absl::Time now = absl::FromUnixSeconds(1000);

  Harness() {
    LldpOptions o;
    o.refresh_interval = absl::Seconds(5);
    o.read = [this] { return next; };
    o.log = [this](const std::string& m) { logs.push_back(m); };
    collector = std::make_unique<LldpCollector>(o);
  }
  CollectorSnapshot Cycle(absl::Duration step = absl::Seconds(5)) {
    now += step;
    CollectorSnapshot out;
    CycleErrors errors;
    collector->Collect(now, out, errors);
    EXPECT_EQ(errors.count, 0u);
    return out;
  }
};

uint64_t ValueOf(const CollectorSnapshot& s, const std::string& dev, const std::string& counter) {
  for (size_t i = 0; i < s.table->defs.size(); ++i) {
    if (s.table->defs[i].device == dev && s.table->defs[i].counter == counter) {
      return s.values[i].raw;
    }
  }
  ADD_FAILURE() << "no " << dev << "/" << counter;
  return ~uint64_t{0};
}

TEST(LldpCollectorTest, RecordPerNetdevWithNeighbourLabels) {
  Harness h;
  LldpNeighbor n = Peer("eth0", "leaf-1", "Ethernet1");
  n.pvid = 100;
  n.vlans = "100:roce";
  h.next = std::vector<LldpNeighbor>{n, Peer("eth1", "leaf-2", "Ethernet7")};
  CollectorSnapshot s = h.Cycle();
  ASSERT_EQ(s.table->info.size(), 2u);
  const InfoRecord& r = s.table->info[0];
  EXPECT_EQ(r.source, "lldp");
  EXPECT_EQ(r.device, "eth0");
  EXPECT_EQ(r.labels.at("chassis_name"), "leaf-1");
  EXPECT_EQ(r.labels.at("chassis_id"), "0c:00:00:00:00:01");
  EXPECT_EQ(r.labels.at("port_id"), "Ethernet1");
  EXPECT_EQ(r.labels.at("port_descr"), "Ethernet1");
  EXPECT_EQ(r.labels.at("mgmt_addr"), "10.0.0.1");
  EXPECT_EQ(r.labels.at("pvid"), "100");
  EXPECT_EQ(r.labels.at("vlans"), "100:roce");
  EXPECT_EQ(s.table->info[1].labels.at("chassis_name"), "leaf-2");
  EXPECT_EQ(s.table->info[1].labels.count("pvid"), 0u);
  EXPECT_EQ(ValueOf(s, "eth0", "neighbors"), 1u);
  EXPECT_EQ(ValueOf(s, "eth0", "neighbor_changes"), 0u);
  EXPECT_TRUE(h.collector->Availability().ok());
  ASSERT_EQ(h.logs.size(), 2u);
  EXPECT_NE(h.logs[0].find("eth0 neighbour leaf-1 port Ethernet1"), std::string::npos) << h.logs[0];
}

TEST(LldpCollectorTest, AsksLldpdOnlyEveryRefreshInterval) {
  Harness h;
  h.next = std::vector<LldpNeighbor>{Peer("eth0", "leaf-1", "Ethernet1")};
  CollectorSnapshot a = h.Cycle();
  h.next = std::vector<LldpNeighbor>{Peer("eth0", "leaf-2", "Ethernet3")};
  CollectorSnapshot b = h.Cycle(absl::Seconds(1));  // too early: not asked
  EXPECT_EQ(b.table, a.table);
  CollectorSnapshot c = h.Cycle(absl::Seconds(4));
  EXPECT_EQ(c.table->info[0].labels.at("chassis_name"), "leaf-2");
}

TEST(LldpCollectorTest, RecablingIsLoggedCountedAndReplacesTheRecord) {
  Harness h;
  h.next = std::vector<LldpNeighbor>{Peer("eth0", "leaf-1", "Ethernet1")};
  CollectorSnapshot a = h.Cycle();
  CollectorSnapshot same = h.Cycle();
  EXPECT_EQ(same.table, a.table) << "an unchanged neighbour republishes nothing";
  h.next = std::vector<LldpNeighbor>{Peer("eth0", "leaf-2", "Ethernet3")};
  CollectorSnapshot b = h.Cycle();
  ASSERT_EQ(b.table->info.size(), 1u);
  EXPECT_EQ(b.table->info[0].labels.at("chassis_name"), "leaf-2");
  EXPECT_EQ(b.table->info[0].labels.at("port_id"), "Ethernet3");
  EXPECT_EQ(ValueOf(b, "eth0", "neighbor_changes"), 1u);
  ASSERT_FALSE(h.logs.empty());
  EXPECT_NE(h.logs.back().find("eth0 neighbour changed from leaf-1 port Ethernet1"),
            std::string::npos)
      << h.logs.back();
  EXPECT_NE(h.logs.back().find("to leaf-2 port Ethernet3"), std::string::npos) << h.logs.back();

  // Unplugged: the record goes, the series stays at 0 neighbours, one more change.
  h.next = std::vector<LldpNeighbor>{};
  CollectorSnapshot c = h.Cycle();
  EXPECT_TRUE(c.table->info.empty());
  EXPECT_EQ(ValueOf(c, "eth0", "neighbors"), 0u);
  EXPECT_EQ(ValueOf(c, "eth0", "neighbor_changes"), 2u);
  EXPECT_NE(h.logs.back().find("eth0 lost its neighbour leaf-2"), std::string::npos);
}

TEST(LldpCollectorTest, LldpdAbsentIsSaidOnceAndRetried) {
  Harness h;
  h.next = absl::NotFoundError("no lldpd socket at /run/lldpd.socket");
  CollectorSnapshot a = h.Cycle();
  EXPECT_TRUE(a.table->info.empty());
  EXPECT_EQ(h.collector->Availability().code(), absl::StatusCode::kNotFound);
  h.Cycle();
  h.Cycle();
  ASSERT_EQ(h.logs.size(), 1u) << "one line, not one per retry";
  EXPECT_NE(h.logs[0].find("no lldpd socket"), std::string::npos);

  h.next = std::vector<LldpNeighbor>{Peer("eth0", "leaf-1", "Ethernet1")};
  CollectorSnapshot b = h.Cycle();
  EXPECT_TRUE(h.collector->Availability().ok());
  ASSERT_EQ(b.table->info.size(), 1u);
  EXPECT_NE(h.logs[1].find("lldpd answers again"), std::string::npos);

  // lldpd restarts: records go while it is away; the same neighbour afterwards is no recabling.
  h.next = absl::UnavailableError("connect: Connection refused");
  CollectorSnapshot c = h.Cycle();
  EXPECT_TRUE(c.table->info.empty());
  h.next = std::vector<LldpNeighbor>{Peer("eth0", "leaf-1", "Ethernet1")};
  h.Cycle();
  for (const std::string& line : h.logs) {
    EXPECT_EQ(line.find("changed"), std::string::npos) << line;
  }
}

TEST(LldpClientTest, MissingSocketIsNotFound) {
  LldpClientOptions o;
  o.socket_path = "/nonexistent/ringside-test/lldpd.socket";
  absl::StatusOr<std::vector<LldpNeighbor>> r = ReadLldpNeighbors(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
}

TEST(LldpClientTest, MissingLibraryIsNotFound) {
  LldpClientOptions o;
  o.library = "liblldpctl-ringside-test-absent.so.4";
  absl::StatusOr<std::vector<LldpNeighbor>> r = ReadLldpNeighbors(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  EXPECT_NE(r.status().message().find("cannot be loaded"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace ringside::collectors
