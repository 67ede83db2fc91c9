#include "analysis/import/straggler_analysis_importer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "analysis/import/byte_source.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::analysis {
namespace {

using ringside::v1::CollectiveRecord;

std::string TracePath(const std::string& name) {
  return absl::StrCat(testing::SharedDir(), "/data/straggler-analysis/trace-", name, ".csv.gz");
}

absl::StatusOr<ImportResult> ImportBytes(std::string bytes, StragglerAnalysisOptions opt = {}) {
  StringSource src(std::move(bytes));
  return ImportStragglerAnalysis(src, opt);
}

absl::StatusOr<ImportResult> ImportTrace(const std::string& name, bool p2p = false) {
  std::string bytes = testing::ReadFileOrEmpty(TracePath(name));
  EXPECT_FALSE(bytes.empty()) << TracePath(name);
  StragglerAnalysisOptions opt;
  opt.source_name = TracePath(name);
  opt.include_p2p = p2p;
  return ImportBytes(std::move(bytes), opt);
}

// An independent reading of the raw file: zcat | awk, counting rows per (global rank, optype).
std::map<std::pair<std::string, std::string>, int64_t> AwkCounts(const std::string& path) {
  testing::RunResult r = testing::Run(
      {"/bin/sh", "-c",
       absl::StrCat(
           "zcat '", path,
           "' | awk -F, 'NR > 1 { n[$3 \" \" $5]++ } END { for (k in n) print k, n[k] }'")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<std::pair<std::string, std::string>, int64_t> out;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    EXPECT_EQ(f.size(), 3u) << line;
    if (f.size() != 3) continue;
    int64_t n = 0;
    EXPECT_TRUE(absl::SimpleAtoi(f[2], &n));
    out[{f[0], f[1]}] = n;
  }
  return out;
}

// The source optype a record stands for, from its communicator and function.
std::string SourceType(const CollectiveRecord& r) {
  if (absl::StartsWith(r.comm_name(), "dp-stage")) {
    return r.function() == "ReduceScatter" ? "grads-reduce-scatter" : "params-all-gather";
  }
  if (absl::StartsWith(r.comm_name(), "embedding-dp")) return "embedding-grads-all-reduce";
  if (absl::StartsWith(r.comm_name(), "tp-rank")) return "layernorm-grads-all-reduce";
  return "?";
}

// "rank12-dp3-stage0" → "12".
std::string GlobalRank(const CollectiveRecord& r) {
  std::string h = r.host();
  return h.substr(4, h.find('-') - 4);
}

class StragglerAnalysisImporterTest : public ::testing::Test {};

void ExpectCountsMatchRawFile(const std::string& name, size_t workers) {
  absl::StatusOr<ImportResult> res = ImportTrace(name);
  ASSERT_TRUE(res.ok()) << res.status();
  std::map<std::pair<std::string, std::string>, int64_t> raw = AwkCounts(TracePath(name));
  ASSERT_FALSE(raw.empty());

  std::map<std::pair<std::string, std::string>, int64_t> got;
  std::set<std::string> hosts;
  for (const CollectiveRecord& r : res->records) {
    ++got[{GlobalRank(r), SourceType(r)}];
    hosts.insert(r.host());
    EXPECT_EQ(r.job_id(), absl::StrCat("trace-", name));
    EXPECT_TRUE(r.clock_synchronized());
    EXPECT_GT(r.kernel_stop_unix_nanos(), 0);
    EXPECT_GE(r.kernel_stop_unix_nanos(), r.kernel_start_unix_nanos());
  }
  EXPECT_EQ(hosts.size(), workers);
  ASSERT_EQ(res->extras.size(), res->records.size());
  for (size_t i = 0; i < res->records.size(); ++i) {
    EXPECT_EQ(absl::StrCat(res->extras[i].global_rank), GlobalRank(res->records[i]));
    EXPECT_EQ(res->extras[i].peer, -1);
  }
  std::set<std::string> ranks_in_raw;
  int64_t collective_rows = 0, all_rows = 0;
  for (const auto& [key, n] : raw) {
    ranks_in_raw.insert(key.first);
    all_rows += n;
    const std::string& optype = key.second;
    if (optype == "grads-reduce-scatter" || optype == "params-all-gather" ||
        optype == "embedding-grads-all-reduce" || optype == "layernorm-grads-all-reduce") {
      collective_rows += n;
      EXPECT_EQ(got[key], n) << "rank " << key.first << " " << optype;
    }
  }
  EXPECT_EQ(ranks_in_raw.size(), workers);
  EXPECT_EQ(static_cast<int64_t>(res->records.size()), collective_rows);
  EXPECT_EQ(res->stats.rows, all_rows);
  EXPECT_EQ(res->stats.records, collective_rows);
  EXPECT_EQ(res->stats.malformed, 0);
  for (const auto& [key, n] : got) EXPECT_EQ(raw[key], n) << key.first << " " << key.second;
}

TEST_F(StragglerAnalysisImporterTest, TraceArHasAllSixteenWorkersAndEveryCollectiveRow) {
  ExpectCountsMatchRawFile("AR", 16);
}

TEST_F(StragglerAnalysisImporterTest, TraceStHasAllEightWorkersAndEveryCollectiveRow) {
  ExpectCountsMatchRawFile("ST", 8);
}

// A collective ends at the same moment on all its members: if the importer put the right workers
// into one communicator, each instance is complete and its kernel stops agree.
void ExpectInstancesCompleteAndAligned(const std::string& name) {
  absl::StatusOr<ImportResult> res = ImportTrace(name);
  ASSERT_TRUE(res.ok()) << res.status();
  struct Instance {
    uint32_t nranks = 0;
    std::set<uint32_t> ranks;
    int64_t min_stop = INT64_MAX, max_stop = 0;
  };
  std::map<std::tuple<uint64_t, std::string, uint64_t>, Instance> inst;
  for (const CollectiveRecord& r : res->records) {
    if (absl::StartsWith(r.comm_name(), "tp-")) continue;  // one member of each TP group is seen
    Instance& i = inst[{r.comm_id(), r.function(), r.seq()}];
    i.nranks = r.nranks();
    EXPECT_TRUE(i.ranks.insert(r.rank()).second) << "duplicate rank in " << r.comm_name();
    i.min_stop = std::min(i.min_stop, r.kernel_stop_unix_nanos());
    i.max_stop = std::max(i.max_stop, r.kernel_stop_unix_nanos());
  }
  ASSERT_FALSE(inst.empty());
  for (const auto& [key, i] : inst) {
    EXPECT_EQ(i.ranks.size(), i.nranks) << std::get<1>(key) << " seq " << std::get<2>(key);
    EXPECT_LT(i.max_stop - i.min_stop, 5'000'000)
        << std::get<1>(key) << " seq " << std::get<2>(key);
  }
}

TEST_F(StragglerAnalysisImporterTest, TraceArInstancesAreCompleteAndEndTogether) {
  ExpectInstancesCompleteAndAligned("AR");
}

TEST_F(StragglerAnalysisImporterTest, TraceStInstancesAreCompleteAndEndTogether) {
  ExpectInstancesCompleteAndAligned("ST");
}

TEST_F(StragglerAnalysisImporterTest, CommunicatorsFollowTheJobLayout) {
  absl::StatusOr<ImportResult> res = ImportTrace("AR");
  ASSERT_TRUE(res.ok()) << res.status();
  std::map<std::string, std::set<std::string>> members;
  std::map<std::string, uint32_t> nranks;
  for (const CollectiveRecord& r : res->records) {
    members[r.comm_name()].insert(r.host());
    nranks[r.comm_name()] = r.nranks();
  }
  // DP4 x PP4 x TP4: four data-parallel peers per stage, the embedding group of each dp_rank is
  // its first and last stage, the layernorm all-reduce is on the TP group (one member seen).
  EXPECT_EQ(members["dp-stage0"], (std::set<std::string>{"rank0-dp0-stage0", "rank4-dp1-stage0",
                                                         "rank8-dp2-stage0", "rank12-dp3-stage0"}));
  EXPECT_EQ(nranks["dp-stage0"], 4u);
  EXPECT_EQ(members["embedding-dp0"],
            (std::set<std::string>{"rank0-dp0-stage0", "rank48-dp0-stage3"}));
  EXPECT_EQ(nranks["embedding-dp0"], 2u);
  EXPECT_EQ(members["tp-rank16"], (std::set<std::string>{"rank16-dp0-stage1"}));
  EXPECT_EQ(nranks["tp-rank16"], 4u);
  EXPECT_EQ(members.size(), 4u + 4u + 16u);
}

// The step layout and the time line, checked against the raw row for rank 0's reduce-scatter of
// step 21 (read with awk) and the longest step (stride = ceil of the latest end).
TEST_F(StragglerAnalysisImporterTest, TimesAreTheStepPlacedOnOneTimeLine) {
  testing::RunResult raw = testing::Run(
      {"/bin/sh", "-c",
       absl::StrCat("zcat '", TracePath("AR"),
                    "' | awk -F, 'NR > 1 { e = $6 + $7; if (e > m) m = e } "
                    "$3 == 0 && $4 == 21 && $5 == \"grads-reduce-scatter\" { s = $6; d = $7 } "
                    "END { printf \"%.9f %.9f %.9f\\n\", m, s, d }'")});
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  std::vector<std::string> f = absl::StrSplit(absl::StripAsciiWhitespace(raw.out), ' ');
  ASSERT_EQ(f.size(), 3u) << raw.out;
  double max_end = 0, start = 0, dur = 0;
  ASSERT_TRUE(absl::SimpleAtod(f[0], &max_end));
  ASSERT_TRUE(absl::SimpleAtod(f[1], &start));
  ASSERT_TRUE(absl::SimpleAtod(f[2], &dur));
  const double stride = std::ceil(max_end);

  absl::StatusOr<ImportResult> res = ImportTrace("AR");
  ASSERT_TRUE(res.ok()) << res.status();
  const CollectiveRecord* found = nullptr;
  for (const CollectiveRecord& r : res->records) {
    if (r.host() == "rank0-dp0-stage0" && r.function() == "ReduceScatter" && r.seq() == 21) {
      found = &r;
    }
  }
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->comm_name(), "dp-stage0");
  EXPECT_EQ(found->rank(), 0u);
  // Step 21 is the second recorded step (16, 21, 27, ...): placed at 1 x stride.
  EXPECT_NEAR(static_cast<double>(found->kernel_start_unix_nanos()), (1 * stride + start) * 1e9,
              2000);
  EXPECT_NEAR(
      static_cast<double>(found->kernel_stop_unix_nanos() - found->kernel_start_unix_nanos()),
      dur * 1e9, 2000);
  EXPECT_EQ(found->enqueue_unix_nanos(), 0);  // not in the trace
  EXPECT_EQ(found->bytes(), 0u);              // not in the trace
  EXPECT_EQ(found->comm_id(), ImportedCommId("trace-AR", "dp-stage0"));
}

// What issue #6 relies on: in trace AR the slowed worker (rank 0) reaches every reduce-scatter of
// its data-parallel group last, so it waits least (shortest kernel time) in all 44 instances.
TEST_F(StragglerAnalysisImporterTest, TraceArRankZeroWaitsLeastInItsStage) {
  absl::StatusOr<ImportResult> res = ImportTrace("AR");
  ASSERT_TRUE(res.ok()) << res.status();
  std::map<uint64_t, std::pair<int64_t, std::string>> shortest;  // seq → (duration, host)
  for (const CollectiveRecord& r : res->records) {
    if (r.comm_name() != "dp-stage0" || r.function() != "ReduceScatter") continue;
    int64_t d = r.kernel_stop_unix_nanos() - r.kernel_start_unix_nanos();
    auto it = shortest.find(r.seq());
    if (it == shortest.end() || d < it->second.first) shortest[r.seq()] = {d, r.host()};
  }
  ASSERT_EQ(shortest.size(), 44u);
  for (const auto& [seq, v] : shortest) EXPECT_EQ(v.second, "rank0-dp0-stage0") << "step " << seq;
}

TEST_F(StragglerAnalysisImporterTest, PointToPointPairsSendWithRecv) {
  absl::StatusOr<ImportResult> res = ImportTrace("ST", /*p2p=*/true);
  ASSERT_TRUE(res.ok()) << res.status();
  std::map<std::pair<uint64_t, uint64_t>, std::vector<const CollectiveRecord*>> transfers;
  int64_t sends = 0, recvs = 0;
  ASSERT_EQ(res->extras.size(), res->records.size());
  for (size_t i = 0; i < res->records.size(); ++i) {
    const CollectiveRecord& r = res->records[i];
    if (r.function() != "Send" && r.function() != "Recv") continue;
    (r.function() == "Send" ? sends : recvs)++;
    EXPECT_EQ(r.nranks(), 2u);
    EXPECT_EQ(res->extras[i].peer, 1 - static_cast<int32_t>(r.rank()));
    transfers[{r.comm_id(), r.seq()}].push_back(&r);
  }
  EXPECT_EQ(sends,
            res->stats.rows_by_type["forward-send"] + res->stats.rows_by_type["backward-send"]);
  EXPECT_EQ(recvs,
            res->stats.rows_by_type["forward-recv"] + res->stats.rows_by_type["backward-recv"]);
  ASSERT_FALSE(transfers.empty());
  for (const auto& [key, recs] : transfers) {
    ASSERT_EQ(recs.size(), 2u);
    EXPECT_NE(recs[0]->function(), recs[1]->function());
    EXPECT_NE(recs[0]->rank(), recs[1]->rank());
    EXPECT_LT(std::abs(recs[0]->kernel_stop_unix_nanos() - recs[1]->kernel_stop_unix_nanos()),
              1'000'000);
  }
}

constexpr const char* kHeader =
    "dp_rank,stage,rank,step,optype,start_ts,duration,seq_id,mc,mb_id,gmc\n";

std::string SmallTrace() {
  return absl::StrCat(kHeader, "0,0,0,5,grads-reduce-scatter,1.5,0.25,0,0,-1,-1\n",
                      "1,0,1,5,grads-reduce-scatter,1.0,0.75,0,0,-1,-1\n",
                      "0,0,0,5,forward-compute,0.1,0.5,0,0,0,0\n");
}

TEST_F(StragglerAnalysisImporterTest, PlainCsvWithCrLfAndAnyColumnOrder) {
  std::string csv =
      "optype,duration,start_ts,seq_id,step,rank,stage,dp_rank,extra\r\n"
      "params-all-gather,0.5,0.25,0,3,0,0,0,x\r\n"
      "params-all-gather,0.5,0.25,0,3,1,0,1,x\r\n";
  StragglerAnalysisOptions opt;
  opt.job_id = "job-7";
  absl::StatusOr<ImportResult> res = ImportBytes(csv, opt);
  ASSERT_TRUE(res.ok()) << res.status();
  ASSERT_EQ(res->records.size(), 2u);
  EXPECT_EQ(res->records[0].job_id(), "job-7");
  EXPECT_EQ(res->records[0].function(), "AllGather");
  EXPECT_EQ(res->records[0].nranks(), 2u);
  EXPECT_EQ(res->records[0].seq(), 3u);
}

TEST_F(StragglerAnalysisImporterTest, BadLineFailsWithItsLineNumber) {
  std::string csv = absl::StrCat(kHeader, "0,0,0,5,grads-reduce-scatter,1.5,0.25,0,0,-1,-1\n",
                                 "1,0,1,5,grads-reduce-scatter,1.0\n");
  StragglerAnalysisOptions opt;
  opt.source_name = "t.csv";
  absl::StatusOr<ImportResult> res = ImportBytes(csv, opt);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(res.status().message(), "t.csv:3:")) << res.status();
  EXPECT_TRUE(absl::StrContains(res.status().message(), "6 fields where the header has 11"))
      << res.status();
}

