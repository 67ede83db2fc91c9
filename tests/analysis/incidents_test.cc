#include "analysis/incidents.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "analysis/incident_store.h"
#include "analysis/link_detector.h"
#include "analysis/pause_storm_detector.h"
#include "analysis/sqlite_incident_store.h"
#include "tests/analysis/fabric_sim.h"
#include "tests/testing/temp_dir.h"

namespace ringside::analysis {
namespace {

using testing::At;
using ::testing::HasSubstr;

Finding LinkDown(bool active, absl::Time at, const char* node = "node-1") {
  Finding f;
  f.kind = IncidentKind::kLinkDown;
  f.entity = {{"node", node}, {"device", "mlx5_0"}, {"port", "1"}};
  f.severity = Severity::kCritical;
  f.at = at;
  f.active = active;
  f.evidence["via_event"] = 1;
  f.summary = active ? "mlx5_0 on node-1 went down" : "mlx5_0 on node-1 is up again";
  return f;
}

Finding Storm(bool active, absl::Time at, Severity sev = Severity::kWarning) {
  Finding f;
  f.kind = IncidentKind::kPauseStorm;
  f.entity = {{"node", "node-2"}, {"device", "mlx5_3"}, {"port", "1"}, {"priority", "3"}};
  f.severity = sev;
  f.at = at;
  f.active = active;
  f.evidence["origin_tx_pause_fraction"] = 0.97;
  f.summary = "PFC pause storm on priority 3";
  return f;
}

TEST(IncidentManagerTest, Lifecycle) {
  MemoryIncidentStore store;
  IncidentManager m(&store);
  ASSERT_TRUE(m.Load(At(0)).ok());
  std::vector<IncidentChange> ch;
  ASSERT_TRUE(m.Apply({LinkDown(true, At(1)), Storm(true, At(1))}, &ch).ok());
  ASSERT_EQ(ch.size(), 2u);
  EXPECT_EQ(ch[0].type, IncidentChangeType::kOpened);
  EXPECT_EQ(ch[0].incident.id, 1u);
  EXPECT_EQ(ch[1].incident.id, 2u);
  EXPECT_EQ(m.Open().size(), 2u);

  // An update: same key, later time, escalated severity, more evidence.
  Finding more = Storm(true, At(3), Severity::kCritical);
  more.evidence["spread/node-3/mlx5_3"] = 0.9;
  ch.clear();
  ASSERT_TRUE(m.Apply(more, &ch).ok());
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].type, IncidentChangeType::kUpdated);
  const Incident* storm = m.Get(2);
  ASSERT_NE(storm, nullptr);
  EXPECT_EQ(storm->severity, Severity::kCritical);
  EXPECT_EQ(storm->opened, At(1));
  EXPECT_EQ(storm->updated, At(3));
  EXPECT_EQ(storm->evidence.size(), 2u);
  EXPECT_EQ(storm->revision, 2u);
  // A lower severity later does not de-escalate an open incident.
  ASSERT_TRUE(m.Apply(Storm(true, At(4), Severity::kWarning)).ok());
  EXPECT_EQ(m.Get(2)->severity, Severity::kCritical);

  // Resolve; a resolve for nothing open is ignored.
  ch.clear();
  ASSERT_TRUE(m.Apply({LinkDown(false, At(5)), LinkDown(false, At(6), "node-9")}, &ch).ok());
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].type, IncidentChangeType::kResolved);
  EXPECT_EQ(ch[0].incident.resolved, At(5));
  EXPECT_EQ(ch[0].incident.resolution, "mlx5_0 on node-1 is up again");
  EXPECT_EQ(m.Open().size(), 1u);

  // It recurs: a new incident with a new id.
  ch.clear();
  ASSERT_TRUE(m.Apply(LinkDown(true, At(7)), &ch).ok());
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].type, IncidentChangeType::kOpened);
  EXPECT_EQ(ch[0].incident.id, 3u);
  EXPECT_EQ(store.size(), 3u);
  EXPECT_TRUE((*store.Get(1))->resolved.has_value());
  EXPECT_EQ(m.RecentlyResolved().size(), 1u);
}

