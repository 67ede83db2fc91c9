#include "analysis/correlator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/incident_store.h"
#include "analysis/pause_storm_detector.h"
#include "tests/analysis/fabric_sim.h"
#include "tests/testing/temp_dir.h"

namespace ringside::analysis {
namespace {

using testing::At;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// 16 ranks of job-1, four per node: node-a (0-3), node-b (4-7), node-c (8-11) under leaf-1,
// node-d (12-15) under leaf-2.
class CorrelatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Topology> t =
        Topology::Parse("node-a leaf-1\nnode-b leaf-1\nnode-c leaf-1\nnode-d leaf-2\n");
    ASSERT_TRUE(t.ok());
    topology_ = *std::move(t);
    ASSERT_TRUE(incidents_.Load(At(0)).ok());
    Collectives(At(0));
  }
  void Collectives(absl::Time t) {
    const char* nodes[] = {"node-a", "node-b", "node-c", "node-d"};
    for (int r = 0; r < 16; ++r) {
      CollectiveObservation o;
      o.job = "job-1";
      o.comm_id = 1;
      o.rank = r;
      o.nranks = 16;
      o.global_rank = r;
      o.function = "AllReduce";
      o.start_ns = absl::ToUnixNanos(t);
      o.stop_ns = absl::ToUnixNanos(t + absl::Milliseconds(5));
      o.host = nodes[r / 4];
      correlator_.ObserveCollective(o);
    }
  }
  Finding Straggler(const std::string& node, int rank, absl::Time at) {
    Finding f;
    f.kind = IncidentKind::kStraggler;
    f.entity = {{"job", "job-1"}, {"rank", std::to_string(rank)}, {"node", node}, {"comm", "dp"}};
    f.at = at;
    return f;
  }
  Finding Storm(const std::string& node, absl::Time at, bool active = true) {
    Finding f;
    f.kind = IncidentKind::kPauseStorm;
    f.entity = {{"node", node}, {"device", "mlx5_3"}, {"port", "1"}, {"priority", "3"}};
    f.severity = Severity::kCritical;
    f.at = at;
    f.active = active;
    return f;
  }
  const Incident* OpenOf(IncidentKind kind, const std::string& rank = "") {
    for (const Incident* inc : incidents_.Open()) {
      if (inc->kind == kind && (rank.empty() || inc->entity.at("rank") == rank)) return inc;
    }
    return nullptr;
  }

  Topology topology_;
  Correlator correlator_{&topology_};
  MemoryIncidentStore store_;
  IncidentManager incidents_{&store_};
};

TEST_F(CorrelatorTest, AStragglerOnANodeWithAPauseStormIsCausedByIt) {
  ASSERT_TRUE(incidents_.Apply({Storm("node-b", At(10)), Straggler("node-b", 5, At(12))}).ok());
  ASSERT_TRUE(correlator_.Correlate(incidents_, At(13)).ok());
  const Incident* s = OpenOf(IncidentKind::kStraggler);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->causes.size(), 1u);
  EXPECT_EQ(s->causes[0].kind, "pause_storm");
  EXPECT_EQ(s->causes[0].scope, "node");
  EXPECT_EQ(s->causes[0].incident_id, OpenOf(IncidentKind::kPauseStorm)->id);
  EXPECT_EQ(s->causes[0].summary, "pause_storm on node-b mlx5_3 prio 3");
  EXPECT_EQ(s->causes[0].entity.at("device"), "mlx5_3");
  // The storm lists the job and the ranks behind it: a switch-side cause, so the whole leaf.
  const Incident* storm = OpenOf(IncidentKind::kPauseStorm);
  ASSERT_EQ(storm->affected.size(), 1u);
  EXPECT_EQ(storm->affected[0].job, "job-1");
  EXPECT_THAT(storm->affected[0].ranks, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
  EXPECT_THAT(storm->affected[0].nodes, ElementsAre("node-a", "node-b", "node-c"));
}

TEST_F(CorrelatorTest, SameLeafSwitchSideCauseAndOtherLeafHost) {
  ASSERT_TRUE(incidents_
                  .Apply({Storm("node-b", At(10)), Straggler("node-a", 1, At(12)),
                          Straggler("node-d", 13, At(12))})
                  .ok());
  ASSERT_TRUE(correlator_.Correlate(incidents_, At(13)).ok());
  const Incident* a = OpenOf(IncidentKind::kStraggler, "1");
  ASSERT_EQ(a->causes.size(), 1u);
  EXPECT_EQ(a->causes[0].kind, "pause_storm");
  EXPECT_EQ(a->causes[0].scope, "leaf");
  const Incident* d = OpenOf(IncidentKind::kStraggler, "13");
  ASSERT_EQ(d->causes.size(), 1u);
  EXPECT_EQ(d->causes[0].kind, "host");
  EXPECT_EQ(d->causes[0].incident_id, 0u);
  EXPECT_THAT(d->causes[0].summary, HasSubstr("compute or input pipeline"));
}