TEST_F(StragglerAnalysisImporterTest, BadNumbersAreNamed) {
  struct Case {
    std::string row, needle;
  };
  for (const Case& c : std::vector<Case>{
           {"0,0,0,5,gc,abc,0.1,0,0,-1,-1", "start_ts \"abc\""},
           {"0,0,0,5,gc,0.1,-2,0,0,-1,-1", "duration \"-2\""},
           {"0,0,0,5,gc,0.1,nan,0,0,-1,-1", "duration \"nan\""},
           {"x,0,0,5,gc,0.1,0.1,0,0,-1,-1", "dp_rank \"x\""},
           {"0,0,0,-5,gc,0.1,0.1,0,0,-1,-1", "step \"-5\""},
           {"0,0,0,5,,0.1,0.1,0,0,-1,-1", "empty optype"},
       }) {
    absl::StatusOr<ImportResult> res = ImportBytes(absl::StrCat(kHeader, c.row, "\n"));
    ASSERT_FALSE(res.ok()) << c.row;
    EXPECT_TRUE(absl::StrContains(res.status().message(), ":2: " + c.needle)) << res.status();
  }
}

TEST_F(StragglerAnalysisImporterTest, ConflictingWorkerPositionIsMalformed) {
  absl::StatusOr<ImportResult> res = ImportBytes(
      absl::StrCat(kHeader, "0,0,0,5,gc,0.1,0.1,0,0,-1,-1\n", "1,0,0,5,gc,0.1,0.1,0,0,-1,-1\n"));
  ASSERT_FALSE(res.ok());
  EXPECT_TRUE(absl::StrContains(res.status().message(), "on line 2")) << res.status();
}