TEST(IncidentManagerTest, CausesAndBlastRadiusAreUpdates) {
  IncidentManager m(nullptr);
  ASSERT_TRUE(m.Apply(Storm(true, At(1))).ok());
  std::vector<IncidentChange> ch;
  AffectedJob job{"job-1", {4, 5, 6, 7}, {"node-2"}};
  ASSERT_TRUE(m.SetAffected(1, {job}, At(2), &ch).ok());
  ASSERT_EQ(ch.size(), 1u);
  ASSERT_TRUE(m.SetAffected(1, {job}, At(3), &ch).ok());
  EXPECT_EQ(ch.size(), 1u);  // unchanged: no update
  EXPECT_EQ(m.SetCauses(99, {}, At(3)).code(), absl::StatusCode::kNotFound);
}

// A store that fails while `down` is set.
class FlakyStore : public MemoryIncidentStore {
 public:
  absl::Status Put(const Incident& incident) override {
    if (down) return absl::UnavailableError("disk gone");
    return MemoryIncidentStore::Put(incident);
  }
  bool down = false;
};

TEST(IncidentManagerTest, WritesThatFailAreRetried) {
  FlakyStore store;
  IncidentManager m(&store);
  store.down = true;
  EXPECT_EQ(m.Apply(LinkDown(true, At(1))).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(m.Open().size(), 1u);  // kept in memory
  EXPECT_EQ(m.unsaved(), 1u);
  store.down = false;
  EXPECT_TRUE(m.Advance(At(2)).ok());
  EXPECT_EQ(m.unsaved(), 0u);
  EXPECT_EQ(store.size(), 1u);
}

TEST(IncidentManagerTest, MemoryStoreRefusesASecondOpenIncidentForAKey) {
  MemoryIncidentStore store;
  Incident a;
  a.id = 1;
  a.key = "link_down|node=n";
  ASSERT_TRUE(store.Put(a).ok());
  Incident b = a;
  b.id = 2;
  EXPECT_EQ(store.Put(b).code(), absl::StatusCode::kAlreadyExists);
  a.resolved = At(1);
  ASSERT_TRUE(store.Put(a).ok());
  EXPECT_TRUE(store.Put(b).ok());
}

TEST(IncidentJsonTest, Shape) {
  Incident inc;
  inc.id = 7;
  inc.kind = IncidentKind::kStraggler;
  inc.entity = {{"job", "j\"1"}, {"rank", "5"}};
  inc.opened = inc.updated = absl::FromUnixSeconds(1700000000);
  inc.evidence = {{"score", 0.75}, {"bad", std::nan("")}};
  inc.causes = {{3, "pause_storm", "node", {{"node", "node-17"}}, "pause_storm on node-17"}};
  inc.affected = {{"job-1", {1, 2}, {"a", "b"}}};
  EXPECT_EQ(IncidentJson(inc),
            "{\"id\":7,\"key\":\"e26ccadc960ff729\",\"kind\":\"straggler\",\"severity\":\"warning\",\"entity\":{\"job\":"
            "\"j\\\"1\",\"rank\":\"5\"},\"opened\":\"2023-11-14T22:13:20+00:00\",\"updated\":"
            "\"2023-11-14T22:13:20+00:00\",\"resolved\":null,\"evidence\":{\"bad\":null,\"score\":"
            "0.75},\"summary\":\"\",\"resolution\":\"\",\"causes\":[{\"incident_id\":3,\"kind\":"
            "\"pause_storm\",\"scope\":\"node\",\"entity\":{\"node\":\"node-17\"},\"summary\":"
            "\"pause_storm on node-17\"}],\"affected\":[{\"job\":\"job-1\",\"ranks\":[1,2],"
            "\"nodes\":[\"a\",\"b\"]}],\"revision\":0}");
}

// The stable key is pinned: FNV-1a 64 over a documented text (docs/query-api.md), so other tools
// can compute it, and it never changes between versions without a new "-v2" prefix.
TEST(StableIncidentKeyTest, KnownValues) {
  const absl::Time opened = absl::FromUnixSeconds(1700000000);
  EXPECT_EQ(StableIncidentKey(IncidentKind::kLinkDown,
                              {{"node", "n1"}, {"device", "mlx5_0"}, {"port", "1"}}, opened),
            "3c12ed0f386756cd");
  EXPECT_EQ(StableIncidentKey(IncidentKind::kStraggler, {{"job", "j\"1"}, {"rank", "5"}}, opened),
            "e26ccadc960ff729");
  // Every part counts.
  const std::string base = StableIncidentKey(IncidentKind::kLinkDown, {{"node", "n1"}}, opened);
  EXPECT_NE(StableIncidentKey(IncidentKind::kLinkFlapping, {{"node", "n1"}}, opened), base);
  EXPECT_NE(StableIncidentKey(IncidentKind::kLinkDown, {{"node", "n2"}}, opened), base);
  EXPECT_NE(StableIncidentKey(IncidentKind::kLinkDown, {{"node", "n1"}},
                              opened + absl::Nanoseconds(1)),
            base);
  EXPECT_NE(StableIncidentKey(IncidentKind::kLinkDown, {{"node", "n"}, {"1", ""}}, opened), base);
}

// --- SQLite ------------------------------------------------------------------------------------

class SqliteStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<SqliteIncidentStore> Open() {
    absl::StatusOr<std::unique_ptr<SqliteIncidentStore>> s = SqliteIncidentStore::Open(dir_);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  ringside::testing::TempDir tmp_;
  std::string dir_ = tmp_.path() + "/state";  // created by Open
};

TEST_F(SqliteStoreTest, RoundTripsEveryField) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->journal_mode(), "wal");
  EXPECT_EQ(*store->NextId(), 1u);
  Incident inc;
  inc.id = 41;
  inc.kind = IncidentKind::kPauseStorm;
  inc.severity = Severity::kCritical;
  inc.key = "pause_storm|node=node-2";
  inc.entity = {{"node", "node-2"}, {"device", "mlx5_3"}, {"odd", "quote \" and \\ and \n"}};
  inc.opened = absl::FromUnixNanos(1700000000123456789);
  inc.updated = inc.opened + absl::Seconds(30);
  inc.resolved = inc.opened + absl::Minutes(2);
  inc.evidence = {
      {"origin_tx_pause_fraction", 0.97}, {"spread/node-3/mlx5_3", 1.0 / 3}, {"events", 12}};
  inc.summary = "storm ✓";
  inc.resolution = "over";
  inc.causes = {{0, "host", "host", {{"node", "n"}}, "no fabric incident"},
                {5, "link_flapping", "node", {}, "x"}};
  inc.affected = {{"job-1", {0, 1, 2}, {"node-2"}},
                  {"job-2", {}, {}},
                  {"job-3", {4, 5}, {"node-4"}, {"ml-team/w-4", "ml-team/w-5"}}};
  inc.revision = 9;
  ASSERT_TRUE(store->Put(inc).ok());
  absl::StatusOr<std::optional<Incident>> back = store->Get(41);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->has_value());
  EXPECT_TRUE(**back == inc) << IncidentJson(**back) << "\n" << IncidentJson(inc);
  EXPECT_EQ(*store->NextId(), 42u);
  EXPECT_TRUE(store->LoadOpen()->empty());
  IncidentQuery q;
  q.kind = IncidentKind::kPauseStorm;
  EXPECT_EQ(store->List(q)->size(), 1u);
  q.open_only = true;
  EXPECT_EQ(store->List(q)->size(), 0u);
}

