#include "analysis/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/testing/temp_dir.h"

namespace ringside::analysis {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Fixture(const std::string& rel) {
  return ringside::testing::ReadFileOrEmpty(ringside::testing::SharedDir() +
                                            "/fixtures/tool-outputs/" + rel);
}

Topology MustParse(const std::string& rel) {
  const std::string text = Fixture(rel);
  EXPECT_FALSE(text.empty()) << rel;
  absl::StatusOr<Topology> t = Topology::Parse(text);
  EXPECT_TRUE(t.ok()) << rel << ": " << t.status();
  return t.ok() ? *std::move(t) : Topology();
}

// Every ibnetdiscover fixture parses, except the truncated one, which is rejected.
TEST(TopologyTest, EveryFixtureFile) {
  int parsed = 0;
  for (const char* folder : {"ibnetdiscover", "generated-ibsim", "ibsim-net"}) {
    const std::string dir = ringside::testing::SharedDir() + "/fixtures/tool-outputs/" + folder;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (std::string(folder) == "generated-ibsim" && name.rfind("ibnetdiscover", 0) != 0) continue;
      const std::string text = ringside::testing::ReadFileOrEmpty(entry.path().string());
      absl::StatusOr<Topology> t = Topology::Parse(text);
      if (name == "topograph_gb200_truncated-bad.txt") {
        ASSERT_FALSE(t.ok());
        EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
        EXPECT_THAT(t.status().message(), HasSubstr("line 10"));
        EXPECT_THAT(t.status().message(), HasSubstr("truncated"));
        EXPECT_THAT(t.status().message(), HasSubstr("H-b8e92403009ca838"));
        continue;
      }
      ASSERT_TRUE(t.ok()) << name << ": " << t.status();
      EXPECT_GT(t->switches(), 0u) << name;
      ++parsed;
    }
  }
  EXPECT_EQ(parsed, 10 + 3 + 3);
}

TEST(TopologyTest, DgxH100NdrFatTree) {
  Topology t = MustParse("ibnetdiscover/topograph_dgx-h100_ndr_fat-tree.txt");
  EXPECT_EQ(t.format(), Topology::Format::kIbnetdiscover);
  EXPECT_EQ(t.cas(), 582u);
  EXPECT_EQ(t.switches(), 40u);
  EXPECT_EQ(t.attachments().size(), 582u);
  // 69 CAs left at "MT4129 ConnectX7 Mellanox Technologies", 40 SHARP aggregation nodes,
  // 3 "localhost HCA-n".
  EXPECT_EQ(t.unnamed_cas(), 112u);
  EXPECT_EQ(t.hosts(), 121u);
  EXPECT_EQ(t.LeafOf("a08-p1-dgx-04-c01", "mlx5_5"), "0x2c5eab0300b87b40");
  EXPECT_EQ(t.LeafName("0x2c5eab0300b87b40"), "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1");
  EXPECT_EQ(t.LeafOf("a08-p1-dgx-04-c01.cluster.local", "mlx5_5", "1"), "0x2c5eab0300b87b40");
  EXPECT_EQ(t.LeafOf("a08-p1-dgx-04-c01", "mlx5_9"), "");
  EXPECT_EQ(t.LeafOf("no-such-host", "mlx5_5"), "");
  // Rail-optimised: each of the host's HCAs on its own leaf.
  EXPECT_THAT(t.LeavesOf("a08-p1-dgx-04-c01"),
              ElementsAre("0x2c5eab0300b87b40", "0x2c5eab0300c260c0", "0x2c5eab0300c262c0",
                          "0x2c5eab0300c26340"));
  std::vector<const HcaAttachment*> hcas = t.HcasOf("a08-p1-dgx-04-c01");
  ASSERT_EQ(hcas.size(), 4u);
  const HcaAttachment* mlx5_5 = nullptr;
  for (const HcaAttachment* h : hcas) {
    if (h->device == "mlx5_5") mlx5_5 = h;
  }
  ASSERT_NE(mlx5_5, nullptr);
  EXPECT_EQ(mlx5_5->ca_guid, "0xe09d7303007a4bd8");
  EXPECT_EQ(mlx5_5->ca_port, 1);
  EXPECT_EQ(mlx5_5->leaf.port, 1);
  EXPECT_EQ(mlx5_5->description, "a08-p1-dgx-04-c01 mlx5_5");
  std::vector<std::string> on_leaf = t.HostsOn("0x2c5eab0300b87b40");
  EXPECT_EQ(on_leaf.size(), 17u);
  EXPECT_THAT(on_leaf, Contains("a08-p1-dgx-04-c17"));
  // "HCA-6"-style names are kept as the description gives them.
  EXPECT_EQ(t.LeafOf("b08-p1-dgx-08-c18", "HCA-6"), "0x2c5eab0300c26540");
}