TEST_F(StragglerAnalysisImporterTest, SkipMalformedCountsAndKeepsTheRest) {
  std::string csv = absl::StrCat(SmallTrace(), "garbage\n", "0,0,0,6,gc,zz,0.1,0,0,-1,-1\n");
  StragglerAnalysisOptions opt;
  opt.skip_malformed = true;
  opt.source_name = "t.csv";
  absl::StatusOr<ImportResult> res = ImportBytes(csv, opt);
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->records.size(), 2u);
  EXPECT_EQ(res->stats.malformed, 2);
  ASSERT_EQ(res->stats.malformed_examples.size(), 2u);
  EXPECT_TRUE(absl::StartsWith(res->stats.malformed_examples[0], "t.csv:5: "))
      << res->stats.malformed_examples[0];
  EXPECT_TRUE(absl::StartsWith(res->stats.malformed_examples[1], "t.csv:6: start_ts"));
  EXPECT_EQ(res->stats.skipped["not a communication (forward-compute)"], 1);
}

TEST_F(StragglerAnalysisImporterTest, WrongColumnsAreRefused) {
  absl::StatusOr<ImportResult> res =
      ImportBytes("dp_rank,stage,rank,step,optype,duration,seq_id\n0,0,0,1,gc,1,0\n");
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(res.status().message(), "missing column(s) start_ts"))
      << res.status();

  res = ImportBytes("");
  ASSERT_FALSE(res.ok());
  EXPECT_TRUE(absl::StrContains(res.status().message(), "empty input")) << res.status();

  // A Flight Recorder dump given as a CSV trace.
  res = ImportBytes(testing::ReadFileOrEmpty(
      absl::StrCat(RINGSIDE_SOURCE_DIR, "/tests/data/flight_recorder/nccl_trace_rank_0.json")));
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StragglerAnalysisImporterTest, TruncatedGzipIsDataLoss) {
  std::string gz = testing::ReadFileOrEmpty(TracePath("ST"));
  ASSERT_GT(gz.size(), 1000u);
  for (size_t cut : {gz.size() / 2, gz.size() - 4, size_t{20}}) {
    absl::StatusOr<ImportResult> res = ImportBytes(gz.substr(0, cut));
    ASSERT_FALSE(res.ok()) << "cut at " << cut;
    EXPECT_EQ(res.status().code(), absl::StatusCode::kDataLoss) << res.status();
    EXPECT_TRUE(absl::StrContains(res.status().message(), "truncated")) << res.status();
  }
}