TEST_F(SqliteStoreTest, RestartKeepsOpenIncidentsWithoutDuplicates) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    IncidentManager m(store.get());
    ASSERT_TRUE(m.Load(At(0)).ok());
    ASSERT_TRUE(m.Apply({LinkDown(true, At(1)), Storm(true, At(1))}).ok());
    ASSERT_TRUE(m.Apply(Storm(false, At(5))).ok());
    ASSERT_TRUE(m.Apply(Storm(true, At(6))).ok());  // recurs: id 3
    ASSERT_TRUE(m.Apply(Storm(false, At(7))).ok());
  }
  // The aggregator restarts.
  auto store = Open();
  ASSERT_NE(store, nullptr);
  IncidentManager m(store.get());
  ASSERT_TRUE(m.Load(At(100)).ok());
  ASSERT_EQ(m.Open().size(), 1u);
  EXPECT_EQ(m.Open()[0]->id, 1u);
  EXPECT_EQ(m.Open()[0]->kind, IncidentKind::kLinkDown);
  EXPECT_EQ(m.next_id(), 4u);
  // The link detector takes the open incident over: it is still down, then comes up.
  LinkDetector links;
  for (const Incident* inc : m.Open()) {
    if (links.Restore(inc->AsFinding())) m.Confirm(inc->id);
  }
  std::vector<Finding> out;
  testing::SimState state{"node-1", "infiniband_port", "mlx5_0", "1", "state"};
  links.ObserveState(state.At(At(101), 1), out);  // still DOWN: no new incident
  // A duplicate finding for it (a detector that could not restore) updates it instead.
  out.push_back(LinkDown(true, At(102)));
  std::vector<IncidentChange> ch;
  ASSERT_TRUE(m.Apply(out, &ch).ok());
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].type, IncidentChangeType::kUpdated);
  EXPECT_EQ(ch[0].incident.id, 1u);
  out.clear();
  links.ObserveState(state.At(At(103), 4), out);  // ACTIVE
  ch.clear();
  ASSERT_TRUE(m.Apply(out, &ch).ok());
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].type, IncidentChangeType::kResolved);
  // The pause storm recurs after the restart: a new id, never 2 or 3 again.
  ch.clear();
  ASSERT_TRUE(m.Apply(Storm(true, At(110)), &ch).ok());
  EXPECT_EQ(ch[0].incident.id, 4u);
  IncidentQuery all;
  all.limit = 1000;
  std::vector<Incident> rows = *store->List(all);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].id, 4u);
  EXPECT_EQ(store->LoadOpen()->size(), 1u);
  // At the database level too: a second open row for a key is refused.
  Incident dup = rows[0];
  dup.id = 99;
  EXPECT_EQ(store->Put(dup).code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(SqliteStoreTest, UnconfirmedRestoredIncidentsResolveAfterTheTimeout) {
  {
    auto store = Open();
    IncidentManager m(store.get());
    Finding s;
    s.kind = IncidentKind::kStraggler;
    s.entity = {{"job", "job-1"}, {"rank", "5"}};
    s.at = At(1);
    ASSERT_TRUE(m.Apply({s, Storm(true, At(1))}).ok());
  }
  auto store = Open();
  IncidentManager m(store.get());
  ASSERT_TRUE(m.Load(At(10)).ok());
  PauseStormDetector storms;
  for (const Incident* inc : m.Open()) {
    if (storms.Restore(inc->AsFinding())) m.Confirm(inc->id);
  }
  std::vector<IncidentChange> ch;
  ASSERT_TRUE(m.Advance(At(10) + absl::Minutes(14), &ch).ok());
  EXPECT_TRUE(ch.empty());
  ASSERT_TRUE(m.Advance(At(10) + absl::Minutes(15), &ch).ok());
  ASSERT_EQ(ch.size(), 1u);  // the straggler; the storm is its detector's to resolve
  EXPECT_EQ(ch[0].incident.kind, IncidentKind::kStraggler);
  EXPECT_THAT(ch[0].incident.resolution, HasSubstr("not confirmed"));
  EXPECT_EQ(ch[0].incident.evidence.at("unconfirmed_after_restart"), 1);
  EXPECT_EQ(m.Open().size(), 1u);
}

TEST_F(SqliteStoreTest, SchemaVersionIsChecked) {
  { ASSERT_NE(Open(), nullptr); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/incidents.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=2", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  absl::StatusOr<std::unique_ptr<SqliteIncidentStore>> s = SqliteIncidentStore::Open(dir_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("schema version 2"));
}

TEST_F(SqliteStoreTest, RefusesADatabaseItDidNotWrite) {
  ringside::testing::TempDir other;
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((other.path() + "/incidents.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  absl::StatusOr<std::unique_ptr<SqliteIncidentStore>> s = SqliteIncidentStore::Open(other.path());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  // Nor a file that is not SQLite at all.
  ringside::testing::TempDir junk;
  std::ofstream(junk.path() + "/incidents.db") << "this is not a database, just text\n";
  s = SqliteIncidentStore::Open(junk.path());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss) << s.status();
}

}  // namespace
}  // namespace ringside::analysis