TEST(TopologyTest, FdrFatTreeAndItsIbsimRegenerations) {
  for (const char* rel :
       {"ibnetdiscover/loginoff_sx6036_fdr10-qdr_fat-tree_2014.txt",
        "generated-ibsim/ibnetdiscover.stdout.txt", "generated-ibsim/ibnetdiscover-f.stdout.txt",
        "generated-ibsim/ibnetdiscover-p.stdout.txt"}) {
    SCOPED_TRACE(rel);
    Topology t = MustParse(rel);
    EXPECT_EQ(t.hosts(), 144u);
    EXPECT_EQ(t.switches(), 8u);
    EXPECT_EQ(t.attachments().size(), 145u);  // tank1 has both ports cabled
    EXPECT_EQ(t.LeafName(t.LeafOf("stage114", "mlx4_0")), "MF0;ib5:SX6036/U1");
    EXPECT_EQ(t.LeafName(t.LeafOf("stage1", "mlx4_0")), "MF0;ib1:SX6036/U1");
    EXPECT_EQ(t.HcasOf("tank1").size(), 2u);
    EXPECT_EQ(t.LeafOf("tank1", "mlx4_0", "2"), t.LeafOf("tank1", "mlx4_0", "1"));
    EXPECT_EQ(t.HostsOn(t.LeafOf("stage114", "mlx4_0")).size(), 24u);
  }
  EXPECT_EQ(MustParse("generated-ibsim/ibnetdiscover-p.stdout.txt").format(),
            Topology::Format::kIbnetdiscoverPorts);
}

TEST(TopologyTest, OldAndOddVariants) {
  {  // 2007 man page: spaces, "Non-Chassis Nodes", vendor-default CA names, a dual-port CA.
    Topology t = MustParse("ibnetdiscover/jabl-ibtopotool_1_manpage-voltaire-sdr-2007.txt");
    EXPECT_EQ(t.cas(), 4u);
    EXPECT_EQ(t.unnamed_cas(), 4u);
    EXPECT_EQ(t.hosts(), 0u);
    EXPECT_EQ(t.attachments().size(), 5u);
    EXPECT_FALSE(t.warnings().empty());  // "Non-Chassis Nodes"
  }
  {  // IBM 2009: a CA cabled by its port 2.
    Topology t = MustParse("ibnetdiscover/jabl-ibtopotool_2_ibm-sdr-2009.txt");
    std::vector<const HcaAttachment*> h = t.HcasOf("compute-00-00");
    ASSERT_EQ(h.size(), 1u);
    EXPECT_EQ(h[0]->device, "HCA-1");
    EXPECT_EQ(h[0]->ca_port, 2);
    EXPECT_EQ(h[0]->leaf.port, 2);
    EXPECT_EQ(h[0]->leaf.id, "0x000b8cffff0053ee");
    EXPECT_EQ(h[0]->leaf.name, "MT43132 Mellanox Technologies");
  }
  {  // NVIDIA KB 2016: a stderr line first, single spaces, loopback cables on a switch.
    Topology t = MustParse("ibnetdiscover/jabl-ibtopotool_3_nvidia-kb-edr-fdr-2016.txt");
    ASSERT_EQ(t.warnings().size(), 1u);
    EXPECT_THAT(t.warnings()[0], HasSubstr("line 1"));
    EXPECT_EQ(t.LeafName(t.LeafOf("r-ufm111", "HCA-1")), "SwitchIB Mellanox Technologies");
    EXPECT_EQ(t.LeafName(t.LeafOf("r-ufm101", "HCA-2")), "MF0;switch-de779e:SX6012/U1");
    EXPECT_EQ(t.LeavesOf("r-ufm101").size(), 1u);
    EXPECT_EQ(t.hosts(), 5u);
  }
  {  // Oracle: no blank line after the header, a line holding one space.
    Topology t = MustParse("ibnetdiscover/jabl-ibtopotool_4_oracle-sun-dcs36-qdr.txt");
    std::vector<const HcaAttachment*> h = t.HcasOf("nsn33-43");
    ASSERT_EQ(h.size(), 1u);
    EXPECT_EQ(h[0]->leaf.port, 23);
    EXPECT_EQ(h[0]->leaf.name, "Sun DCS 36 QDR switch localhost");
  }
  {  // -f style with 2-3 blank lines between records.
    Topology t = MustParse("ibnetdiscover/superbench_FAKED_hdr_mcs8500_ibnetdiscover-f-style.txt");
    EXPECT_EQ(t.cas(), 10u);
    EXPECT_EQ(t.LeafName(t.LeafOf("RMD701091901003", "ibp11s0f0")),
              "MF0;rmd70-0101-0919-01ib0:MQM8700/U1");
  }
  {  // ibnetdiscover -p (treydock): unconnected ports, quoted names with spaces.
    Topology t = MustParse("ibnetdiscover/treydock_ibnetdiscover-p_test.txt");
    EXPECT_EQ(t.format(), Topology::Format::kIbnetdiscoverPorts);
    EXPECT_EQ(t.LeafOf("o0001", "HCA-1"), "0x7cfe9003009ce5b0");
    EXPECT_EQ(t.LeafName("0x7cfe9003009ce5b0"), "ib-i1l1s01");
    EXPECT_EQ(t.HcasOf("o0001")[0]->leaf.port, 10);
    EXPECT_EQ(t.LeafName(t.LeafOf("p0001", "HCA-1")), "ib-i4l1s01");
    EXPECT_EQ(t.hosts(), 3u);
  }
  {
    Topology t = MustParse("ibnetdiscover/treydock_ibnetdiscover-p_test2.txt");
    EXPECT_EQ(t.LeafName(t.LeafOf("worker20", "mlx5_3")), "5FB0405-leaf-IB01");
    EXPECT_EQ(t.HcasOf("worker20")[0]->leaf.port, 79);
    EXPECT_EQ(t.hosts(), 1u);  // the SHARP aggregation node has no host
  }
  {  // One unconnected switch port, its name unquoted: a fabric with no hosts.
    Topology t = MustParse("ibnetdiscover/treydock_ibnetdiscover-p_test3.txt");
    EXPECT_EQ(t.hosts(), 0u);
    EXPECT_EQ(t.switches(), 1u);
  }
  {  // ibsim's hand-written net file: "Hca" records named by their id.
    Topology t = MustParse("ibsim-net/ibsim_net.2sw2path4hca2port.txt");
    EXPECT_EQ(t.LeafOf("Hca1", "", ""), "");
    EXPECT_THAT(t.LeavesOf("Hca1"), ElementsAre("Switch1"));
    EXPECT_EQ(t.HcasOf("Hca2").size(), 2u);
  }
}

