// Several culprits at once (issue #15): k slow ranks of one 1,024-rank job are k stragglers, each
// with its own incident and its own cause, and each stays open while it is late, whoever else is.
// The whole analysis (FabricAnalysis: straggler detector, link detector, incidents, correlator) is
// fed collective records on the data clock, one Flush per collective instance.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/fabric_analysis.h"
#include "tests/analysis/fabric_sim.h"

namespace ringside::analysis {
namespace {

constexpr int kRanks = 1024;
constexpr int kRanksPerNode = 8;
constexpr int kNodesPerLeaf = 16;

std::string NodeOf(int rank) { return absl::StrCat("node-", rank / kRanksPerNode); }

struct SlowRank {
  int rank;
  double slowdown;  // 0.3: computes 30 % longer
  int from;         // first slow instance
  int until;        // first instance at normal speed again
  bool fabric;      // its node's link flaps as it starts (the cause), else nothing: "host"
};

// Per instance: each rank computes 100 ms (+|jitter|, σ 0.5 ms; the slow ones longer), then the
// all-reduce takes 5 ms after the last arrival.
class Job {
 public:
  Job(bool synced, uint64_t seed) : synced_(synced), rng_(seed) {
    for (int r = 0; r < kRanks; ++r) offset_.push_back(synced ? 0 : (r % 97) * 10'000'000LL);
  }
  void Instance(int i, const std::vector<SlowRank>& slow, FabricAnalysis& a) {
    std::normal_distribution<double> jitter(0, 0.0005);
    std::vector<double> factor(kRanks, 1.0);
    for (const SlowRank& s : slow) {
      if (i >= s.from && i < s.until) factor[s.rank] = 1 + s.slowdown;
    }
    std::vector<int64_t> arrive(kRanks);
    int64_t latest = 0;
    for (int r = 0; r < kRanks; ++r) {
      arrive[r] = now_ + static_cast<int64_t>((0.1 * factor[r] + std::abs(jitter(rng_))) * 1e9);
      latest = std::max(latest, arrive[r]);
    }
    const int64_t done = latest + 5'000'000;
    for (int r = 0; r < kRanks; ++r) {
      CollectiveObservation o;
      o.job = "job-1";
      o.comm_id = 9;
      o.comm_name = "dp";
      o.rank = r;
      o.nranks = kRanks;
      o.global_rank = r;
      o.function = "AllReduce";
      o.seq = static_cast<uint64_t>(i);
      o.bytes = 1 << 26;
      o.start_ns = arrive[r] + offset_[r];
      o.stop_ns = done + offset_[r];
      o.clock_synchronized = synced_;
      o.host = NodeOf(r);
      a.OnCollective(o);
    }
    now_ = done;
  }
  absl::Time now() const { return absl::FromUnixNanos(now_); }

