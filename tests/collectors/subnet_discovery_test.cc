// Subnet discovery without a fabric: a modelled fabric answers directed-route SMPs with
// NodeInfo, NodeDescription and PortInfo bytes laid out by the IBA (vol. 1 §14.2.5.3 NodeInfo,
// §14.2.5.6 PortInfo), independently of libibmad; the discovery decodes them with libibmad's
// field table. Checks the walk (parallel links, a dual-cabled CA, down ports), the MAD count, the
// pacing and the time bound, the info records and their way back to a graph and a Topology, and
// the agent's collector. The same code against ibsim: tests/integration/ibsim_discovery_test.cc.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "collectors/ibmad/ib_discovery_collector.h"
#include "collectors/ibmad/subnet_discovery.h"
#include "collectors/ibmad/subnet_graph.h"
#include "collectors/ibmad/subnet_topology.h"

namespace ringside::collectors {
namespace {

void PutBig(MadData& d, size_t byte, int bytes, uint64_t v) {
  for (int i = bytes - 1; i >= 0; --i) {
    d[byte + static_cast<size_t>(i)] = static_cast<uint8_t>(v & 0xff);
    v >>= 8;
  }
}

struct FakeNode {
  uint8_t type = 2;  // 1 CA, 2 switch
  uint8_t nports = 0;
  uint64_t guid = 0;
  std::string desc;
  uint16_t lid = 0;
  std::map<uint8_t, std::pair<int, uint8_t>> peer;  // port → (node index, its port)
};

// A fabric of FakeNodes; node 0 is where the MADs leave from (by its port `start_port`).
class FakeFabric final : public DrSmpTransport {
 public:
  std::vector<FakeNode> nodes;
  uint8_t start_port = 1;
  int calls = 0;

  int Add(uint8_t type, uint8_t nports, uint64_t guid, std::string desc, uint16_t lid) {
    nodes.push_back({type, nports, guid, std::move(desc), lid, {}});
    return static_cast<int>(nodes.size()) - 1;
  }
  void Cable(int a, uint8_t pa, int b, uint8_t pb) {
    nodes[a].peer[pa] = {b, pb};
    nodes[b].peer[pb] = {a, pa};
  }
  void Cut(int a, uint8_t pa) {
    auto [b, pb] = nodes[a].peer.at(pa);
    nodes[a].peer.erase(pa);
    nodes[b].peer.erase(pb);
  }

  absl::Status SmpGetDr(absl::Span<const uint8_t> path, uint16_t attr, uint32_t mod,
                        MadData& out) override {
    absl::MutexLock l(&mu_);
    ++calls;
    out.fill(0);
    int cur = 0;
    uint8_t entry = start_port;
    for (uint8_t hop : path) {
      auto it = nodes[cur].peer.find(hop);
      if (it == nodes[cur].peer.end()) return absl::DeadlineExceededError("no response");
      cur = it->second.first;
      entry = it->second.second;
    }
    const FakeNode& n = nodes[cur];
    switch (attr) {
      case kAttrNodeInfo:
        out[0] = 1;
        out[1] = 1;
        out[2] = n.type;
        out[3] = n.nports;
        PutBig(out, 4, 8, n.guid);          // SystemImageGUID
        PutBig(out, 12, 8, n.guid);         // NodeGUID
        PutBig(out, 20, 8, n.guid + entry * (n.type == 1 ? 1 : 0));  // PortGUID
        PutBig(out, 30, 2, 0xd2f0);         // DeviceID
        out[36] = entry;                    // LocalPortNum
        PutBig(out, 37, 3, 0x02c9);         // VendorID
        return absl::OkStatus();
      case kAttrNodeDescription:
        for (size_t i = 0; i < n.desc.size(); ++i) out[i] = static_cast<uint8_t>(n.desc[i]);
        return absl::OkStatus();
      case kAttrPortInfo: {
        if (mod > n.nports) return MadStatusToStatus(0x1c, "PortInfo");
        const bool up = n.peer.count(static_cast<uint8_t>(mod)) > 0 || mod == 0;
        // A switch's LID is port 0's; a CA's is per port (here: lid + port - 1).
        PutBig(out, 16, 2, n.type == 2 ? n.lid : n.lid + mod - 1);   // LID
        PutBig(out, 20, 4, 1u << 14);                                // CapabilityMask: ext speeds
        out[31] = 2;                                                  // LinkWidthActive: 4x
        out[32] = static_cast<uint8_t>(0x70 | (up ? 4 : 1));          // PortState
        out[33] = static_cast<uint8_t>(((up ? 5 : 2) << 4) | 0x2);    // PortPhysicalState
        out[35] = static_cast<uint8_t>(1 << 4);                       // LinkSpeedActive: SDR
        out[62] = static_cast<uint8_t>(2 << 4);  // LinkSpeedExtActive (bits 496-499): EDR
        return absl::OkStatus();
      }
      default:
        return MadStatusToStatus(0x0c, "attr");
    }
  }

