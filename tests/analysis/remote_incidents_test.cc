// Cross-shard cause attribution (issue #14): shard A hosts the nodes' counters and raises a pause
// storm; shard B hosts the job's collective records and raises the straggler. Each sees the other's
// incidents only as RemoteIncidents (what its watch of the other shard's WatchIncidents brings).
#include "analysis/remote_incidents.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/correlator.h"
#include "analysis/incident_store.h"
#include "tests/analysis/fabric_sim.h"

namespace ringside::analysis {
namespace {

using testing::At;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// node-a and node-b under leaf-1 (shard A's), node-c under leaf-2; job-1 has 12 ranks, four per node.
struct Shard {
  explicit Shard(const Topology* t) : correlator(t) {}
  Correlator correlator;
  MemoryIncidentStore store;
  IncidentManager incidents{&store};
  RemoteIncidents remote;
  std::vector<Incident> Open() const {
    std::vector<Incident> out;
    for (const Incident* i : incidents.Open()) out.push_back(*i);
    return out;
  }
};

class CrossShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Topology> t = Topology::Parse("node-a leaf-1\nnode-b leaf-1\nnode-c leaf-2\n");
    ASSERT_TRUE(t.ok());
    topology_ = *std::move(t);
    ASSERT_TRUE(a_.incidents.Load(At(0)).ok());
    ASSERT_TRUE(b_.incidents.Load(At(0)).ok());
    // Only B sees the collectives (they go to the job's shard).
    const char* nodes[] = {"node-a", "node-b", "node-c"};
    for (int r = 0; r < 12; ++r) {
      CollectiveObservation o;
      o.job = "job-1";
      o.comm_id = 1;
      o.rank = r;
      o.nranks = 12;
      o.global_rank = r;
      o.function = "AllReduce";
      o.start_ns = absl::ToUnixNanos(At(1));
      o.stop_ns = absl::ToUnixNanos(At(1) + absl::Milliseconds(5));
      o.host = nodes[r / 4];
      b_.correlator.ObserveCollective(o);
    }
  }
  static Finding Storm(const std::string& node, absl::Time at, bool active = true) {
    Finding f;
    f.kind = IncidentKind::kPauseStorm;
    f.entity = {{"node", node}, {"device", "mlx5_3"}, {"port", "1"}, {"priority", "3"}};
    f.severity = Severity::kCritical;
    f.at = at;
    f.active = active;
    return f;
  }
  static Finding Straggler(const std::string& node, int rank, absl::Time at) {
    Finding f;
    f.kind = IncidentKind::kStraggler;
    f.entity = {{"job", "job-1"}, {"rank", std::to_string(rank)}, {"node", node}, {"comm", "dp"}};
    f.at = at;
    return f;
  }
  // One round of the watches: each shard hears the other's incidents, then correlates.
  void Exchange(absl::Time now) {
    a_.remote.Replace("shard-b", b_.Open());
    b_.remote.Replace("shard-a", a_.Open());
    ASSERT_TRUE(b_.correlator.Correlate(b_.incidents, now, nullptr, &b_.remote).ok());
    a_.remote.Replace("shard-b", b_.Open());
    ASSERT_TRUE(a_.correlator.Correlate(a_.incidents, now, nullptr, &a_.remote).ok());
  }
  const Incident* OpenOf(Shard& s, IncidentKind kind) {
    for (const Incident* inc : s.incidents.Open()) {
      if (inc->kind == kind) return inc;
    }
    return nullptr;
  }

  Topology topology_;
  Shard a_{&topology_};
  Shard b_{&topology_};
};

TEST_F(CrossShardTest, AStragglerOnShardBIsCausedByAStormOnShardA) {
  ASSERT_TRUE(a_.incidents.Apply(Storm("node-b", At(10))).ok());
  ASSERT_TRUE(b_.incidents.Apply(Straggler("node-b", 5, At(12))).ok());
  // Without the remote incidents, B can only blame the host.
  ASSERT_TRUE(b_.correlator.Correlate(b_.incidents, At(13)).ok());
  ASSERT_EQ(OpenOf(b_, IncidentKind::kStraggler)->causes.at(0).kind, "host");

  Exchange(At(13));
  const Incident* straggler = OpenOf(b_, IncidentKind::kStraggler);
  const Incident* storm = OpenOf(a_, IncidentKind::kPauseStorm);
  ASSERT_THAT(straggler->causes, SizeIs(1));
  const CauseLink& c = straggler->causes[0];
  EXPECT_EQ(c.kind, "pause_storm");
  EXPECT_EQ(c.scope, "node");
  EXPECT_EQ(c.shard, "shard-a");
  EXPECT_EQ(c.incident_id, 0u) << "another shard's id means nothing here";
  EXPECT_EQ(c.key, StableIncidentKey(*storm));
  EXPECT_EQ(c.entity.at("node"), "node-b");

  // And A's storm lists the job B runs, though A never saw a collective record.
  ASSERT_THAT(storm->affected, SizeIs(1));
  EXPECT_EQ(storm->affected[0].job, "job-1");
  EXPECT_THAT(storm->affected[0].ranks, ElementsAre(5));
  EXPECT_THAT(storm->affected[0].nodes, ElementsAre("node-b"));
}

TEST_F(CrossShardTest, ALeafWideRemoteStormExplainsAStragglerOnAnotherNodeOfItsLeaf) {
  ASSERT_TRUE(a_.incidents.Apply(Storm("node-a", At(10))).ok());
  ASSERT_TRUE(b_.incidents.Apply(Straggler("node-b", 6, At(12))).ok());
  Exchange(At(13));
  const Incident* straggler = OpenOf(b_, IncidentKind::kStraggler);
  ASSERT_THAT(straggler->causes, SizeIs(1));
  EXPECT_EQ(straggler->causes[0].scope, "leaf");
  EXPECT_EQ(straggler->causes[0].shard, "shard-a");
}