TEST(TopologyTest, NodeSwitchMap) {
  absl::StatusOr<Topology> t = Topology::Parse(
      "# node  switch\n"
      "node-17   leaf-3   # rack 4\n"
      "\n"
      "node-18\tleaf-3\n"
      "node-19 leaf-4\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->format(), Topology::Format::kNodeSwitchMap);
  EXPECT_EQ(t->LeafOf("node-17", "mlx5_3"), "leaf-3");  // any device of the node
  EXPECT_EQ(t->LeafOf("node-17.example.com", ""), "leaf-3");
  EXPECT_THAT(t->HostsOn("leaf-3"), ElementsAre("node-17", "node-18"));
  EXPECT_THAT(t->LeavesOf("node-19"), ElementsAre("leaf-4"));
}

TEST(TopologyTest, Rejections) {
  absl::StatusOr<Topology> three = Topology::Parse("node-1 leaf-1\nnode-2 leaf-1 extra\n");
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(three.status().message(), HasSubstr("line 2"));

  EXPECT_EQ(Topology::Parse("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Topology::Parse("# only a comment\n\n").status().code(),
            absl::StatusCode::kInvalidArgument);

  // A record cut in the middle of a port line.
  absl::StatusOr<Topology> cut = Topology::Parse(
      "vendid=0x2c9\ndevid=0xc738\nswitchguid=0xf4521403001165a0(f4521403001165a0)\n"
      "Switch\t36 \"S-f4521403001165a0\"\t\t# \"MF0;ib5:SX6036/U1\" enhanced port 0 lid 128\n"
      "[1]\t\"H-24be05ffff980030\"[1](24be05");
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(cut.status().message(), HasSubstr("line 5"));

  // Only the attributes of a record: the node line never came.
  absl::StatusOr<Topology> attrs = Topology::Parse("#\nvendid=0x2c9\ndevid=0x1021\n");
  ASSERT_FALSE(attrs.ok());
  EXPECT_EQ(attrs.status().code(), absl::StatusCode::kDataLoss);

  // A ports-format line cut short.
  absl::StatusOr<Topology> ports = Topology::Parse(
      "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - "
      "'ib-i1l1s01' )\nCA   133  1 0x7cfe9003003b4b96 4x EDR - SW  1719\n");
  ASSERT_FALSE(ports.ok());
  EXPECT_EQ(ports.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ports.status().message(), HasSubstr("line 2"));
}

TEST(TopologyTest, NodeDescriptions) {
  EXPECT_EQ(SplitNodeDescription("a08-p1-dgx-04-c01 mlx5_5").host, "a08-p1-dgx-04-c01");
  EXPECT_EQ(SplitNodeDescription("a08-p1-dgx-04-c01 mlx5_5").device, "mlx5_5");
  EXPECT_EQ(SplitNodeDescription("stage114 mlx4_0").host, "stage114");
  EXPECT_EQ(SplitNodeDescription("MT4129 ConnectX7   Mellanox Technologies").host, "");
  EXPECT_EQ(SplitNodeDescription("Mellanox Technologies Aggregation Node").host, "");
  EXPECT_EQ(SplitNodeDescription("localhost HCA-6").host, "");
  EXPECT_EQ(SplitNodeDescription(" node17 ").host, "node17");
  EXPECT_EQ(SplitNodeDescription(" node17 ").device, "");
}

}  // namespace
}  // namespace ringside::analysis