 private:
  bool synced_;
  std::mt19937_64 rng_;
  std::vector<int64_t> offset_;
  int64_t now_ = absl::ToUnixNanos(testing::T0());
};

// Two flap cycles of the node's first HCA port, ending now: link_flapping on that node.
void Flap(FabricAnalysis& a, const std::string& node, absl::Time now) {
  for (int k = 0; k < 4; ++k) {
    LinkEvent e{node, "verbs", "mlx5_0", "1", now - absl::Seconds(3 - k),
                k % 2 ? LinkState::kDown : LinkState::kUp, k % 2 ? LinkState::kUp : LinkState::kDown};
    a.OnEvent(e);
  }
}

Topology MakeTopology() {
  std::string text;
  for (int n = 0; n < kRanks / kRanksPerNode; ++n) {
    absl::StrAppend(&text, "node-", n, " leaf-", n / kNodesPerLeaf, "\n");
  }
  absl::StatusOr<Topology> t = Topology::Parse(text);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : Topology();
}

// Runs `instances` collectives with `slow`, checking after every Flush that
//  - no rank but the slow ones is ever a straggler, and nothing but stragglers and the flaps
//    (link_down, link_flapping) opens;
//  - a slow rank's straggler, once open, stays open as long as the rank is slow;
//  - its cause is its own node's link incident (scope node) or, without one, "host" on its node;
// and at the end that each was opened within 20 collectives of its start and resolved after it
// recovered.
void RunJob(const std::vector<SlowRank>& slow, int instances, bool synced) {
  SCOPED_TRACE(synced ? "synchronised clocks" : "unsynchronised clocks");
  const Topology topology = MakeTopology();
  FabricAnalysis a(FabricAnalysisOptions{}, nullptr, &topology);
  ASSERT_TRUE(a.Start(testing::T0()).ok());
  Job job(synced, 5);
  std::map<int, const SlowRank*> by_rank;
  for (const SlowRank& s : slow) by_rank[s.rank] = &s;
  std::map<int, int> opened_at, resolved_at;  // rank → instance
  std::map<int, uint64_t> incident_of;
  for (int i = 0; i < instances; ++i) {
    job.Instance(i, slow, a);
    for (const SlowRank& s : slow) {
      if (s.fabric && i == s.from) Flap(a, NodeOf(s.rank), job.now());
    }
    ASSERT_TRUE(a.Flush(job.now()).ok());
    std::set<int> open;
    for (const Incident* inc : a.incidents().Open()) {
      if (IsFabricKind(inc->kind)) {  // the flaps: link_down, then link_flapping
        ASSERT_TRUE(inc->kind == IncidentKind::kLinkDown ||
                    inc->kind == IncidentKind::kLinkFlapping) << inc->summary;
        continue;
      }
      ASSERT_EQ(inc->kind, IncidentKind::kStraggler) << inc->summary;
      const int rank = std::stoi(inc->entity.at("rank"));
      ASSERT_TRUE(by_rank.count(rank)) << "instance " << i << ": " << inc->summary;
      const SlowRank& s = *by_rank[rank];
      ASSERT_GE(i, s.from) << inc->summary;
      open.insert(rank);
      if (!opened_at.count(rank)) {
        opened_at[rank] = i;
        incident_of[rank] = inc->id;
      }
      EXPECT_EQ(inc->id, incident_of[rank]) << "rank " << rank << " was raised twice";
      EXPECT_EQ(inc->entity.at("node"), NodeOf(rank));
      ASSERT_FALSE(inc->causes.empty()) << inc->summary;
      const CauseLink& cause = inc->causes[0];
      if (s.fabric) {
        EXPECT_TRUE(cause.kind == "link_flapping" || cause.kind == "link_down")
            << "rank " << rank << ": " << cause.kind << " " << cause.summary;
        EXPECT_NE(cause.incident_id, 0u);
        EXPECT_EQ(cause.scope, "node");
        EXPECT_EQ(cause.entity.count("node") ? cause.entity.at("node") : "", NodeOf(rank));
      } else {
        EXPECT_EQ(cause.kind, "host") << "rank " << rank << ": " << cause.summary;
        EXPECT_EQ(inc->causes.size(), 1u);
        EXPECT_EQ(cause.entity.count("node") ? cause.entity.at("node") : "", NodeOf(rank));
      }
    }
    for (const auto& [rank, at] : opened_at) {
      const SlowRank& s = *by_rank[rank];
      if (open.count(rank)) continue;
      if (!resolved_at.count(rank)) resolved_at[rank] = i;
      // Resolved: only once the rank has recovered.
      EXPECT_GE(i, s.until) << "rank " << rank << " (" << s.slowdown * 100
                            << " % slower) resolved at instance " << i << " while still late";
    }
  }
  for (const SlowRank& s : slow) {
    ASSERT_TRUE(opened_at.count(s.rank)) << "rank " << s.rank << " never flagged";
    EXPECT_LE(opened_at[s.rank] - s.from, 20) << "rank " << s.rank << " (" << s.slowdown * 100 << " %)";
    if (s.until + 30 <= instances) {
      ASSERT_TRUE(resolved_at.count(s.rank)) << "rank " << s.rank << " still open after recovering";
      EXPECT_LE(resolved_at[s.rank] - s.until, 20) << "rank " << s.rank;
    }
  }
}

// The case: two ranks on different leaves slowed by 35 % and 30 %, 15 collectives apart;
// the first recovers while the second is still slow.
TEST(StragglerMultiTest, TwoConcurrentSlowRanksAmong1024AreTwoStragglersEachWithItsCause) {
  const std::vector<SlowRank> slow = {
      {100, 0.35, 30, 130, true},    // node-12, leaf-0: its link flaps
      {900, 0.30, 45, 1000, false},  // node-112, leaf-7: host
  };
  for (bool synced : {true, false}) RunJob(slow, 180, synced);
}

// Eight slow ranks, 8 % to 40 % slower, starting 10 collectives apart, half with a flapping link
// on their node; the slowest recovers first while the others are still slow.
TEST(StragglerMultiTest, EightConcurrentSlowRanksAmong1024AreEightStragglersEachWithItsCause) {
  const std::vector<SlowRank> slow = {
      {3, 0.40, 30, 150, true},      {130, 0.08, 40, 1000, false},
      {257, 0.12, 50, 1000, true},   {390, 0.17, 60, 1000, false},
      {515, 0.21, 70, 1000, false},  {640, 0.26, 80, 1000, true},
      {777, 0.30, 90, 1000, false},  {1020, 0.35, 100, 1000, true},
  };
  for (bool synced : {true, false}) RunJob(slow, 200, synced);
}

}  // namespace
}  // namespace ringside::analysis