TEST_F(StragglerAnalysisImporterTest, CorruptGzipIsAnErrorNeverACrash) {
  std::string gz = testing::ReadFileOrEmpty(TracePath("ST"));
  ASSERT_GT(gz.size(), 1000u);
  int failures = 0;
  for (size_t pos = 30; pos < gz.size(); pos += gz.size() / 25) {
    std::string bad = gz;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x5a);
    absl::StatusOr<ImportResult> res = ImportBytes(std::move(bad));
    if (!res.ok()) ++failures;
  }
  EXPECT_GT(failures, 20);  // a flipped byte is caught by inflate or the CRC almost always
}

TEST_F(StragglerAnalysisImporterTest, EveryTruncationOfAPlainTraceIsHandled) {
  std::string csv = SmallTrace();
  for (size_t cut = 0; cut <= csv.size(); ++cut) {
    absl::StatusOr<ImportResult> res = ImportBytes(csv.substr(0, cut));
    if (res.ok()) {
      EXPECT_LE(res->records.size(), 2u);
    }
  }
}

class FailingSource : public ByteSource {
 public:
  explicit FailingSource(std::string first) : first_(std::move(first)) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    if (done_) return absl::UnavailableError("disk on fire");
    done_ = true;
    size_t k = std::min(n, first_.size());
    std::copy(first_.begin(), first_.begin() + static_cast<long>(k), buf);
    return k;
  }

 private:
  std::string first_;
  bool done_ = false;
};