// Without a topology a pause storm's victims are its inferred spread (pause_storm_detector.h):
// a straggler on a victim node is caused by the storm (scope "spread"); on a node the storm did
// not reach, by its host.
TEST(CorrelatorNoTopologyTest, AStragglerOnANodeInTheStormsSpreadIsCausedByIt) {
  Correlator c(nullptr);
  MemoryIncidentStore store;
  IncidentManager incidents(&store);
  ASSERT_TRUE(incidents.Load(At(0)).ok());
  Finding storm;
  storm.kind = IncidentKind::kPauseStorm;
  storm.entity = {{"node", "node-b"}, {"device", "mlx5_3"}, {"port", "1"}, {"priority", "3"}};
  storm.severity = Severity::kCritical;
  storm.at = At(10);
  storm.evidence["spread/node-a/mlx5_3:1"] = 0.9;
  storm.evidence["inferred_spread/node-a/mlx5_3:1"] = 10;
  Finding on_victim;
  on_victim.kind = IncidentKind::kStraggler;
  on_victim.entity = {{"job", "job-1"}, {"rank", "1"}, {"node", "node-a"}, {"comm", "dp"}};
  on_victim.at = At(12);
  Finding elsewhere = on_victim;
  elsewhere.entity["rank"] = "13";
  elsewhere.entity["node"] = "node-d";
  ASSERT_TRUE(incidents.Apply({storm, on_victim, elsewhere}).ok());
  ASSERT_TRUE(c.Correlate(incidents, At(13)).ok());
  for (const Incident* inc : incidents.Open()) {
    if (inc->kind != IncidentKind::kStraggler) continue;
    ASSERT_EQ(inc->causes.size(), 1u);
    if (inc->entity.at("rank") == "1") {
      EXPECT_EQ(inc->causes[0].kind, "pause_storm");
      EXPECT_EQ(inc->causes[0].scope, "spread");
      EXPECT_EQ(inc->causes[0].entity.at("node"), "node-b");
    } else {
      EXPECT_EQ(inc->causes[0].kind, "host");
    }
  }
}

TEST_F(CorrelatorTest, ALinkFaultOnAnotherNodeOfTheLeafIsNotACause) {
  Finding down;
  down.kind = IncidentKind::kLinkDown;
  down.entity = {{"node", "node-c"}, {"device", "mlx5_0"}, {"port", "1"}};
  down.at = At(10);
  ASSERT_TRUE(incidents_.Apply({down, Straggler("node-a", 2, At(12))}).ok());
  ASSERT_TRUE(correlator_.Correlate(incidents_, At(13)).ok());
  EXPECT_EQ(OpenOf(IncidentKind::kStraggler)->causes[0].kind, "host");
  // Its blast radius is its own node's ranks.
  EXPECT_THAT(OpenOf(IncidentKind::kLinkDown)->affected[0].ranks, ElementsAre(8, 9, 10, 11));
}

TEST_F(CorrelatorTest, OnlyIncidentsOfTheSameWindow) {
  // A storm long over before the straggler began explains nothing; one that ended a minute
  // before it did (detectors lag) still does.
  ASSERT_TRUE(incidents_.Apply({Storm("node-b", At(0)), Storm("node-b", At(1), false)}).ok());
  ASSERT_TRUE(incidents_.Apply(Straggler("node-b", 5, At(0) + absl::Hours(1))).ok());
  ASSERT_TRUE(correlator_.Correlate(incidents_, At(0) + absl::Hours(1)).ok());
  EXPECT_EQ(OpenOf(IncidentKind::kStraggler)->causes[0].kind, "host");

  Finding s = Straggler("node-c", 9, At(0) + absl::Seconds(70));
  ASSERT_TRUE(incidents_.Apply(s).ok());
  ASSERT_TRUE(correlator_.Correlate(incidents_, At(0) + absl::Hours(1)).ok());
  const Incident* c = OpenOf(IncidentKind::kStraggler, "9");
  EXPECT_EQ(c->causes[0].kind, "pause_storm");
  EXPECT_EQ(c->causes[0].scope, "leaf");
}

