// `ringside topology` and the PEER column of `ringside links` against a real ringside-aggregator
// (issue #16 items 3-4): started with a real ibnetdiscover output as --topology, fed by a raw agent
// whose LLDP neighbour disagrees with the file and then moves to another switch.
//  - `--format=ibnetdiscover` parses back to the graph the file describes;
//  - the table and -o json show the ports, the switches and the disagreement (exit 1);
//  - `ringside links` shows the port's switch end from the file (which wins);
//  - the move is a topology event in `--events` and -o json.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "analysis/topology.h"
#include "tests/aggregator/ingest/ingest_test_util.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

using testing::RunResult;

constexpr char kHost[] = "a08-p1-dgx-04-c17";  // mlx5_5 is its port on an IB leaf in the file

std::string Fixture() {
  return testing::SharedDir() + "/fixtures/tool-outputs/ibnetdiscover/topograph_dgx-h100_ndr_fat-tree.txt";
}

// The attachments in a stable order, each switch named as the topology's switch list names it.
std::vector<analysis::HcaAttachment> Sorted(const analysis::Topology& t) {
  std::vector<analysis::HcaAttachment> v = t.attachments();
  for (analysis::HcaAttachment& h : v) h.leaf.name = t.LeafName(h.leaf.id);
  std::sort(v.begin(), v.end(), [](const analysis::HcaAttachment& a, const analysis::HcaAttachment& b) {
    return std::tie(a.ca_guid, a.ca_port) < std::tie(b.ca_guid, b.ca_port);
  });
  return v;
}

// The agent's info (session-scoped: no seq): eth0 is the RoCE netdev of mlx5_5 port 1, its LLDP
// neighbour `leaf` `port`.
v1::AgentMessage Info(const std::string& leaf, const std::string& port) {
  v1::AgentMessage m;
  v1::SeriesDefs* d = m.mutable_series_defs();
  d->set_has_info(true);
  v1::InfoRecord* nd = d->add_info();
  nd->set_source("netdev");
  nd->set_device("eth0");
  (*nd->mutable_labels())["rdma_device"] = "mlx5_5";
  (*nd->mutable_labels())["rdma_port"] = "1";
  v1::InfoRecord* l = d->add_info();
  l->set_source("lldp");
  l->set_device("eth0");
  (*l->mutable_labels())["chassis_name"] = leaf;
  (*l->mutable_labels())["port_id"] = port;
  return m;
}

class TopologyE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agg_ = std::make_unique<testing::Process>(
        std::vector<std::string>{testing::BinaryPath("daemon/ringside-aggregator"),
                                 "--listen=127.0.0.1:0", "--http-listen=",
                                 "--topology=" + Fixture()},
        tmp_.path());
    ASSERT_TRUE(agg_->WaitForStderr("ingest (gRPC) listening on", absl::Seconds(30)))
        << agg_->Stderr();
    std::smatch m;
    const std::string err = agg_->Stderr();
    ASSERT_TRUE(std::regex_search(
        err, m, std::regex("ingest \\(gRPC\\) listening on \\S+ \\(port ([0-9]+)\\)")));
    port_ = std::stoi(m[1].str());
  }
  RunResult Cli(std::vector<std::string> args) {
    std::vector<std::string> argv = {testing::BinaryPath("daemon/ringside")};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(absl::StrCat("--aggregator=127.0.0.1:", port_));
    return testing::Run(argv, "", absl::Seconds(30));
  }

  testing::TempDir tmp_;
  std::unique_ptr<testing::Process> agg_;
  int port_ = 0;
};

