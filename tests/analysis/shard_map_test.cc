#include "analysis/shard_map.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/topology.h"

namespace ringside::analysis {
namespace {

ShardMap Shards(int n) {
  absl::StatusOr<ShardMap> m =
      ShardMap::FromStatefulSets(n, {"agg-a-{shard}.agg-a:9472", "agg-b-{shard}.agg-b:9472"});
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

std::string Node(int i) { return absl::StrCat("gpu-", i / 100, "-", i % 100); }

TEST(ShardMapTest, ParsesAFile) {
  absl::StatusOr<ShardMap> m = ShardMap::Parse(
      "# shard  replicas\n"
      "shard-0  agg-0a.example:9472 agg-0b.example:9472\n"
      "\n"
      "shard-1\tagg-1a.example:9472,agg-1b.example:9472   # the second\n"
      "shard-2 [::1]:9472\n");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ(m->shards()[1].name, "shard-1");
  EXPECT_EQ(m->shards()[1].replicas,
            (std::vector<std::string>{"agg-1a.example:9472", "agg-1b.example:9472"}));
  EXPECT_EQ(m->shards()[2].replicas, std::vector<std::string>{"[::1]:9472"});
}

TEST(ShardMapTest, RejectsWhatItCannotUse) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {Case{"", "no shard"}, Case{"# only a comment\n", "no shard"},
                        Case{"shard-0\n", "line 1"}, Case{"s a:1\ns b:2\n", "twice"},
                        Case{"s agg-a\n", "not host:port"}, Case{"s agg:0\n", "not host:port"},
                        Case{"s agg:99999\n", "not host:port"}, Case{"s :9472\n", "not host:port"}}) {
    absl::StatusOr<ShardMap> m = ShardMap::Parse(c.text);
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_NE(m.status().message().find(c.says), absl::string_view::npos)
        << c.text << ": " << m.status();
  }
  EXPECT_FALSE(ShardMap::FromStatefulSets(0, {"a-{shard}:1"}).ok());
  EXPECT_FALSE(ShardMap::FromStatefulSets(2, {"a-0:1"}).ok());  // no {shard}
  EXPECT_FALSE(ShardMap::FromSpec("statefulset:x:a-{shard}:1").ok());
}

TEST(ShardMapTest, StatefulSetSpec) {
  absl::StatusOr<ShardMap> m = ShardMap::FromSpec(
      "statefulset:3:ringside-aggregator-a-{shard}.ringside-aggregator-a.ringside.svc:9472,"
      "ringside-aggregator-b-{shard}.ringside-aggregator-b.ringside.svc:9472");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ(m->shards()[2].name, "shard-2");
  EXPECT_EQ(m->shards()[2].replicas,
            (std::vector<std::string>{
                "ringside-aggregator-a-2.ringside-aggregator-a.ringside.svc:9472",
                "ringside-aggregator-b-2.ringside-aggregator-b.ringside.svc:9472"}));
  // A spec that is not a StatefulSet is a file's text.
  absl::StatusOr<ShardMap> f = ShardMap::FromSpec("s0 a:1\n");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->shards()[0].name, "s0");
}

// The weights are part of the contract: every agent, aggregator and CLI version must place a node
// on the same shard. Values computed independently from the documented recipe.
TEST(ShardMapTest, WeightsArePinned) {
  EXPECT_EQ(ShardMap::Weight("shard-0", "node:gpu-1"), 0xfe27913275e56af9ULL);
  EXPECT_EQ(ShardMap::Weight("shard-1", "job:llama-70b"), 0xa159c6b780289c51ULL);
}

TEST(ShardMapTest, PlacementIgnoresReplicaAddresses) {
  absl::StatusOr<ShardMap> a = ShardMap::Parse("shard-0 a:1\nshard-1 b:1\nshard-2 c:1\n");
  absl::StatusOr<ShardMap> b =
      ShardMap::Parse("shard-2 z:9\nshard-0 x:9 x2:9\nshard-1 y:9\n");  // moved, reordered
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 500; ++i) {
    EXPECT_EQ(a->shards()[a->ShardOfNode(Node(i))].name, b->shards()[b->ShardOfNode(Node(i))].name);
    const std::string job = absl::StrCat("job-", i);
    EXPECT_EQ(a->shards()[a->ShardOfJob(job)].name, b->shards()[b->ShardOfJob(job)].name);
  }
}

// 12,500 nodes (100,000 GPUs at 8 per node) on 8 shards: about 1/8 each; adding a ninth moves
// about 1/9 of them, every one to the new shard; removing it moves them back and nothing else.
TEST(ShardMapTest, AddingAShardMovesOnlyItsShare) {
  const int kNodes = 12'500;
  const ShardMap eight = Shards(8);
  const ShardMap nine = Shards(9);
  std::vector<int> per_shard(8, 0);
  int moved = 0;
  for (int i = 0; i < kNodes; ++i) {
    const size_t before = eight.ShardOfNode(Node(i));
    const size_t after = nine.ShardOfNode(Node(i));
    ++per_shard[before];
    if (before != after) {
      ++moved;
      EXPECT_EQ(nine.shards()[after].name, "shard-8") << Node(i) << " moved between old shards";
    }
  }
  for (int n : per_shard) {
    EXPECT_NEAR(n, kNodes / 8.0, kNodes / 8.0 * 0.08) << "unbalanced shard";
  }
  const double fraction = static_cast<double>(moved) / kNodes;
  EXPECT_NEAR(fraction, 1.0 / 9, 0.015) << moved << " of " << kNodes << " moved";

  // Jobs too.
  int jobs_moved = 0;
  for (int j = 0; j < 5000; ++j) {
    const std::string job = absl::StrCat("train-", j);
    const size_t before = eight.ShardOfJob(job);
    const size_t after = nine.ShardOfJob(job);
    if (before != after) {
      ++jobs_moved;
      EXPECT_EQ(after, 8u);
    }
  }
  EXPECT_NEAR(jobs_moved / 5000.0, 1.0 / 9, 0.02);
}

// With a topology, the nodes of one leaf (a rail group's nodes share their leaves) meet in one
// shard, so a pause storm's domain and both ends of a host link are judged together; a node the
// topology does not know is placed by its name.
TEST(ShardMapTest, NodesOfOneLeafMeetInOneShard) {
  std::string map;
  for (int i = 0; i < 256; ++i) absl::StrAppend(&map, Node(i), " leaf-", i / 16, "\n");
  absl::StatusOr<Topology> topology = Topology::Parse(map, Topology::Format::kNodeSwitchMap);
  ASSERT_TRUE(topology.ok()) << topology.status();
  const ShardMap shards = Shards(4);
  std::map<int, std::set<size_t>> shards_of_leaf;
  std::set<size_t> used;
  for (int i = 0; i < 256; ++i) {
    const size_t s = shards.ShardOfNode(Node(i), &*topology);
    shards_of_leaf[i / 16].insert(s);
    used.insert(s);
    EXPECT_EQ(ShardMap::NodePlacementKey(Node(i), &*topology), absl::StrCat("leaf:leaf-", i / 16));
  }
  for (const auto& [leaf, s] : shards_of_leaf) EXPECT_EQ(s.size(), 1u) << "leaf-" << leaf << " split";
  EXPECT_GT(used.size(), 1u) << "16 leaves all on one of 4 shards";
  EXPECT_EQ(ShardMap::NodePlacementKey("elsewhere", &*topology), "node:elsewhere");
  EXPECT_EQ(shards.ShardOfNode("elsewhere", &*topology), shards.ShardOfNode("elsewhere"));
}

}  // namespace
}  // namespace ringside::analysis
