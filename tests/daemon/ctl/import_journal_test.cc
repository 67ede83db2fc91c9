// `ringside import-trace --format=ringside-journal --analyze`: the aggregator's straggler detector
// replayed over what `ringside-aggregator --dump-journal` printed. On the real H200 journal (four
// ranks time-sharing one GPU, rank 1 held back on its host in seq 300-599) and on synthetic
// journals made the same way for what that one does not show: a rank held back on a shared GPU,
// a rank late on its host that does not slow the job, and ranks on two nodes with and without a
// clock bound.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ringside/v1/ingest.pb.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

using nlohmann::json;

constexpr int64_t kMs = 1'000'000;

std::string Ringside() { return testing::BinaryPath("daemon/ringside"); }
std::string RealJournal() {
  return absl::StrCat(RINGSIDE_SOURCE_DIR,
                      "/tests/data/real-nccl/h200-4ranks-nccl2.28.9-hostlate.jsonl.gz");
}

std::string ProtoJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  std::string out;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(m, &out, o).ok());
  return out;
}

// One --dump-journal line for a record (clock: the batch's ClockBound JSON, or "").
std::string Line(const v1::CollectiveRecord& r, const std::string& node, uint64_t seq,
                 const std::string& clock = "") {
  return absl::StrCat("{\"kind\":\"collective\",\"node\":\"", node,
                      "\",\"agent_epoch\":\"7\",\"seq\":", seq, ",\"received_unix_nanos\":0",
                      clock.empty() ? "" : absl::StrCat(",\"clock\":", clock),
                      ",\"record\":", ProtoJson(r), "}\n");
}

v1::CollectiveRecord Record(const std::string& job, int rank, int nranks, uint64_t seq,
                            int64_t enqueue, int64_t start, int64_t stop, const std::string& host) {
  v1::CollectiveRecord r;
  r.set_job_id(job);
  r.set_comm_id(0x5eed);
  r.set_rank(rank);
  r.set_nranks(nranks);
  r.set_function("AllReduce");
  r.set_seq(seq);
  r.set_bytes(1 << 20);
  r.set_algorithm("RING");
  r.set_protocol("SIMPLE");
  r.set_channels(2);
  r.set_enqueue_unix_nanos(enqueue);
  r.set_kernel_start_unix_nanos(start);
  r.set_kernel_stop_unix_nanos(stop);
  r.set_pid(1000 + rank);
  r.set_host(host);
  r.set_clock_synchronized(false);
  r.set_cuda_device(0);
  r.set_pod(absl::StrCat("trainer-", rank));
  r.set_pod_namespace("ml");
  return r;
}

