// Per-instance lateness and its host/GPU split (analysis/straggler_lateness.h), on instances taken
// from the real H200 journal (tests/data/real-nccl: four ranks time-sharing one GPU) and on
// hand-made ones for what that journal does not show.
#include "analysis/straggler_lateness.h"

#include <gtest/gtest.h>

#include <vector>

namespace ringside::analysis {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'795'890'853'000'000'000;

// (enqueue, kernel start, kernel duration) in ns from kT0; all on node 0.
struct Row {
  int64_t enqueue, start, duration;
};

std::vector<RankArrival> Instance(const std::vector<Row>& rows, int32_t gpu_of_all = 0) {
  std::vector<RankArrival> out;
  for (const Row& r : rows) {
    RankArrival a;
    a.enqueue_ns = kT0 + r.enqueue;
    a.start_ns = kT0 + r.start;
    a.duration_ns = r.duration;
    a.host = 0;
    a.gpu = gpu_of_all;
    out.push_back(a);
  }
  return out;
}

// seq 100 of the journal: nobody held back. Rank 1's kernel started last (6.8 ms after the
// first) although every rank enqueued within 0.8 ms: the four processes time-share the GPU.
const std::vector<Row> kSeq100 = {{365139, 5540956, 9414560},
                                  {786688, 7796892, 7534816},
                                  {0, 1030236, 14516480},
                                  {223212, 3284220, 12452000}};
// seq 305: rank 1 sleeps 10 ms on the host before its step.
const std::vector<Row> kSeq305 = {{0, 1275409, 22877408},
                                  {10670688, 17061105, 7492992},
                                  {730365, 3532753, 21235072},
                                  {954045, 5788625, 19167328}};

TEST(StragglerLatenessTest, RankScheduledLastOnASharedGpuIsNotLate) {
  const InstanceLateness j = JudgeInstance(Instance(kSeq100), {});
  ASSERT_EQ(j.ranks.size(), 4u);
  EXPECT_TRUE(j.enqueue_comparable);
  EXPECT_EQ(j.latest, 1u);
  // At kernel level rank 1 is 4.9 ms behind the median rank, past the 3.8 ms margin...
  EXPECT_GE(j.ranks[1].kernel_ns, j.need_ns);
  EXPECT_NEAR(j.ranks[1].kernel_ns / 1e6, 4.9, 0.1);
  // ...but its wait after its enqueue is what three other processes' time slices explain.
  EXPECT_LT(j.ranks[1].lateness_ns, j.need_ns / 2);
  for (const RankLateness& l : j.ranks) EXPECT_EQ(l.gpu_sharers, 4);
}

TEST(StragglerLatenessTest, WithoutTheSharingRuleTheScheduledLastRankIsLate) {
  LatenessOptions o;
  o.gpu_sharing = false;
  const InstanceLateness j = JudgeInstance(Instance(kSeq100), o);
  EXPECT_GE(j.ranks[1].lateness_ns, j.need_ns);
  // The split still says what it was: the GPU.
  EXPECT_GT(j.ranks[1].gpu_ns, j.ranks[1].host_ns);
}

TEST(StragglerLatenessTest, RankHeldBackOnTheHostIsLateOnTheHost) {
  const InstanceLateness j = JudgeInstance(Instance(kSeq305), {});
  EXPECT_EQ(j.latest, 1u);
  const RankLateness& l = j.ranks[1];
  EXPECT_GE(l.lateness_ns, j.need_ns);
  EXPECT_NEAR(l.host_ns / 1e6, 9.9, 0.2);  // enqueued ~10 ms behind the median enqueue
  EXPECT_EQ(l.host_ns + l.gpu_ns, l.lateness_ns);
  EXPECT_GT(l.host_ns, 3 * l.gpu_ns);
  for (size_t r : {0u, 2u, 3u}) EXPECT_LT(j.ranks[r].lateness_ns, j.need_ns) << r;
}

TEST(StragglerLatenessTest, RankWhoseOwnGpuWorkDelaysItsKernelIsLateOnTheGpu) {
  // Four ranks on one GPU, enqueued together; rank 2 has 30 ms of its own work before its
  // collective: the others' kernels all started (one slice apart) long before it.
  const std::vector<Row> rows = {{0, 500'000, 40 * kMs},
                                 {100'000, 2'750'000, 38 * kMs},
                                 {200'000, 31 * kMs, 10 * kMs},
                                 {300'000, 5'000'000, 36 * kMs}};
  const InstanceLateness j = JudgeInstance(Instance(rows), {});
  const RankLateness& l = j.ranks[2];
  EXPECT_GE(l.lateness_ns, j.need_ns);
  EXPECT_LT(l.host_ns, kMs);
  EXPECT_GT(l.gpu_ns, 15 * kMs);
}

TEST(StragglerLatenessTest, HostLateRankThatDoesNotArriveLateIsNotLate) {
  // Rank 3 enqueues 6 ms late, but the shared GPU would not have run its kernel sooner: it is not
  // behind the median at kernel level.
  const std::vector<Row> rows = {{0, 500'000, 10 * kMs},
                                 {100'000, 7'000'000, 4 * kMs},
                                 {200'000, 2'750'000, 8 * kMs},
                                 {6 * kMs, 6'100'000, 6'500'000}};
  const InstanceLateness j = JudgeInstance(Instance(rows), {});
  EXPECT_LT(j.ranks[3].lateness_ns, j.need_ns);
  EXPECT_LE(j.ranks[3].lateness_ns, j.ranks[3].kernel_ns);
}

TEST(StragglerLatenessTest, EnqueueTimesAcrossNodesNeedATightClockBound) {
  // Two nodes, a GPU per rank; rank 1 enqueues 10 ms late and waits 19 ms less than the others
  // (margin: half of its own 11 ms collective time, 5.5 ms).
  std::vector<RankArrival> ranks(4);
  for (int r = 0; r < 4; ++r) {
    ranks[r].host = r / 2;
    ranks[r].gpu = r;
    ranks[r].enqueue_ns = kT0 + (r == 1 ? 10 * kMs : 0);
    ranks[r].start_ns = kT0 + (r == 1 ? 20 * kMs : kMs);
    ranks[r].duration_ns = r == 1 ? 11 * kMs : 30 * kMs;
  }
  // No bound: the split is unknown, the lateness is the kernel-level one.
  InstanceLateness j = JudgeInstance(ranks, {});
  EXPECT_FALSE(j.enqueue_comparable);
  EXPECT_EQ(j.ranks[1].host_ns, -1);
  EXPECT_EQ(j.ranks[1].lateness_ns, j.ranks[1].kernel_ns);
  // 1 ms bounds against a 5.5 ms margin: 2 ms > 0.25 × 5.5 ms, still not comparable.
  for (RankArrival& a : ranks) a.clock_error_ns = kMs;
  j = JudgeInstance(ranks, {});
  EXPECT_FALSE(j.enqueue_comparable);
  // 100 µs bounds: comparable, and the rank is late on its host.
  for (RankArrival& a : ranks) a.clock_error_ns = 100'000;
  j = JudgeInstance(ranks, {});
  EXPECT_TRUE(j.enqueue_comparable);
  EXPECT_EQ(j.ranks[1].host_ns, 10 * kMs);
  EXPECT_EQ(j.ranks[1].gpu_ns, j.ranks[1].lateness_ns - 10 * kMs);
  // One node without a bound (an older agent) makes the instance not comparable again.
  ranks[3].clock_error_ns = -1;
  EXPECT_FALSE(JudgeInstance(ranks, {}).enqueue_comparable);
}

TEST(StragglerLatenessTest, MissingEnqueueTimesLeaveTheSplitUnknown) {
  std::vector<RankArrival> ranks = Instance(kSeq305);
  ranks[2].enqueue_ns = 0;  // a trace without enqueue times
  const InstanceLateness j = JudgeInstance(ranks, {});
  EXPECT_FALSE(j.enqueue_comparable);
  EXPECT_EQ(j.ranks[1].host_ns, -1);
  EXPECT_EQ(j.ranks[1].lateness_ns, j.ranks[1].kernel_ns);
}

}  // namespace
}  // namespace ringside::analysis