 private:
  absl::Mutex mu_;
};

// Two switches joined by two cables (ports 7 and 8), two single-cabled hosts under each, and a
// host whose CA has a port on each switch; MADs leave from host "a01 mlx5_0".
struct TestFabric {
  FakeFabric f;
  int sw1, sw2, a01, a02, b01, b02, dual;
  TestFabric() {
    a01 = f.Add(1, 1, 0x100, "a01 mlx5_0", 10);
    sw1 = f.Add(2, 8, 0x200, "leafA", 1);
    sw2 = f.Add(2, 8, 0x300, "leafB", 2);
    a02 = f.Add(1, 1, 0x110, "a02 mlx5_0", 20);
    b01 = f.Add(1, 2, 0x120, "b01 mlx5_0", 30);
    b02 = f.Add(1, 2, 0x130, "b02 mlx5_0", 40);
    dual = f.Add(1, 2, 0x140, "dual mlx5_1", 50);
    f.Cable(a01, 1, sw1, 1);
    f.Cable(a02, 1, sw1, 2);
    f.Cable(b01, 1, sw2, 1);
    f.Cable(b02, 1, sw2, 2);
    f.Cable(sw1, 7, sw2, 7);
    f.Cable(sw1, 8, sw2, 8);
    f.Cable(dual, 1, sw1, 3);
    f.Cable(dual, 2, sw2, 3);
  }
};

DiscoveryOptions Unpaced() {
  DiscoveryOptions o;
  o.max_mads_per_second = 0;
  return o;
}

TEST(SubnetDiscoveryTest, WalksEveryNodePortAndLink) {
  TestFabric t;
  DiscoveryStats st;
  const SubnetGraph g = DiscoverSubnet(t.f, Unpaced(), st);
  EXPECT_TRUE(g.complete);
  EXPECT_EQ(st.errors, 0u) << (st.messages.empty() ? "" : st.messages[0]);
  EXPECT_EQ(g.start_guid, 0x100u);
  ASSERT_EQ(g.nodes.size(), 7u);
  EXPECT_EQ(g.nodes.at(0x200).description, "leafA");
  EXPECT_EQ(g.nodes.at(0x200).lid, 1);
  EXPECT_EQ(g.nodes.at(0x300).lid, 2);
  EXPECT_EQ(g.nodes.at(0x200).ports.size(), 8u);  // every switch port read
  EXPECT_EQ(g.nodes.at(0x200).ports.at(4).state, 1);  // DOWN
  EXPECT_EQ(g.nodes.at(0x200).ports.at(7).state, 4);  // ACTIVE
  EXPECT_EQ(g.nodes.at(0x200).info.node_type, 2);
  EXPECT_EQ(g.nodes.at(0x120).info.num_ports, 2);
  EXPECT_EQ(g.nodes.at(0x120).lid, 30);
  // The CA cabled on both ports: both read, each through its own link; its LID the lowest port's.
  ASSERT_EQ(g.nodes.at(0x140).ports.size(), 2u);
  EXPECT_EQ(g.nodes.at(0x140).ports.at(2).lid, 51);
  EXPECT_EQ(g.nodes.at(0x140).lid, 50);
  const std::vector<DiscoveredLink> want = {
      {0x100, 1, 0x200, 1}, {0x110, 1, 0x200, 2}, {0x120, 1, 0x300, 1}, {0x130, 1, 0x300, 2},
      {0x140, 1, 0x200, 3}, {0x140, 2, 0x300, 3}, {0x200, 7, 0x300, 7}, {0x200, 8, 0x300, 8}};
  EXPECT_EQ(g.links, want);
  const DiscoveredPort& p = g.nodes.at(0x300).ports.at(7);
  EXPECT_EQ(LinkWidthName(p.width_active), "4x");
  EXPECT_EQ(LinkSpeedName(p.speed_active, p.speed_ext_active), "EDR");
  // 2 + S·(P+2) + 2·C + 2·L − N; the dual CA's second cable is probed from the switch only
  // (a CA is never gone through: −1), and its second port's PortInfo is read then (+1).
  EXPECT_EQ(st.mads, 2u + 2 * 10 + 2 * 5 + 2 * 8 - 7 - 1 + 1);
  EXPECT_EQ(static_cast<int>(st.mads), t.f.calls);
}

TEST(SubnetDiscoveryTest, ADownLinkIsNotInTheGraph) {
  TestFabric t;
  t.f.Cut(t.sw1, 8);
  t.f.Cut(t.sw2, 2);  // b02's only cable
  DiscoveryStats st;
  const SubnetGraph g = DiscoverSubnet(t.f, Unpaced(), st);
  EXPECT_TRUE(g.complete);
  EXPECT_EQ(st.errors, 0u);
  EXPECT_EQ(g.nodes.size(), 6u);
  EXPECT_FALSE(g.nodes.count(0x130));
  EXPECT_EQ(g.links.size(), 6u);
  EXPECT_EQ(g.nodes.at(0x200).ports.at(8).state, 1);
}

TEST(SubnetDiscoveryTest, PacedAndBoundedInTime) {
  TestFabric t;
  absl::Time now = absl::UnixEpoch();
  DiscoveryOptions o;
  o.max_mads_per_second = 100;
  o.now = [&] { return now; };
  o.sleep = [&](absl::Duration d) { now += d; };
  DiscoveryStats st;
  SubnetGraph g = DiscoverSubnet(t.f, o, st);
  EXPECT_TRUE(g.complete);
  // MADs leave 10 ms apart: the last one (st.mads - 1) × 10 ms after the first.
  EXPECT_EQ(st.duration, absl::Milliseconds(10) * static_cast<int64_t>(st.mads - 1));

  now = absl::UnixEpoch();
  o.max_duration = absl::Milliseconds(100);
  DiscoveryStats cut;
  g = DiscoverSubnet(t.f, o, cut);
  EXPECT_FALSE(g.complete);
  EXPECT_EQ(cut.mads, 10u);  // 0, 10, ... 90 ms; the 11th would be at 100 ms
  ASSERT_FALSE(cut.messages.empty());
  EXPECT_NE(cut.messages.back().find("stopped after"), std::string::npos);
}

TEST(SubnetDiscoveryTest, NoLocalPortIsAnIncompleteEmptyGraph) {
  struct Down final : DrSmpTransport {
    absl::Status SmpGetDr(absl::Span<const uint8_t>, uint16_t, uint32_t, MadData&) override {
      return absl::UnavailableError("no port");
    }
  } down;
  DiscoveryStats st;
  const SubnetGraph g = DiscoverSubnet(down, Unpaced(), st);
  EXPECT_FALSE(g.complete);
  EXPECT_TRUE(g.nodes.empty());
  EXPECT_EQ(st.mads, 1u);
}

TEST(SubnetGraphTest, InfoRecordsCarryTheGraphAndTheTopology) {
  TestFabric t;
  DiscoveryStats st;
  const SubnetGraph g = DiscoverSubnet(t.f, Unpaced(), st);
  const std::vector<InfoRecord> records = GraphInfoRecords(g);
  ASSERT_EQ(records.size(), 7u + 8u);
  const InfoRecord& sw = records[1];  // nodes by GUID: 0x100, 0x110, 0x120, ...
  EXPECT_EQ(records[0].source, "ib_node");
  EXPECT_EQ(records[0].device, "0x0000000000000100");
  EXPECT_EQ(records[0].labels.at("node_type"), "ca");
  EXPECT_EQ(records[0].labels.at("node_desc"), "a01 mlx5_0");
  EXPECT_EQ(records[0].labels.at("lid"), "10");
  EXPECT_EQ(sw.device, "0x0000000000000110");
  const InfoRecord& l = records[7 + 6];  // {0x200, 7, 0x300, 7}
  EXPECT_EQ(l.source, "ib_link");
  EXPECT_EQ(l.device, "0x0000000000000200");
  EXPECT_EQ(l.port, "7");
  EXPECT_EQ(l.labels.at("peer_guid"), "0x0000000000000300");
  EXPECT_EQ(l.labels.at("peer_port"), "7");
  EXPECT_EQ(l.labels.at("width"), "4x");
  EXPECT_EQ(l.labels.at("speed"), "EDR");

  absl::StatusOr<SubnetGraph> back = GraphFromInfoRecords(records);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->links, g.links);
  ASSERT_EQ(back->nodes.size(), g.nodes.size());
  for (const auto& [guid, n] : g.nodes) {
    const DiscoveredNode& b = back->nodes.at(guid);
    EXPECT_EQ(b.description, n.description);
    EXPECT_EQ(b.lid, n.lid);
    EXPECT_EQ(b.info.node_type, n.info.node_type);
    EXPECT_EQ(b.info.num_ports, n.info.num_ports);
  }