TEST_F(StragglerAnalysisImporterTest, ReadErrorsPassThrough) {
  FailingSource src(absl::StrCat(kHeader, "0,0,0,5,gc,0.1,0.1,0,0,-1,-1\n"));
  StragglerAnalysisOptions opt;
  opt.source_name = "f.csv";
  absl::StatusOr<ImportResult> res = ImportStragglerAnalysis(src, opt);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(res.status().message(), "f.csv: after line 2: disk on fire"))
      << res.status();
}

TEST_F(StragglerAnalysisImporterTest, BinaryInputIsRefused) {
  std::string junk(3 << 20, '\x01');
  absl::StatusOr<ImportResult> res = ImportBytes(junk);
  ASSERT_FALSE(res.ok());
  EXPECT_TRUE(absl::StrContains(res.status().message(), "longer than")) << res.status();
}

TEST_F(StragglerAnalysisImporterTest, JobIdFromFileName) {
  EXPECT_EQ(JobIdFromFileName("/x/y/trace-AR.csv.gz"), "trace-AR");
  EXPECT_EQ(JobIdFromFileName("trace.CSV"), "trace");
  EXPECT_EQ(JobIdFromFileName("a.b"), "a.b");
  EXPECT_EQ(JobIdFromFileName(".csv"), ".csv");
}

}  // namespace
}  // namespace ringside::analysis