TEST_F(TopologyE2eTest, FileDiscoveryDisagreementsPeersAndEvents) {
  absl::StatusOr<analysis::Topology> file =
      analysis::Topology::Parse(testing::ReadFileOrEmpty(Fixture()));
  ASSERT_TRUE(file.ok()) << file.status();

  // The file alone: the InfiniBand graph comes back as ibnetdiscover text that parses to it.
  RunResult r = Cli({"topology", "--format=ibnetdiscover"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<analysis::Topology> back = analysis::Topology::Parse(r.out);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << r.out.substr(0, 1000);
  EXPECT_EQ(Sorted(*back), Sorted(*file));
  EXPECT_EQ(back->hosts(), file->hosts());
  EXPECT_EQ(back->leaves(), file->leaves());
  // The whole graph: the switch-to-switch cables and the switches' port counts too.
  EXPECT_FALSE(file->switch_links().empty());
  EXPECT_EQ(back->switch_links(), file->switch_links());
  EXPECT_EQ(back->switch_ports(), file->switch_ports());

  r = Cli({"topology"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, absl::StrCat("Topology: file; ", file->attachments().size(),
                                                   " ports on ")))
      << r.out.substr(0, 300);

  // An agent on kHost: its RoCE port's LLDP neighbour is not the leaf the file names.
  testing::RawAgent agent(port_);
  ASSERT_TRUE(agent.Send(testing::HelloMsg(kHost, 1)));
  ASSERT_TRUE(agent.Send(Info("roce-leaf-1", "Ethernet3")));
  v1::AgentMessage up;
  up.set_seq(1);
  v1::LinkEvent* e = up.mutable_link_events()->add_events();
  e->set_time_unix_nanos(absl::ToUnixNanos(absl::Now()));
  e->set_source("verbs");
  e->set_device("mlx5_5");
  e->set_port("1");
  e->set_from(v1::LINK_STATE_DOWN);
  e->set_to(v1::LINK_STATE_UP);
  ASSERT_TRUE(agent.Send(up)) << agg_->Stderr();
  ASSERT_TRUE(agent.WaitAck(1));
  ASSERT_TRUE(agg_->WaitForStderr("topology: the --topology file disagrees with lldp",
                                  absl::Seconds(20)))
      << agg_->Stderr();

  r = Cli({"topology", "-o", "json", "--node", kHost});
  ASSERT_EQ(r.exit_code, 1) << r.err;  // a disagreement
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["source"], "file");
  EXPECT_EQ(j["discovery"], "lldp");
  EXPECT_EQ(j["ports"].size(), file->HcasOf(kHost).size()) << r.out;
  ASSERT_EQ(j["disagreements"].size(), 1u) << r.out;
  const nlohmann::json& d = j["disagreements"][0];
  EXPECT_EQ(d["kind"], "other_switch");
  EXPECT_EQ(d["device"], "mlx5_5");
  EXPECT_EQ(d["discovered"]["name"], "roce-leaf-1");
  EXPECT_EQ(d["discovered"]["port_name"], "Ethernet3");
  const std::string file_leaf = d["file"]["name"].get<std::string>();
  EXPECT_TRUE(absl::StrContains(file_leaf, "IBLEAF")) << file_leaf;

  r = Cli({"topology", "--node", kHost});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "Where the --topology file disagrees with lldp:")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "mlx5_5/1  other_switch")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "roce-leaf-1 Ethernet3")) << r.out;

  // The link's switch end: the file's (it wins), with its switch port.
  r = Cli({"links", "--node", kHost, "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u) << r.out;
  EXPECT_EQ(j[0]["peer_switch"], file_leaf);
  EXPECT_FALSE(j[0]["peer_switch_port"].is_null()) << r.out;
  r = Cli({"links", "--node", kHost});
  EXPECT_TRUE(absl::StrContains(r.out, "PEER")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, file_leaf + " port ")) << r.out;

  // Recabled to another switch: an event.
  r = Cli({"topology", "--events"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "No topology events.\n");
  ASSERT_TRUE(agent.Send(Info("roce-leaf-2", "Ethernet9")));
  ASSERT_TRUE(agg_->WaitForStderr("topology change (lldp", absl::Seconds(20))) << agg_->Stderr();
  r = Cli({"topology", "--events"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_TRUE(absl::StartsWith(lines[0], "TIME")) << r.out;
  EXPECT_TRUE(absl::StrContains(lines[1], "moved")) << r.out;
  EXPECT_TRUE(absl::StrContains(lines[1], "roce-leaf-1 Ethernet3")) << r.out;
  EXPECT_TRUE(absl::StrContains(lines[1], "roce-leaf-2 Ethernet9")) << r.out;
  r = Cli({"topology", "--events", "-o", "json"});
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["events"].size(), 1u) << r.out;
  EXPECT_EQ(j["events"][0]["kind"], "moved");
  EXPECT_EQ(j["events"][0]["host"], kHost);
  EXPECT_EQ(j["events"][0]["reporter"], kHost);
  EXPECT_EQ(j["events"][0]["after"]["name"], "roce-leaf-2");
  EXPECT_TRUE(j["events"][0]["time"].is_string());
  EXPECT_EQ(j["events_total"], 1);
  EXPECT_TRUE(j["ports"].empty());  // --events leaves them out

  // Usage errors.
  r = Cli({"topology", "--format=dot"});
  EXPECT_EQ(r.exit_code, 2);
  r = Cli({"topology", "--max-events=3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(agent.Finish().ok());
}

}  // namespace
}  // namespace ringside::daemon
