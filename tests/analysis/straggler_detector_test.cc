#include "analysis/straggler_detector.h"

#include <zlib.h>

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/testing/temp_dir.h"

namespace ringside::analysis {
namespace {

// A synthetic data-parallel job: `nranks` ranks, each iteration computes for `compute` (the slow
// rank longer), then all-reduces for `xfer`. Clocks are not synchronised: each rank's clock has
// its own offset, so the detector must work from kernel durations alone.
class SyntheticJob {
 public:
  SyntheticJob(int nranks, uint64_t seed) : nranks_(nranks), rng_(seed) {
    for (int r = 0; r < nranks; ++r) offset_.push_back(r * 1'000'000'000LL);  // 1 s apart
  }
  // One iteration; `slow` maps rank → compute factor.
  std::vector<CollectiveObservation> Iteration(const std::map<int, double>& slow,
                                               double compute_s = 0.1, double xfer_s = 0.005,
                                               uint64_t bytes = 1 << 26) {
    std::normal_distribution<double> jitter(0, 0.0005);
    std::vector<int64_t> arrive(nranks_);
    int64_t latest = 0;
    for (int r = 0; r < nranks_; ++r) {
      double c = compute_s * (slow.count(r) ? slow.at(r) : 1.0) + std::abs(jitter(rng_));
      arrive[r] = now_ + static_cast<int64_t>(c * 1e9);
      latest = std::max(latest, arrive[r]);
    }
    const int64_t done = latest + static_cast<int64_t>(xfer_s * 1e9);
    std::vector<CollectiveObservation> out;
    for (int r = 0; r < nranks_; ++r) {
      CollectiveObservation o;
      o.job = "job-1";
      o.comm_id = 42;
      o.comm_name = "dp";
      o.rank = r;
      o.nranks = nranks_;
      o.global_rank = r;
      o.function = "AllReduce";
      o.seq = seq_;
      o.bytes = bytes;
      o.start_ns = arrive[r] + offset_[r];
      o.stop_ns = done + offset_[r];
      o.host = "node-" + std::to_string(r / 8);
      out.push_back(o);
    }
    ++seq_;
    now_ = done;
    return out;
  }

 private:
  int nranks_;
  std::mt19937_64 rng_;
  std::vector<int64_t> offset_;
  int64_t now_ = 1'700'000'000'000'000'000LL;
  uint64_t seq_ = 0;
};

struct Outcome {
  std::vector<Finding> findings;
  int first_open_at = -1;  // iteration index of the first straggler finding
};

Outcome Drive(SyntheticJob& job, int iterations, const std::map<int, double>& slow,
            StragglerDetector& d, double xfer_s = 0.005) {
  Outcome o;
  for (int i = 0; i < iterations; ++i) {
    for (const auto& obs : job.Iteration(slow, 0.1, xfer_s)) {
      size_t before = o.findings.size();
      d.Observe(obs, o.findings);
      for (size_t k = before; k < o.findings.size(); ++k) {
        if (o.findings[k].kind == IncidentKind::kStraggler && o.findings[k].active &&
            o.first_open_at < 0) {
          o.first_open_at = i + 1;
        }
      }
    }
  }
  return o;
}

TEST(StragglerDetectorTest, TwentyPercentSlowerRankFlaggedWithin20Collectives) {
  SyntheticJob job(16, 1);
  StragglerDetector d;
  Outcome o = Drive(job, 40, {{5, 1.2}}, d);
  ASSERT_GT(o.first_open_at, 0);
  EXPECT_LE(o.first_open_at, 20);
  std::set<std::string> flagged;
  for (const Finding& f : o.findings) {
    if (f.kind == IncidentKind::kStraggler && f.active) flagged.insert(f.entity.at("rank"));
  }
  EXPECT_EQ(flagged, std::set<std::string>{"5"});
  const Finding& f = o.findings.front();
  EXPECT_EQ(f.entity.at("node"), "node-0");
  EXPECT_EQ(f.entity.at("job"), "job-1");
  EXPECT_GE(f.evidence.at("score"), 0.6);
  EXPECT_NEAR(f.evidence.at("margin_ms"), 20, 3);  // 20 % of 100 ms compute
}

// A rank whose plugin knew its Kubernetes pod: the finding's entity, its summary and the rank
// view name the pod; ranks without one (an older plugin) get no pod labels at all.
TEST(StragglerDetectorTest, TheStragglersPodIsInItsEntityAndRankView) {
  SyntheticJob job(8, 3);
  StragglerDetector d;
  std::vector<Finding> findings;
  for (int i = 0; i < 40; ++i) {
    for (CollectiveObservation obs : job.Iteration({{5, 1.2}})) {
      if (obs.rank != 3) {  // rank 3: an older plugin, no pod
        obs.pod = "trainer-" + std::to_string(obs.rank);
        obs.pod_namespace = "ml-team";
      }
      d.Observe(obs, findings);
    }
  }
  ASSERT_FALSE(findings.empty());
  const Finding& f = findings.front();
  ASSERT_EQ(f.kind, IncidentKind::kStraggler);
  EXPECT_EQ(f.entity.at("rank"), "5");
  EXPECT_EQ(f.entity.at("pod"), "trainer-5");
  EXPECT_EQ(f.entity.at("namespace"), "ml-team");
  EXPECT_NE(f.summary.find("rank 5 (pod ml-team/trainer-5) of job job-1"), std::string::npos)
      << f.summary;
  for (const RankView& v : d.Ranks("job-1")) {
    if (v.rank == 3) {
      EXPECT_EQ(v.pod, "");
      EXPECT_EQ(v.pod_namespace, "");
    } else {
      EXPECT_EQ(v.pod, "trainer-" + std::to_string(v.rank));
      EXPECT_EQ(v.pod_namespace, "ml-team");
    }
  }
}

// Processes driving several GPUs (JAX drives every GPU of a host from one process, some PyTorch
// launchers do too): the ranks of one process share its pid, its clock and, where the launcher
// sets RANK, its global rank; they differ only by CUDA device. Rank 5 (a GPU of a process whose
// other GPUs are healthy) is slow. Each GPU is a worker of its own, so rank 5 is flagged, with
// its device, and its process's other GPUs are not. Merged into one worker per process (the
// key before format version 3), the process's GPUs' operations pile up in one log (its busy time
// is no longer any GPU's) and a GPU is never compared with its process's other GPUs: with one
// process for all eight GPUs there is no peer left and nothing can be flagged at all.
TEST(StragglerDetectorTest, GpusOfOneProcessAreWorkersOfTheirOwnAndOnlyTheSlowOneIsFlagged) {
  struct Case {
    int gpus_per_process;
    bool global_rank;  // the launcher set RANK: the process's
  };
  for (const Case c : {Case{8, false}, Case{4, true}, Case{2, false}}) {
    SCOPED_TRACE(absl::StrCat(c.gpus_per_process, " GPUs per process",
                              c.global_rank ? ", global rank = the process's" : ""));
    SyntheticJob job(8, 5);
    StragglerDetector d;
    std::vector<Finding> findings;
    for (int i = 0; i < 40; ++i) {
      for (CollectiveObservation obs : job.Iteration({{5, 1.2}})) {
        const int rank = static_cast<int>(obs.rank);
        const int process = rank / c.gpus_per_process;
        // One clock per process (SyntheticJob gives every rank its own, 1 s apart).
        const int64_t shift = static_cast<int64_t>(process - rank) * 1'000'000'000LL;
        obs.start_ns += shift;
        obs.stop_ns += shift;
        obs.host = "node-0";
        obs.pid = 7000 + process;
        obs.cuda_device = rank % c.gpus_per_process;
        obs.global_rank = c.global_rank ? process : -1;
        d.Observe(obs, findings);
      }
    }
    std::set<int> flagged;
    const Finding* opened = nullptr;
    for (const Finding& f : findings) {
      if (f.kind != IncidentKind::kStraggler || !f.active) continue;
      if (opened == nullptr) opened = &f;
      flagged.insert(static_cast<int>(f.evidence.at("comm_rank")));
    }
    ASSERT_NE(opened, nullptr) << "the slow GPU was not flagged";
    EXPECT_EQ(flagged, std::set<int>{5}) << "only comm rank 5, none of its process's other GPUs";
    const std::string device = std::to_string(5 % c.gpus_per_process);
    const std::string rank = c.global_rank ? std::to_string(5 / c.gpus_per_process) : "5";
    EXPECT_EQ(opened->entity.at("cuda_device"), device);
    EXPECT_EQ(opened->entity.at("node"), "node-0");
    EXPECT_EQ(opened->entity.at("rank"), rank);
    EXPECT_NE(opened->summary.find(absl::StrCat("rank ", rank, " (cuda device ", device,
                                                ") of job job-1")),
              std::string::npos)
        << opened->summary;
  }
}

TEST(StragglerDetectorTest, AStragglerWithoutAPodHasNoPodLabels) {
  SyntheticJob job(8, 4);
  StragglerDetector d;
  Outcome o = Drive(job, 40, {{5, 1.2}}, d);
  ASSERT_FALSE(o.findings.empty());
  EXPECT_EQ(o.findings.front().entity.count("pod"), 0u);
  EXPECT_EQ(o.findings.front().entity.count("namespace"), 0u);
  EXPECT_EQ(o.findings.front().entity.count("cuda_device"), 0u) << "no device known";
  EXPECT_EQ(o.findings.front().summary.find("pod"), std::string::npos);
}

TEST(StragglerDetectorTest, FivePercentSlowerRankFlaggedWithin100Collectives) {
  SyntheticJob job(16, 2);
  StragglerDetector d;
  Outcome o = Drive(job, 150, {{11, 1.05}}, d);
  ASSERT_GT(o.first_open_at, 0);
  EXPECT_LE(o.first_open_at, 100);
  for (const Finding& f : o.findings) {
    if (f.kind == IncidentKind::kStraggler) {
      EXPECT_EQ(f.entity.at("rank"), "11");
    }
  }
}

TEST(StragglerDetectorTest, NoStragglerInANoisyHealthyJob) {
  SyntheticJob job(16, 3);
  StragglerDetector d;
  Outcome o = Drive(job, 2000, {}, d);
  EXPECT_TRUE(o.findings.empty()) << o.findings.front().summary;
}

TEST(StragglerDetectorTest, ResolvesWhenTheRankRecovers) {
  SyntheticJob job(8, 4);
  StragglerDetector d;
  Outcome slow = Drive(job, 30, {{2, 1.3}}, d);
  ASSERT_GT(slow.first_open_at, 0);
  Outcome healed = Drive(job, 40, {}, d);
  ASSERT_FALSE(healed.findings.empty());
  EXPECT_FALSE(healed.findings.back().active);
  EXPECT_EQ(healed.findings.back().entity.at("rank"), "2");
}

// The whole job slows (every rank's transfer takes 3x): a job_slowdown, no straggler.
TEST(StragglerDetectorTest, JobWideSlowdownIsNotAStraggler) {
  SyntheticJob job(16, 5);
  StragglerDetector d;
  Outcome base = Drive(job, 30, {}, d, 0.005);
  EXPECT_TRUE(base.findings.empty());
  Outcome slow = Drive(job, 20, {}, d, 0.015);
  ASSERT_FALSE(slow.findings.empty());
  for (const Finding& f : slow.findings) EXPECT_EQ(f.kind, IncidentKind::kJobSlowdown);
  EXPECT_TRUE(slow.findings.front().active);
  EXPECT_GE(slow.findings.front().evidence.at("ratio"), 1.5);
  Outcome back = Drive(job, 20, {}, d, 0.005);
  ASSERT_FALSE(back.findings.empty());
  EXPECT_FALSE(back.findings.back().active);
}

// A rank blocked in point-to-point receives (a pipeline stage waiting on the stage before it) is
// late to its data-parallel collective, but it is a victim: not flagged.
TEST(StragglerDetectorTest, PipelineVictimIsNotFlagged) {
  SyntheticJob job(4, 6);
  StragglerDetector d;
  std::vector<Finding> out;
  for (int i = 0; i < 40; ++i) {
    auto obs = job.Iteration({{1, 1.5}});
    for (const auto& o : obs) d.Observe(o, out);
    // Rank 1 spent its extra time in a Recv from its pipeline peer.
    CollectiveObservation recv = obs[1];
    recv.peer = 0;
    recv.function = "Recv";
    recv.stop_ns = obs[1].start_ns;
    recv.start_ns = obs[1].start_ns - 60'000'000;
    d.Observe(recv, out);
  }
  for (const Finding& f : out) EXPECT_NE(f.kind, IncidentKind::kStraggler) << f.summary;
}

// The published traces (shared/data/straggler-analysis), read here directly from the CSV so this
// test does not depend on the importer: data-parallel collectives per stage, and the pipeline's
// send/recv as point-to-point time. One clock per job, so arrival offsets are usable.
std::vector<CollectiveObservation> LoadTrace(const std::string& path) {
  std::vector<CollectiveObservation> out;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  std::string text;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) text.append(buf, n);
  gzclose(f);
  const std::set<std::string> collectives = {"grads-reduce-scatter", "params-all-gather",
                                             "embedding-grads-all-reduce",
                                             "layernorm-grads-all-reduce"};
  std::map<int, int> dp_per_stage;
  std::vector<std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<std::string> c = absl::StrSplit(line, ',');
    if (c.size() != 11 || c[0] == "dp_rank") continue;
    rows.push_back(c);
    int stage = std::stoi(c[1]);
    dp_per_stage[stage] = std::max(dp_per_stage[stage], std::stoi(c[0]) + 1);
  }
  // start_ts restarts at 0 every step, and only some steps were kept: lay the steps end to end.
  std::map<long, double> step_end;
  for (const auto& c : rows) {
    double start = 0, dur = 0;
    if (absl::SimpleAtod(c[5], &start) && absl::SimpleAtod(c[6], &dur)) {
      double& e = step_end[std::stol(c[3])];
      e = std::max(e, start + dur);
    }
  }
  std::map<long, double> step_offset;
  double t = 0;
  for (const auto& [step, end] : step_end) {
    step_offset[step] = t;
    t += end;
  }
  for (const auto& c : rows) {
    CollectiveObservation o;
    o.job = "trace";
    const int stage = std::stoi(c[1]);
    o.rank = std::stoi(c[0]);
    o.nranks = dp_per_stage[stage];
    o.global_rank = std::stoi(c[2]);
    o.host = "worker-" + c[2];
    double start = 0, dur = 0;
    if (!absl::SimpleAtod(c[5], &start) || !absl::SimpleAtod(c[6], &dur)) continue;
    start += step_offset[std::stol(c[3])];
    o.start_ns = static_cast<int64_t>(start * 1e9);
    o.stop_ns = static_cast<int64_t>((start + dur) * 1e9);
    o.clock_synchronized = true;
    o.function = c[4];
    if (collectives.count(c[4])) {
      o.comm_id = 1000 + stage;
      o.comm_name = "dp-stage-" + c[1];
      o.seq = std::stoull(c[3]) * 10000 + std::stoull(c[7]) * 10 + std::stoull(c[8]);
      out.push_back(o);
    } else if (c[4].find("send") != std::string::npos || c[4].find("recv") != std::string::npos) {
      o.peer = 0;
      out.push_back(o);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.stop_ns < b.stop_ns; });
  return out;
}

std::set<std::string> FlaggedRanks(const std::string& trace) {
  StragglerDetector d;
  std::vector<Finding> out;
  for (const auto& o : LoadTrace(testing::SharedDir() + "/data/straggler-analysis/" + trace)) {
    d.Observe(o, out);
  }
  std::set<std::string> ranks;
  for (const Finding& f : out) {
    if (f.kind == IncidentKind::kStraggler && f.active) ranks.insert(f.entity.at("rank"));
  }
  return ranks;
}

TEST(StragglerDetectorTest, PublishedTraceArBlamesRankZeroOnly) {
  EXPECT_EQ(FlaggedRanks("trace-AR.csv.gz"), std::set<std::string>{"0"});
}

TEST(StragglerDetectorTest, PublishedTraceStBlamesNoRank) {
  EXPECT_EQ(FlaggedRanks("trace-ST.csv.gz"), std::set<std::string>{});
}

TEST(StragglerDetectorTest, IncompleteInstancesExpire) {
  StragglerDetector d;
  std::vector<Finding> out;
  CollectiveObservation o;
  o.job = "j";
  o.nranks = 4;
  o.function = "AllReduce";
  o.start_ns = absl::ToUnixNanos(absl::FromUnixSeconds(1000));
  o.stop_ns = o.start_ns + 1000;
  d.Observe(o, out);
  d.Expire(absl::FromUnixSeconds(1000) + absl::Minutes(10));
  EXPECT_EQ(d.instances_expired(), 1u);
  EXPECT_EQ(d.instances_completed(), 0u);
}

}  // namespace
}  // namespace ringside::analysis