  absl::StatusOr<analysis::Topology> direct = TopologyFromGraph(g);
  absl::StatusOr<analysis::Topology> streamed = TopologyFromInfoRecords(records);
  ASSERT_TRUE(direct.ok()) << direct.status();
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(direct->switches(), 2u);
  EXPECT_EQ(direct->cas(), 5u);
  EXPECT_EQ(direct->attachments().size(), 6u);  // the dual CA twice
  EXPECT_EQ(direct->LeafOf("a01", "mlx5_0"), "0x0000000000000200");
  EXPECT_EQ(direct->LeafName("0x0000000000000200"), "leafA");
  EXPECT_EQ(direct->LeavesOf("dual"),
            (std::vector<std::string>{"0x0000000000000200", "0x0000000000000300"}));
  for (const char* host : {"a01", "a02", "b01", "b02", "dual"}) {
    EXPECT_EQ(streamed->LeavesOf(host), direct->LeavesOf(host)) << host;
  }

  std::vector<InfoRecord> bad = records;
  bad[0].device = "0xzz";
  EXPECT_EQ(GraphFromInfoRecords(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(IbDiscoveryCollectorTest, PublishesTheLastPassAsInfoRecords) {
  auto fabric = std::make_unique<TestFabric>();
  FakeFabric* f = &fabric->f;
  IbDiscoveryOptions o;
  o.discovery.max_mads_per_second = 0;
  o.period = absl::Hours(1);
  // The collector owns the transport; the fabric object outlives it (declared first).
  struct Borrowed final : DrSmpTransport {
    FakeFabric* f;
    explicit Borrowed(FakeFabric* f) : f(f) {}
    absl::Status SmpGetDr(absl::Span<const uint8_t> p, uint16_t a, uint32_t m,
                          MadData& out) override {
      return f->SmpGetDr(p, a, m, out);
    }
  };
  IbDiscoveryCollector c(o, std::make_unique<Borrowed>(f));
  EXPECT_TRUE(c.Availability().ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (c.passes() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(c.passes(), 1u);
  CollectorSnapshot snap;
  CycleErrors errors;
  c.Collect(absl::Now(), snap, errors);
  EXPECT_EQ(snap.collector, "ibdisc");
  ASSERT_NE(snap.table, nullptr);
  EXPECT_TRUE(snap.table->defs.empty());
  EXPECT_EQ(snap.table->info.size(), 15u);
  EXPECT_EQ(errors.count, 0u);
  EXPECT_GT(c.last_stats().mads, 0u);

  IbDiscoveryCollector off(o, nullptr, absl::UnavailableError("no umad"));
  EXPECT_FALSE(off.Availability().ok());
  off.Collect(absl::Now(), snap, errors);
  EXPECT_TRUE(snap.table->info.empty());
}

}  // namespace
}  // namespace ringside::collectors
