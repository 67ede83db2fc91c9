// The straggler detector's `where` (issue #27): host or GPU lateness in the finding's evidence,
// its summary and the rank view, and unknown when the clocks do not allow the split.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "analysis/straggler_detector.h"
#include "analysis/straggler_where.h"

namespace ringside::analysis {
namespace {

constexpr int64_t kMs = 1'000'000;

// Eight ranks on two nodes, a GPU each: 100 ms of compute, then a 5 ms all-reduce. `host_late`
// enqueues 20 ms late; `gpu_late` enqueues on time, its kernel starts 20 ms late.
std::vector<Finding> Drive(int host_late, int gpu_late, int64_t clock_error_ns,
                         std::vector<RankView>* ranks = nullptr) {
  StragglerDetector d;
  std::vector<Finding> out;
  int64_t t = 1'800'000'000'000'000'000;
  for (uint64_t seq = 0; seq < 40; ++seq) {
    const int64_t last = t + 100 * kMs + 20 * kMs;
    const int64_t done = last + 5 * kMs;
    for (int r = 0; r < 8; ++r) {
      CollectiveObservation o;
      o.job = "j";
      o.comm_id = 1;
      o.comm_name = "dp";
      o.rank = r;
      o.nranks = 8;
      o.global_rank = r;
      o.function = "AllReduce";
      o.seq = seq;
      o.bytes = 1 << 26;
      o.host = r < 4 ? "node-0" : "node-1";
      o.pid = 100 + r;
      o.cuda_device = r % 4;
      o.clock_error_ns = clock_error_ns;
      const bool late = r == host_late || r == gpu_late;
      o.enqueue_ns = t + 100 * kMs + r * 10'000 + (r == host_late ? 20 * kMs : 0);
      o.start_ns = late ? last : t + 100 * kMs + 50'000 + r * 10'000;
      o.stop_ns = done;
      d.Observe(o, out);
    }
    t = done;
  }
  if (ranks != nullptr) *ranks = d.Ranks("j");
  return out;
}

const Finding* Opened(const std::vector<Finding>& f, const std::string& rank) {
  for (const Finding& x : f) {
    if (x.kind == IncidentKind::kStraggler && x.active && x.entity.at("rank") == rank) return &x;
  }
  return nullptr;
}

TEST(StragglerWhereTest, HostAndGpuLatenessAreToldApartOnBoundedClocks) {
  std::vector<RankView> ranks;
  const std::vector<Finding> f = Drive(/*host_late=*/2, /*gpu_late=*/6, 50'000, &ranks);
  const Finding* host = Opened(f, "2");
  const Finding* gpu = Opened(f, "6");
  ASSERT_NE(host, nullptr);
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(StragglerWhere(host->evidence), "host");
  EXPECT_NEAR(host->evidence.at("host_lateness_ms"), 20, 0.5);
  EXPECT_TRUE(absl::StrContains(host->summary, "late on the host")) << host->summary;
  EXPECT_EQ(StragglerWhere(gpu->evidence), "gpu");
  EXPECT_NEAR(gpu->evidence.at("gpu_lateness_ms"), 20, 0.5);
  EXPECT_LT(gpu->evidence.at("host_lateness_ms"), 0.5);
  EXPECT_TRUE(absl::StrContains(gpu->summary, "late on the GPU")) << gpu->summary;
  EXPECT_EQ(gpu->evidence.count("gpu_sharing_ranks"), 0u);  // a GPU of its own
  for (const Finding& x : f) {
    if (x.kind != IncidentKind::kStraggler) continue;
    EXPECT_TRUE(x.entity.at("rank") == "2" || x.entity.at("rank") == "6") << x.summary;
  }
  int seen = 0;
  for (const RankView& v : ranks) {
    const std::string want = v.rank == 2 ? "host" : v.rank == 6 ? "gpu" : "unknown";
    EXPECT_EQ(v.where, want) << v.rank;  // unknown: never late
    ++seen;
    EXPECT_EQ(v.gpu_sharers, 1);
  }
  EXPECT_EQ(seen, 8);
}

TEST(StragglerWhereTest, WithoutAClockBoundAcrossNodesWhereIsUnknown) {
  const std::vector<Finding> f = Drive(2, 6, /*clock_error_ns=*/-1);
  for (const char* rank : {"2", "6"}) {
    const Finding* x = Opened(f, rank);
    ASSERT_NE(x, nullptr) << rank;  // still flagged, from kernel durations as before
    EXPECT_EQ(StragglerWhere(x->evidence), "unknown");
    EXPECT_TRUE(absl::StrContains(x->summary, "not told apart")) << x->summary;
  }
}

}  // namespace
}  // namespace ringside::analysis