TEST_F(CorrelatorTest, JobSlowdownLooksAtEveryNodeOfTheJob) {
  Finding slow;
  slow.kind = IncidentKind::kJobSlowdown;
  slow.entity = {{"job", "job-1"}, {"comm", "dp"}, {"function", "AllReduce"}};
  slow.at = At(12);
  Finding flap;
  flap.kind = IncidentKind::kLinkFlapping;
  flap.entity = {{"node", "node-d"}, {"gpu", "3"}, {"link", "11"}};
  flap.at = At(10);
  ASSERT_TRUE(incidents_.Apply({flap, slow}).ok());
  ASSERT_TRUE(correlator_.Correlate(incidents_, At(13)).ok());
  const Incident* j = OpenOf(IncidentKind::kJobSlowdown);
  ASSERT_EQ(j->causes.size(), 1u);
  EXPECT_EQ(j->causes[0].summary, "link_flapping on node-d gpu 3 link 11");
}

TEST_F(CorrelatorTest, TheBlastRadiusListsThePodsOfTheRanksBehindIt) {
  // node-b's ranks (4-7) now report their Kubernetes pods; the others still do not.
  for (int r = 4; r < 8; ++r) {
    CollectiveObservation o;
    o.job = "job-1";
    o.comm_id = 1;
    o.rank = r;
    o.nranks = 16;
    o.global_rank = r;
    o.function = "AllReduce";
    o.start_ns = absl::ToUnixNanos(At(1));
    o.stop_ns = absl::ToUnixNanos(At(1) + absl::Milliseconds(5));
    o.host = "node-b";
    o.pod = "job-1-worker-" + std::to_string(r);
    o.pod_namespace = "ml-team";
    correlator_.ObserveCollective(o);
  }
  Finding down = Storm("node-b", At(10));
  down.kind = IncidentKind::kLinkDown;  // a node-local incident: only node-b's ranks
  down.entity.erase("priority");
  ASSERT_TRUE(incidents_.Apply(down).ok());
  ASSERT_TRUE(correlator_.Correlate(incidents_, At(11)).ok());
  const Incident* inc = OpenOf(IncidentKind::kLinkDown);
  ASSERT_NE(inc, nullptr);
  ASSERT_EQ(inc->affected.size(), 1u);
  EXPECT_THAT(inc->affected[0].ranks, ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(inc->affected[0].pods,
              ElementsAre("ml-team/job-1-worker-4", "ml-team/job-1-worker-5",
                          "ml-team/job-1-worker-6", "ml-team/job-1-worker-7"));
  EXPECT_NE(AffectedJson(inc->affected).find("\"pods\":[\"ml-team/job-1-worker-4\""),
            std::string::npos)
      << AffectedJson(inc->affected);
}

TEST_F(CorrelatorTest, RanksNotSeenForAWhileLeaveTheBlastRadius) {
  ASSERT_TRUE(incidents_.Apply(Storm("node-d", At(0) + absl::Minutes(20))).ok());
  ASSERT_TRUE(correlator_.Correlate(incidents_, At(0) + absl::Minutes(20)).ok());
  EXPECT_TRUE(OpenOf(IncidentKind::kPauseStorm)->affected.empty());
  Collectives(At(0) + absl::Minutes(19));
  ASSERT_TRUE(correlator_.Correlate(incidents_, At(0) + absl::Minutes(20)).ok());
  EXPECT_THAT(OpenOf(IncidentKind::kPauseStorm)->affected[0].ranks, ElementsAre(12, 13, 14, 15));
  correlator_.Expire(At(0) + absl::Hours(1));
  EXPECT_EQ(correlator_.ranks(), 0u);
}

// End to end on the real DGX H100 fabric: a pause storm detected on one HCA; a straggler on
// another host whose HCA shares that leaf is attributed to it through the leaf.
TEST(CorrelatorDgxTest, StormOnOneRailReachesTheOtherHostsOfItsLeaf) {
  absl::StatusOr<Topology> t = Topology::Parse(ringside::testing::ReadFileOrEmpty(
      ringside::testing::SharedDir() +
      "/fixtures/tool-outputs/ibnetdiscover/topograph_dgx-h100_ndr_fat-tree.txt"));
  ASSERT_TRUE(t.ok()) << t.status();
  PauseStormDetector storms({}, &*t);
  std::vector<Finding> out;
  testing::SimCounter tx{
      "a08-p1-dgx-04-c01", "ethtool", "mlx5_5", "1", "tx_prio3_pause_duration", 64, false, 0, 3};
  // (A RoCE view of the fabric: the tx duration series named by the RDMA device for brevity.)
  for (int i = 0; i < 3; ++i) storms.ObserveCounter(tx.Step(At(i), 9'500'000), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].entity.at("netdev"), "mlx5_5");
  MemoryIncidentStore store;
  IncidentManager incidents(&store);
  Correlator c(&*t);
  for (int r = 0; r < 16; ++r) {
    CollectiveObservation o;
    o.job = "llm";
    o.rank = r;
    o.nranks = 16;
    o.global_rank = r;
    o.stop_ns = absl::ToUnixNanos(At(3));
    o.host = r < 8 ? "a08-p1-dgx-04-c01" : "a08-p1-dgx-04-c02";
    c.ObserveCollective(o);
  }
  Finding s;
  s.kind = IncidentKind::kStraggler;
  s.entity = {{"job", "llm"}, {"rank", "12"}, {"node", "a08-p1-dgx-04-c02"}};
  s.at = At(4);
  out.push_back(s);
  ASSERT_TRUE(incidents.Apply(out).ok());
  ASSERT_TRUE(c.Correlate(incidents, At(5)).ok());
  for (const Incident* inc : incidents.Open()) {
    if (inc->kind == IncidentKind::kStraggler) {
      ASSERT_EQ(inc->causes.size(), 1u);
      EXPECT_EQ(inc->causes[0].kind, "pause_storm");
      EXPECT_EQ(inc->causes[0].scope, "leaf");
    } else {
      // c01's mlx5_5 is on the leaf "…IBLEAF-04-04" with 16 other hosts; c02 is one of them.
      ASSERT_EQ(inc->affected.size(), 1u);
      EXPECT_EQ(inc->affected[0].ranks.size(), 16u);
    }
  }
}

}  // namespace
}  // namespace ringside::analysis