// Six ranks time-sharing one GPU, as the test bed runs them (one process each, NCCL_HOSTID): the
// GPU gives each process with work a time slice in turn; a started collective kernel spins, and so
// takes its slices, until every rank's kernel has started; the turn order alternates between two
// rotations from step to step, as on the real H200 (tests/data/real-nccl: ranks 1 and 3 last in
// turn). Phases by step: 0-199 nobody held back; 200-399 rank 4 has 12 ms of its own GPU work
// before each collective (enqueued on time, its kernel starts late); 400-599 nobody; 600-799 rank 2
// sleeps 4 ms on its host before each step: its kernel still starts in the turn it would have had,
// so the job is no slower; 800-999 nobody.
std::string SharedGpuJournal() {
  constexpr int kRanks = 6;
  constexpr int64_t kSlice = 2'250'000;
  constexpr int64_t kTransfer = 10 * kMs;
  std::mt19937_64 rng(27);
  std::uniform_int_distribution<int64_t> jitter(0, 800'000);
  std::string out;
  int64_t t0 = 1'795'890'853'000'000'000;
  uint64_t line = 1;
  for (uint64_t step = 0; step < 1000; ++step) {
    std::vector<int64_t> enq(kRanks), extra(kRanks, 0), start(kRanks, -1);
    for (int r = 0; r < kRanks; ++r) {
      enq[r] = t0 + jitter(rng) + (step >= 600 && step < 800 && r == 2 ? 4 * kMs : 0);
    }
    if (step >= 200 && step < 400) extra[4] = 12 * kMs;
    int64_t t = t0 + 500'000;
    int ptr = step % 2 == 0 ? 0 : 3;
    int started = 0;
    while (started < kRanks) {
      int pick = -1;
      for (int i = 0; i < kRanks && pick < 0; ++i) {
        if (enq[(ptr + i) % kRanks] <= t) pick = (ptr + i) % kRanks;
      }
      if (pick < 0) {  // nobody has work: the GPU idles until the next enqueue
        int64_t next = INT64_MAX;
        for (int r = 0; r < kRanks; ++r) {
          if (enq[r] > t) next = std::min(next, enq[r]);
        }
        t = next;
        continue;
      }
      if (extra[pick] > 0) {
        const int64_t run = std::min(kSlice, extra[pick]);
        extra[pick] -= run;
        t += run;
      } else {
        if (start[pick] < 0) {
          start[pick] = t;
          ++started;
        }
        t += kSlice;
      }
      ptr = (pick + 1) % kRanks;
    }
    const int64_t done = *std::max_element(start.begin(), start.end()) + kTransfer;
    for (int r = 0; r < kRanks; ++r) {
      out += Line(Record("held-out", r, kRanks, step, enq[r], start[r], done + (r * 37 % 5) * 100'000,
                         "gpu0"),
                  "gpu0", line++);
    }
    t0 = done + 2 * kMs;
  }
  return out;
}

// Four ranks on two nodes, a GPU each; rank 1 sleeps 10 ms on its host before every step from
// step 100. With `clock` (the nodes' ClockBound) enqueue times may be compared across the nodes.
std::string TwoNodeJournal(const std::string& clock) {
  std::string out;
  int64_t t0 = 1'795'890'853'000'000'000;
  uint64_t line = 1;
  for (uint64_t step = 0; step < 200; ++step) {
    const int64_t late = step >= 100 ? 10 * kMs : 0;
    const int64_t arrive_last = t0 + 30 * kMs + late;  // rank 1 ran 30 ms of compute after enqueue
    const int64_t done = arrive_last + 5 * kMs;
    for (int r = 0; r < 4; ++r) {
      const int64_t enq = t0 + (r == 1 ? late : 0) + r * 100'000;
      const int64_t start = r == 1 ? arrive_last : t0 + 30 * kMs + r * 200'000;
      const std::string node = absl::StrCat("node-", r / 2);
      v1::CollectiveRecord rec = Record("two-nodes", r, 4, step, enq, start, done, node);
      rec.set_cuda_device(r % 2);
      out += Line(rec, node, line++, clock);
    }
    t0 = done + kMs;
  }
  return out;
}

class ImportJournalTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content) {
    std::string path = absl::StrCat(tmp_.path(), "/", name);
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  json Analyze(const std::string& path) {
    testing::RunResult r = testing::Run({Ringside(), "import-trace", "--format=ringside-journal",
                                         "--analyze", "-o", "json", path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_array()) << r.out;
    return j.is_array() ? j : json::array();
  }
  testing::TempDir tmp_;
};

TEST_F(ImportJournalTest, RealH200JournalFlagsTheHostHeldRankAndNothingElse) {
  const json incidents = Analyze(RealJournal());
  ASSERT_EQ(incidents.size(), 1u) << incidents.dump(1);
  const json& inc = incidents[0];
  EXPECT_EQ(inc["kind"], "straggler");
  EXPECT_EQ(inc["rank"], 1);
  EXPECT_EQ(inc["where"], "host");
  EXPECT_EQ(inc["cause"], "host");
  EXPECT_EQ(inc["entity"]["pod"], "trainer-1");
  // Rank 1 sleeps on its host from seq 300 to 599: flagged within a few steps of its slowdown
  // (12 of the 20-instance window must be late), resolved within a window of its end.
  EXPECT_GE(inc["opened_seq"].get<int64_t>(), 300);
  EXPECT_LE(inc["opened_seq"].get<int64_t>(), 315);
  ASSERT_TRUE(inc["resolved_seq"].is_number()) << inc.dump();
  EXPECT_GE(inc["resolved_seq"].get<int64_t>(), 600);
  EXPECT_LE(inc["resolved_seq"].get<int64_t>(), 625);
  EXPECT_NEAR(inc["evidence"]["host_lateness_ms"].get<double>(), 10, 1);
  EXPECT_EQ(inc["evidence"]["gpu_sharing_ranks"], 4);
}

// Two more real journals, made by scripts/gpu-check.sh on an H200 (tests/data/real-nccl/README.md).
// 4 ranks, 200 steps a phase: rank 1 sleeps 10 ms on the host in seq 200-399, rank 2 queues four
// 8192^2 bf16 matmuls before its all_reduce in seq 600-799. 6 ranks, 100 steps a phase: the same
// in seq 100-199 (rank 1; six contexts on one GPU absorb its 10 ms: the job does not slow) and
// 300-399 (rank 2: the job slows from 70 to 86 ms a step).
TEST_F(ImportJournalTest, RealH200JournalsJudgeTheHostAndTheGpuHeldRanks) {
  const std::string dir = absl::StrCat(RINGSIDE_SOURCE_DIR, "/tests/data/real-nccl/");
  const json four = Analyze(dir + "h200-4ranks-nccl2.28.9-hostlate-gpulate.jsonl.gz");
  ASSERT_EQ(four.size(), 2u) << four.dump(1);
  for (const json& inc : four) {
    ASSERT_TRUE(inc["resolved_seq"].is_number()) << inc.dump();
    const bool host = inc["rank"] == 1;
    EXPECT_EQ(inc["rank"], host ? 1 : 2);
    EXPECT_EQ(inc["where"], host ? "host" : "gpu");
    const int64_t start = host ? 200 : 600;
    EXPECT_GE(inc["opened_seq"].get<int64_t>(), start);
    EXPECT_LE(inc["opened_seq"].get<int64_t>(), start + 15);
    EXPECT_GE(inc["resolved_seq"].get<int64_t>(), start + 200);
    EXPECT_LE(inc["resolved_seq"].get<int64_t>(), start + 225);
  }
  // Six ranks: the GPU-held rank, as gpu; the host-late rank that did not hold the job back, and
  // the ranks never held back, not at all.
  const json six = Analyze(dir + "h200-6ranks-nccl2.28.9-gpulate.jsonl.gz");
  ASSERT_EQ(six.size(), 1u) << six.dump(1);
  EXPECT_EQ(six[0]["rank"], 2);
  EXPECT_EQ(six[0]["where"], "gpu");
  EXPECT_GE(six[0]["opened_seq"].get<int64_t>(), 300);
  EXPECT_LE(six[0]["opened_seq"].get<int64_t>(), 315);
  ASSERT_TRUE(six[0]["resolved_seq"].is_number()) << six[0].dump();
  EXPECT_LE(six[0]["resolved_seq"].get<int64_t>(), 425);
}

// The same replay without the GPU-sharing rule is what main did live: rank 1 (scheduled after the
// others on the shared GPU in every other instance) stays open after its slowdown ended.
TEST_F(ImportJournalTest, WithoutTheSharingRuleTheRealJournalKeepsRankOneOpen) {
  testing::RunResult r = testing::Run({Ringside(), "import-trace", "--format=ringside-journal",
                                       "--analyze", "-o", "json",
                                       "--detect-set=straggler.gpu_sharing=false", RealJournal()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json incidents = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(incidents.is_array()) << r.out;
  bool open_rank1 = false;
  for (const json& i : incidents) open_rank1 |= i["rank"] == 1 && i["resolved_seq"].is_null();
  EXPECT_TRUE(open_rank1) << r.out;
  r = testing::Run({Ringside(), "import-trace", "--format=ringside-journal",
                    "--detect-set=straggler.nope=1", "--analyze", RealJournal()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "straggler.nope")) << r.err;
}

TEST_F(ImportJournalTest, TableSaysWhereAndWhen) {
  testing::RunResult r = testing::Run(
      {Ringside(), "import-trace", "--format=ringside-journal", "--analyze", RealJournal()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "WHERE")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "straggler     critical  host")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "late on the host")) << r.out;
}

TEST_F(ImportJournalTest, SharedGpuRankHeldBackOnTheGpuIsGpuLateAndNoOneElseIsFlagged) {
  const json incidents = Analyze(Write("held-out.jsonl", SharedGpuJournal()));
  ASSERT_EQ(incidents.size(), 1u) << incidents.dump(1);
  const json& inc = incidents[0];
  EXPECT_EQ(inc["kind"], "straggler");
  EXPECT_EQ(inc["rank"], 4);
  EXPECT_EQ(inc["where"], "gpu");
  EXPECT_GE(inc["opened_seq"].get<int64_t>(), 200);
  EXPECT_LE(inc["opened_seq"].get<int64_t>(), 220);
  ASSERT_TRUE(inc["resolved_seq"].is_number()) << inc.dump();
  EXPECT_GE(inc["resolved_seq"].get<int64_t>(), 400);
  EXPECT_LE(inc["resolved_seq"].get<int64_t>(), 425);
  EXPECT_LT(inc["evidence"]["host_lateness_ms"].get<double>(), 1);
}

TEST_F(ImportJournalTest, EnqueueTimesAcrossNodesNeedTheNodesClockBound) {
  // Both nodes' agents said: synchronised, 50 µs maximum error.
  const std::string clock =
      R"({"synchronized":true,"max_error_nanos":"50000","est_error_nanos":"2000"})";
  json incidents = Analyze(Write("bounded.jsonl", TwoNodeJournal(clock)));
  ASSERT_EQ(incidents.size(), 1u) << incidents.dump(1);
  EXPECT_EQ(incidents[0]["rank"], 1);
  EXPECT_EQ(incidents[0]["where"], "host");
  // Older agents (no bound), or a clock the kernel calls unsynchronised: the same rank, but where
  // its lateness is cannot be told.
  for (const std::string& c :
       {std::string(), std::string(R"({"synchronized":false,"max_error_nanos":"50000"})")}) {
    incidents = Analyze(Write("unbounded.jsonl", TwoNodeJournal(c)));
    ASSERT_EQ(incidents.size(), 1u) << incidents.dump(1);
    EXPECT_EQ(incidents[0]["rank"], 1);
    EXPECT_EQ(incidents[0]["where"], "unknown") << c;
  }
}

TEST_F(ImportJournalTest, RecordsComeBackAsTheAggregatorReceivedThem) {
  testing::RunResult r = testing::Run(
      {Ringside(), "import-trace", "--format=ringside-journal", "-o", "json", RealJournal()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t lines = std::count(r.out.begin(), r.out.end(), '\n');
  EXPECT_EQ(lines, 3604u);  // 4 ranks × 901 AllReduce (README)
  EXPECT_TRUE(absl::StrContains(r.out, "\"enqueue_unix_nanos\"")) << r.out.substr(0, 400);
  r = testing::Run({Ringside(), "import-trace", "--format=ringside-journal", RealJournal()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "gpu-long")) << r.out;
}

TEST_F(ImportJournalTest, MalformedLinesFailOrAreSkippedAndCounted) {
  const std::string good = TwoNodeJournal("");
  const std::string path = Write("bad.jsonl", good.substr(0, good.find('\n') + 1) +
                                                  "{\"kind\":\"collective\",\"record\":[1]}\n"
                                                  "not json\n" +
                                                  "{\"kind\":\"watermark\",\"node\":\"n\"}\n");
  testing::RunResult r =
      testing::Run({Ringside(), "import-trace", "--format=ringside-journal", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "bad.jsonl:2:")) << r.err;
  r = testing::Run(
      {Ringside(), "import-trace", "--format=ringside-journal", "--skip-malformed", path});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "skipped 2 malformed lines")) << r.err;
}

}  // namespace
}  // namespace ringside::daemon