TEST_F(CrossShardTest, ALocalCauseCarriesItsKeyAndNoShard) {
  ASSERT_TRUE(b_.incidents.Apply({Storm("node-c", At(10)), Straggler("node-c", 9, At(12))}).ok());
  Exchange(At(13));
  const Incident* straggler = OpenOf(b_, IncidentKind::kStraggler);
  ASSERT_THAT(straggler->causes, SizeIs(1));
  EXPECT_NE(straggler->causes[0].incident_id, 0u);
  EXPECT_EQ(straggler->causes[0].shard, "");
  EXPECT_EQ(straggler->causes[0].key, StableIncidentKey(*OpenOf(b_, IncidentKind::kPauseStorm)));
}

TEST_F(CrossShardTest, AStormOnAnotherLeafIsNoCause) {
  ASSERT_TRUE(a_.incidents.Apply(Storm("node-c", At(10))).ok());
  ASSERT_TRUE(b_.incidents.Apply(Straggler("node-a", 1, At(12))).ok());
  Exchange(At(13));
  EXPECT_EQ(OpenOf(b_, IncidentKind::kStraggler)->causes.at(0).kind, "host");
  EXPECT_THAT(OpenOf(a_, IncidentKind::kPauseStorm)->affected, IsEmpty());
}

TEST_F(CrossShardTest, AResolvedRemoteStormStillExplainsAStragglerWithinTheWindowThenIsForgotten) {
  ASSERT_TRUE(a_.incidents.Apply(Storm("node-b", At(10))).ok());
  Exchange(At(11));
  ASSERT_TRUE(a_.incidents.Apply(Storm("node-b", At(20), false)).ok());
  Incident resolved = *a_.incidents.Get(1);
  ASSERT_FALSE(resolved.open());
  b_.remote.Apply("shard-a", resolved);  // the RESOLVED change on the stream
  ASSERT_TRUE(b_.incidents.Apply(Straggler("node-b", 5, At(25))).ok());
  ASSERT_TRUE(b_.correlator.Correlate(b_.incidents, At(26), nullptr, &b_.remote).ok());
  EXPECT_EQ(OpenOf(b_, IncidentKind::kStraggler)->causes.at(0).kind, "pause_storm");

  RemoteIncidents r(absl::Minutes(10));
  r.Apply("shard-a", resolved);
  r.Expire(At(20) + absl::Minutes(9));
  EXPECT_EQ(r.size("shard-a"), 1u);
  r.Expire(At(20) + absl::Minutes(11));
  EXPECT_EQ(r.size("shard-a"), 0u);
}

TEST(RemoteIncidentsTest, AnOlderCopyFromTheSameAggregatorIsIgnoredAndReplaceForgetsTheRest) {
  Incident storm;
  storm.id = 7;
  storm.kind = IncidentKind::kPauseStorm;
  storm.entity = {{"node", "n1"}, {"device", "mlx5_0"}, {"port", "1"}, {"priority", "3"}};
  storm.opened = At(1);
  storm.revision = 3;
  storm.evidence["pause_ratio"] = 0.9;
  RemoteIncidents r;
  r.Apply("s1", storm);
  Incident older = storm;
  older.revision = 2;
  older.evidence["pause_ratio"] = 0.1;
  const uint64_t v = r.version();
  r.Apply("s1", older);
  EXPECT_EQ(r.version(), v);
  ASSERT_THAT(r.Fabric(), SizeIs(1));
  EXPECT_EQ(r.Fabric()[0]->incident.evidence.at("pause_ratio"), 0.9);
  // The same incident from the other replica (its own id and revisions) is taken.
  Incident other = storm;
  other.id = 2;
  other.revision = 1;
  other.resolved = At(5);
  r.Apply("s1", other);
  ASSERT_THAT(r.Fabric(), SizeIs(1));
  EXPECT_FALSE(r.Fabric()[0]->incident.open());
  // A straggler that names nothing by key is not kept; one that does is.
  Incident straggler;
  straggler.id = 9;
  straggler.kind = IncidentKind::kStraggler;
  straggler.entity = {{"job", "j"}, {"rank", "3"}, {"node", "n1"}};
  straggler.opened = At(2);
  r.Apply("s1", straggler);
  EXPECT_EQ(r.size("s1"), 1u);
  CauseLink c;
  c.kind = "pause_storm";
  c.key = "0123456789abcdef";
  straggler.causes = {c};
  r.Apply("s1", straggler);
  EXPECT_EQ(r.size("s1"), 2u);
  ASSERT_THAT(r.AffectedBy("0123456789abcdef"), SizeIs(1));
  EXPECT_THAT(r.AffectedBy("0123456789abcdef")[0].ranks, ElementsAre(3));
  r.Replace("s1", {});
  EXPECT_EQ(r.size(), 0u);
}

TEST(MergeAffectedTest, UnionsByJob) {
  std::vector<AffectedJob> a = {{"j1", {1, 2}, {"n1"}, {}}, {"j3", {0}, {"n0"}, {}}};
  MergeAffected(a, {{"j1", {2, 5}, {"n2"}, {}}, {"j2", {7}, {"n7"}, {}}});
  ASSERT_THAT(a, SizeIs(3));
  EXPECT_EQ(a[0].job, "j1");
  EXPECT_THAT(a[0].ranks, ElementsAre(1, 2, 5));
  EXPECT_THAT(a[0].nodes, ElementsAre("n1", "n2"));
  EXPECT_EQ(a[1].job, "j2");
  EXPECT_EQ(a[2].job, "j3");
}

}  // namespace
}  // namespace ringside::analysis