namespace ringside::analysis {
namespace {

// A leaf (0x...0a) with node-a's and node-b's HCAs on ports 1 and 2 and an uplink on port 36 to a
// spine (0x...0s... written 0x...0f); node-c under another leaf (0x...0b). The fabric scan runs on
// node-c and reads the switches' ports: incidents on them carry node=node-c (the scanner) and the
// switch GUID as device.
constexpr char kFabric[] =
    "switchguid=0x000000000000000a(a)\n"
    "Switch 36 \"S-000000000000000a\" # \"leaf-1\" enhanced port 0 lid 10 lmc 0\n"
    "[1] \"H-00000000000000a1\"[1](a1) # \"node-a mlx5_0\" lid 1 4xNDR\n"
    "[2] \"H-00000000000000b1\"[1](b1) # \"node-b mlx5_0\" lid 2 4xNDR\n"
    "[36] \"S-000000000000000f\"[1] # \"spine-1\" lid 15 4xNDR\n"
    "\n"
    "switchguid=0x000000000000000b(b)\n"
    "Switch 36 \"S-000000000000000b\" # \"leaf-2\" enhanced port 0 lid 11 lmc 0\n"
    "[1] \"H-00000000000000c1\"[1](c1) # \"node-c mlx5_0\" lid 3 4xNDR\n"
    "[36] \"S-000000000000000f\"[2] # \"spine-1\" lid 15 4xNDR\n"
    "\n"
    "switchguid=0x000000000000000f(f)\n"
    "Switch 36 \"S-000000000000000f\" # \"spine-1\" enhanced port 0 lid 15 lmc 0\n"
    "[1] \"S-000000000000000a\"[36] # \"leaf-1\" lid 10 4xNDR\n"
    "[2] \"S-000000000000000b\"[36] # \"leaf-2\" lid 11 4xNDR\n"
    "\n"
    "caguid=0x00000000000000a1\n"
    "Ca 1 \"H-00000000000000a1\" # \"node-a mlx5_0\"\n"
    "[1](a1) \"S-000000000000000a\"[1] # lid 1 lmc 0 \"leaf-1\" lid 10 4xNDR\n"
    "\n"
    "caguid=0x00000000000000b1\n"
    "Ca 1 \"H-00000000000000b1\" # \"node-b mlx5_0\"\n"
    "[1](b1) \"S-000000000000000a\"[2] # lid 2 lmc 0 \"leaf-1\" lid 10 4xNDR\n"
    "\n"
    "caguid=0x00000000000000c1\n"
    "Ca 1 \"H-00000000000000c1\" # \"node-c mlx5_0\"\n"
    "[1](c1) \"S-000000000000000b\"[1] # lid 3 lmc 0 \"leaf-2\" lid 11 4xNDR\n";

class ScannedPortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Topology> t = Topology::Parse(kFabric);
    ASSERT_TRUE(t.ok()) << t.status();
    topology_ = *std::move(t);
    ASSERT_EQ(topology_.LeafOf("node-a", "mlx5_0"), "0x000000000000000a");
    ASSERT_TRUE(incidents_.Load(At(0)).ok());
    const char* nodes[] = {"node-a", "node-b", "node-c"};
    for (int r = 0; r < 3; ++r) {
      CollectiveObservation o;
      o.job = "job-1";
      o.comm_id = 1;
      o.rank = r;
      o.nranks = 3;
      o.global_rank = r;
      o.function = "AllReduce";
      o.start_ns = absl::ToUnixNanos(At(0));
      o.stop_ns = absl::ToUnixNanos(At(0) + absl::Milliseconds(5));
      o.host = nodes[r];
      correlator_.ObserveCollective(o);
    }
  }
  static Finding SwitchPortFlap(const std::string& guid, const std::string& port, absl::Time at) {
    Finding f;
    f.kind = IncidentKind::kLinkFlapping;
    f.entity = {{"node", "node-c"}, {"device", guid}, {"port", port}};
    f.severity = Severity::kCritical;
    f.at = at;
    return f;
  }
  static Finding Straggler(const std::string& node, int rank, absl::Time at) {
    Finding f;
    f.kind = IncidentKind::kStraggler;
    f.entity = {{"job", "job-1"}, {"rank", std::to_string(rank)}, {"node", node}};
    f.at = at;
    return f;
  }
  const Incident* Open(IncidentKind kind, const std::string& rank = "") const {
    for (const Incident* inc : incidents_.Open()) {
      if (inc->kind == kind && (rank.empty() || inc->entity.at("rank") == rank)) return inc;
    }
    return nullptr;
  }

