// issue #16 items 3-4: the --topology file merged with what the fabric tells, the disagreements
// between them, changes as events, and the ibnetdiscover text `ringside topology` prints.
#include "analysis/topology_merge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analysis/topology_events.h"
#include "analysis/topology_text.h"
#include "tests/testing/temp_dir.h"

namespace ringside::analysis {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Topology MustParse(const std::string& text) {
  absl::StatusOr<Topology> t = Topology::Parse(text);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : Topology();
}

// One switch end of an ibnetdiscover file: CA "<host> <dev>" (GUID <ca>) port 1 on switch
// <sw> port <port>.
struct Cable {
  std::string host, dev, ca, sw, sw_name;
  int port;
};

std::string Ibnetdiscover(const std::vector<Cable>& cables) {
  std::string out;
  std::vector<std::string> switches;
  for (const Cable& c : cables) {
    if (std::find(switches.begin(), switches.end(), c.sw) == switches.end()) switches.push_back(c.sw);
  }
  for (const std::string& sw : switches) {
    std::string name;
    std::string ports;
    for (const Cable& c : cables) {
      if (c.sw != sw) continue;
      name = c.sw_name;
      ports += "[" + std::to_string(c.port) + "]\t\"H-" + c.ca + "\"[1]\t\t# \"" + c.host + " " +
               c.dev + "\" lid 1 4xNDR\n";
    }
    out += "switchguid=0x" + sw + "\nSwitch\t36 \"S-" + sw + "\"\t\t# \"" + name +
           "\" enhanced port 0 lid 1 lmc 0\n" + ports + "\n";
  }
  for (const Cable& c : cables) {
    out += "caguid=0x" + c.ca + "\nCa\t1 \"H-" + c.ca + "\"\t\t# \"" + c.host + " " + c.dev +
           "\"\n[1](" + c.ca + ")\t\"S-" + c.sw + "\"[" + std::to_string(c.port) +
           "]\t\t# lid 2 lmc 0 \"" + c.sw_name + "\" lid 1 4xNDR\n\n";
  }
  return out;
}

constexpr char kSw1[] = "0000000000000a01";
constexpr char kSw2[] = "0000000000000a02";

TEST(TopologyMergeTest, FileOnlyAndDiscoveryOnlyAreThemselves) {
  Topology file = MustParse("node-a leaf-1\nnode-b leaf-1\n");
  MergedTopology m = MergeTopologies(&file, nullptr);
  EXPECT_EQ(m.topology.attachments(), file.attachments());
  EXPECT_TRUE(m.disagreements.empty());
  m = MergeTopologies(nullptr, &file);
  EXPECT_EQ(m.topology.HostsOn("leaf-1"), (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(MergeTopologies(nullptr, nullptr).topology.attachments().size(), 0u);
}

// The file wins for the hosts it names; discovery fills in the rest; each difference for a host
// both name is reported.
TEST(TopologyMergeTest, FileWinsAndDisagreementsArePortByPort) {
  Topology file = MustParse(Ibnetdiscover({
      {"node-a", "mlx5_0", "00000000000000a0", kSw1, "leaf-1", 1},
      {"node-b", "mlx5_0", "00000000000000b0", kSw1, "leaf-1", 2},
      {"node-c", "mlx5_0", "00000000000000c0", kSw1, "leaf-1", 3},
      {"node-d", "mlx5_0", "00000000000000d0", kSw1, "leaf-1", 4},
  }));
  Topology disc = MustParse(Ibnetdiscover({
      {"node-a", "mlx5_0", "00000000000000a0", kSw1, "leaf-1", 1},  // agrees
      {"node-b", "mlx5_0", "00000000000000b0", kSw2, "leaf-2", 2},  // other switch
      {"node-c", "mlx5_0", "00000000000000c0", kSw1, "leaf-1", 9},  // other switch port
      {"node-c", "mlx5_1", "00000000000000c1", kSw1, "leaf-1", 10},  // missing in the file
      {"node-e", "mlx5_0", "00000000000000e0", kSw2, "leaf-2", 5},  // the file does not name it
  }));
  // node-d: missing in discovery only when the discovery sees the whole fabric.
  MergedTopology m = MergeTopologies(&file, &disc);
  std::vector<std::string> said;
  for (const TopologyDisagreement& d : m.disagreements) said.push_back(DescribeDisagreement(d));
  EXPECT_THAT(said, ElementsAre(
                        "node-b mlx5_0/1: other_switch: file leaf-1 port 2, discovered leaf-2 port 2",
                        "node-c mlx5_0/1: other_switch_port: file leaf-1 port 3, discovered leaf-1 port 9",
                        "node-c mlx5_1/1: missing_in_file: file -, discovered leaf-1 port 10"));
  // The file's answer for the hosts it names, the discovery's for node-e.
  EXPECT_EQ(m.topology.LeafOf("node-b", "mlx5_0", "1"), "0x" + std::string(kSw1));
  EXPECT_EQ(m.topology.LeafOf("node-c", "mlx5_1", "1"), "");
  EXPECT_EQ(m.topology.LeafOf("node-e", "mlx5_0", "1"), "0x" + std::string(kSw2));
  EXPECT_EQ(m.topology.LeafName("0x" + std::string(kSw2)), "leaf-2");
  EXPECT_EQ(m.topology.hosts(), 5u);

  // Seen whole (IB subnet discovery), node-d's absence is one too; LLDP's partial view is not.
  m = MergeTopologies(&file, &disc, {.discovery_complete = true});
  ASSERT_EQ(m.disagreements.size(), 4u);
  EXPECT_EQ(m.disagreements.back().kind, DisagreementKind::kMissingInDiscovery);
  EXPECT_EQ(m.disagreements.back().host, "node-d");
  EXPECT_EQ(m.disagreements.back().file.port, 4);
}

// A hand-written `node switch` map against LLDP's ports: compared switch by switch, the switch
// matched by name; discovered hosts the map does not name keep their devices.
TEST(TopologyMergeTest, NodeSwitchMapAgainstDevicePorts) {
  Topology file = MustParse("node-a leaf-1\nnode-b leaf-1\n");
  HcaAttachment a{.host = "node-a", .device = "mlx5_0", .description = "node-a", .ca_port = 1,
                  .leaf = {.id = "leaf-1", .name = "leaf-1", .port_name = "Ethernet1"},
                  .any_device = true};
  HcaAttachment b = a;
  b.host = b.description = "node-b";
  b.leaf = {.id = "leaf-2", .name = "leaf-2", .port_name = "Ethernet2"};
  HcaAttachment c = a;
  c.host = c.description = "node-c";
  c.device = "mlx5_1";
  c.leaf = {.id = "leaf-2", .name = "leaf-2", .port_name = "Ethernet3"};
  Topology lldp =
      Topology::FromAttachments(Topology::Format::kNodeSwitchMap, {a, b, c});
  MergedTopology m = MergeTopologies(&file, &lldp);
  ASSERT_EQ(m.disagreements.size(), 1u);
  EXPECT_EQ(DescribeDisagreement(m.disagreements[0]),
            "node-b: other_switch: file leaf-1, discovered leaf-2 Ethernet2");
  EXPECT_EQ(m.topology.LeafOf("node-b", "mlx5_0"), "leaf-1");  // the file wins
  EXPECT_EQ(m.topology.LeafOf("node-b", "anything"), "leaf-1");
  EXPECT_EQ(m.topology.LeafOf("node-c", "mlx5_1"), "leaf-2");
  EXPECT_EQ(m.topology.HostsOn("leaf-2"), (std::vector<std::string>{"node-c"}));

  // A map that agrees, naming the switch by the GUID the discovery knows it by.
  Topology ib = MustParse(Ibnetdiscover({{"node-a", "mlx5_0", "00000000000000a0", kSw1, "leaf-1", 1}}));
  Topology by_guid = MustParse("node-a 0x0000000000000a01\n");
  EXPECT_TRUE(MergeTopologies(&by_guid, &ib).disagreements.empty());
  Topology by_name = MustParse("node-a leaf-1\n");
  EXPECT_TRUE(MergeTopologies(&by_name, &ib).disagreements.empty());
  Topology wrong = MustParse("node-a leaf-7\n");
  EXPECT_EQ(MergeTopologies(&wrong, &ib).disagreements.size(), 1u);
}

TEST(TopologyEventsTest, RecablingMovesAndVanishingLinksAreEvents) {
  Topology before = MustParse(Ibnetdiscover({
      {"node-a", "mlx5_0", "00000000000000a0", kSw1, "leaf-1", 1},
      {"node-b", "mlx5_0", "00000000000000b0", kSw1, "leaf-1", 2},
      {"node-c", "mlx5_0", "00000000000000c0", kSw1, "leaf-1", 3},
      {"node-d", "mlx5_0", "00000000000000d0", kSw1, "leaf-1", 4},
  }));
  EXPECT_TRUE(DiffTopologies(before, before).empty());
  Topology after = MustParse(Ibnetdiscover({
      {"node-a", "mlx5_0", "00000000000000a0", kSw1, "leaf-1", 1},
      {"node-b", "mlx5_0", "00000000000000b0", kSw2, "leaf-2", 2},  // moved to another switch
      {"node-c", "mlx5_0", "00000000000000c0", kSw1, "leaf-1", 7},  // recabled on the same one
      {"node-e", "mlx5_0", "00000000000000e0", kSw2, "leaf-2", 5},  // new; node-d gone
  }));
  std::vector<std::string> said;
  for (const TopologyEvent& e : DiffTopologies(before, after)) said.push_back(DescribeTopologyEvent(e));
  EXPECT_THAT(said, ElementsAre("node-b mlx5_0/1 moved: leaf-1 port 2 → leaf-2 port 2",
                                "node-c mlx5_0/1 port_changed: leaf-1 port 3 → leaf-1 port 7",
                                "node-d mlx5_0/1 gone: leaf-1 port 4 → -",
                                "node-e mlx5_0/1 new: - → leaf-2 port 5"));
}

TEST(TopologyEventsTest, TheLogKeepsTheLatest) {
  TopologyEventLog log(3);
  for (int i = 1; i <= 5; ++i) {
    TopologyEvent e;
    e.host = "node-" + std::to_string(i);
    log.Add(e);
  }
  EXPECT_EQ(log.total(), 5u);
  std::vector<TopologyEvent> kept = log.Recent();
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept.front().host, "node-3");
  EXPECT_EQ(kept.back().host, "node-5");
  ASSERT_EQ(log.Recent(1).size(), 1u);
  EXPECT_EQ(log.Recent(1)[0].host, "node-5");
}

// The attachments in a stable order, each switch named as the topology's switch list names it
// (ibnetdiscover -p output can describe one switch differently on different lines; the text
// written names each switch once).
std::vector<HcaAttachment> Sorted(const Topology& t) {
  std::vector<HcaAttachment> v = t.attachments();
  for (HcaAttachment& h : v) h.leaf.name = t.LeafName(h.leaf.id);
  std::sort(v.begin(), v.end(), [](const HcaAttachment& a, const HcaAttachment& b) {
    return std::tie(a.ca_guid, a.ca_port, a.description) < std::tie(b.ca_guid, b.ca_port, b.description);
  });
  return v;
}

// `ringside topology --format=ibnetdiscover` parses back to the same graph, for every
// InfiniBand fixture (real ibnetdiscover output, -p output, ibsim net files).
TEST(TopologyTextTest, IbnetdiscoverRoundTrip) {
  int checked = 0;
  int with_switch_links = 0;
  for (const char* folder : {"ibnetdiscover", "generated-ibsim", "ibsim-net"}) {
    const std::string dir = ringside::testing::SharedDir() + "/fixtures/tool-outputs/" + folder;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (std::string(folder) == "generated-ibsim" && name.rfind("ibnetdiscover", 0) != 0) continue;
      absl::StatusOr<Topology> t = Topology::Parse(ringside::testing::ReadFileOrEmpty(entry.path().string()));
      if (!t.ok() || t->attachments().empty()) continue;  // truncated; no CA cabled
      const std::string text = FormatIbnetdiscover(*t);
      absl::StatusOr<Topology> back = Topology::Parse(text);
      ASSERT_TRUE(back.ok()) << name << ": " << back.status() << "\n" << text.substr(0, 2000);
      EXPECT_EQ(back->format(), Topology::Format::kIbnetdiscover);
      EXPECT_EQ(Sorted(*back), Sorted(*t)) << name;
      EXPECT_EQ(back->hosts(), t->hosts()) << name;
      EXPECT_EQ(back->leaves(), t->leaves()) << name;
      EXPECT_EQ(back->switch_links(), t->switch_links()) << name;
      // Every switch and CA with a cable (the text has no record without port lines).
      std::map<std::string, std::string> cabled_switches;
      std::set<std::string> cabled_cas;
      for (const HcaAttachment& h : t->attachments()) {
        cabled_switches[h.leaf.id] = t->LeafName(h.leaf.id);
        cabled_cas.insert(h.ca_guid.empty() ? h.description : h.ca_guid);
      }
      for (const SwitchLink& l : t->switch_links()) {
        cabled_switches[l.a_id] = t->LeafName(l.a_id);
        cabled_switches[l.b_id] = t->LeafName(l.b_id);
      }
      EXPECT_EQ(back->switch_names(), cabled_switches) << name;
      EXPECT_EQ(back->cas(), cabled_cas.size()) << name;
      for (const auto& [id, n] : back->switch_ports()) {
        auto it = t->switch_ports().find(id);
        if (it != t->switch_ports().end()) EXPECT_EQ(n, it->second) << name << " " << id;
      }
      if (!t->switch_links().empty()) ++with_switch_links;
      // Written again, the same text.
      EXPECT_EQ(FormatIbnetdiscover(*back), text) << name;
      ++checked;
    }
  }
  EXPECT_GE(checked, 14);
  EXPECT_GE(with_switch_links, 5);
}

}  // namespace
}  // namespace ringside::analysis