  Topology topology_;
  Correlator correlator_{&topology_};
  MemoryIncidentStore store_;
  IncidentManager incidents_{&store_};
};

// Leaf port 2 is node-b's cable: a flap there slows node-b's rank, not node-a's (same leaf) nor
// the scanner's (node-c).
TEST_F(ScannedPortTest, ADownlinkPortIsTheCauseOnlyForTheHostCabledToIt) {
  ASSERT_TRUE(incidents_
                  .Apply({SwitchPortFlap("0x000000000000000a", "2", At(10)),
                          Straggler("node-a", 0, At(12)), Straggler("node-b", 1, At(12)),
                          Straggler("node-c", 2, At(12))})
                  .ok());
  ASSERT_TRUE(correlator_.Correlate(incidents_, At(13)).ok());
  const Incident* b = Open(IncidentKind::kStraggler, "1");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->causes.size(), 1u);
  EXPECT_EQ(b->causes[0].kind, "link_flapping");
  EXPECT_EQ(b->causes[0].scope, "node");
  for (const char* rank : {"0", "2"}) {
    const Incident* other = Open(IncidentKind::kStraggler, rank);
    ASSERT_NE(other, nullptr);
    ASSERT_EQ(other->causes.size(), 1u) << rank;
    EXPECT_EQ(other->causes[0].kind, "host") << rank;  // no fabric cause of its own
  }
  const Incident* flap = Open(IncidentKind::kLinkFlapping);
  ASSERT_EQ(flap->affected.size(), 1u);
  EXPECT_THAT(flap->affected[0].nodes, ElementsAre("node-b"));
}

// The leaf's uplink (port 36) carries every host of the leaf: node-a and node-b, not node-c.
TEST_F(ScannedPortTest, AnUplinkPortIsTheCauseForEveryHostOfItsLeaf) {
  ASSERT_TRUE(incidents_
                  .Apply({SwitchPortFlap("0x000000000000000a", "36", At(10)),
                          Straggler("node-a", 0, At(12)), Straggler("node-c", 2, At(12))})
                  .ok());
  ASSERT_TRUE(correlator_.Correlate(incidents_, At(13)).ok());
  const Incident* a = Open(IncidentKind::kStraggler, "0");
  ASSERT_EQ(a->causes.size(), 1u);
  EXPECT_EQ(a->causes[0].kind, "link_flapping");
  EXPECT_EQ(a->causes[0].scope, "leaf");
  const Incident* c = Open(IncidentKind::kStraggler, "2");
  ASSERT_EQ(c->causes.size(), 1u);
  EXPECT_EQ(c->causes[0].kind, "host");
  const Incident* flap = Open(IncidentKind::kLinkFlapping);
  ASSERT_EQ(flap->affected.size(), 1u);
  EXPECT_THAT(flap->affected[0].nodes, ElementsAre("node-a", "node-b"));
}

}  // namespace
}  // namespace ringside::analysis
