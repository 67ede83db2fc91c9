// The `ringside` binary end to end: real processes, real files, output and exit codes.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ringside/v1/ingest.pb.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

using testing::RunResult;

RunResult Exec(std::vector<std::string> argv, const std::string& stdin_text = "") {
  return testing::Run(std::move(argv), stdin_text);
}

std::string Ringside() { return testing::BinaryPath("daemon/ringside"); }
std::string Trace(const std::string& name) {
  return absl::StrCat(testing::SharedDir(), "/data/straggler-analysis/trace-", name, ".csv.gz");
}
std::string FrFixture(int rank) {
  return absl::StrCat(RINGSIDE_SOURCE_DIR, "/tests/data/flight_recorder/nccl_trace_rank_", rank,
                      ".json");
}

std::vector<std::string> Lines(const std::string& s) {
  return absl::StrSplit(s, '\n', absl::SkipEmpty());
}

class ImportTraceCliTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content) {
    std::string path = absl::StrCat(tmp_.path(), "/", name);
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  testing::TempDir tmp_;
};

TEST_F(ImportTraceCliTest, TopLevelHelpListsSubcommands) {
  RunResult r = Exec({Ringside(), "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "import-trace")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Exit codes: 0 ok, 1 problems found, 2 error")) << r.out;

  r = Exec({Ringside()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "Usage: ringside COMMAND")) << r.err;

  r = Exec({Ringside(), "frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "unknown command \"frobnicate\"")) << r.err;

  r = Exec({Ringside(), "--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(absl::StartsWith(r.out, "ringside ")) << r.out;
}

TEST_F(ImportTraceCliTest, SubcommandHelp) {
  for (std::vector<std::string> argv :
       {std::vector<std::string>{Ringside(), "import-trace", "--help"},
        std::vector<std::string>{Ringside(), "help", "import-trace"}}) {
    RunResult r = Exec(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (const char* needle : {"--format=FORMAT", "straggler-analysis", "flight-recorder",
                               "-o, --output", "--analyze", "--include-p2p", "--skip-malformed"}) {
      EXPECT_TRUE(absl::StrContains(r.out, needle)) << needle << "\n" << r.out;
    }
  }
}

// --analyze prints incidents instead of records: a table by default (the labelled traces are
// checked in tests/integration/analyze_trace_test.cc).
TEST_F(ImportTraceCliTest, AnalyzePrintsAnIncidentTable) {
  RunResult r = Exec({Ringside(), "import-trace", "--format=straggler-analysis", "--analyze",
                      Trace("AR")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "KIND")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "straggler")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "rank=0")) << r.out;
  RunResult st = Exec({Ringside(), "import-trace", "--format=straggler-analysis", "--analyze",
                       Trace("ST")});
  EXPECT_EQ(st.exit_code, 0) << st.err;
  EXPECT_EQ(st.out, "no incidents\n");
}

TEST_F(ImportTraceCliTest, UsageErrorsExitTwo) {
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  for (const Case& c : std::vector<Case>{
           {{"import-trace", Trace("AR")}, "--format is required"},
           {{"import-trace", "--format=parquet", Trace("AR")}, "unknown --format \"parquet\""},
           {{"import-trace", "--format=straggler-analysis", "-o", "xml", Trace("AR")},
            "unknown -o \"xml\""},
           {{"import-trace", "--format=straggler-analysis"}, "no FILE given"},
           {{"import-trace", "--format=straggler-analysis", "--bogus", Trace("AR")},
            "unknown flag --bogus"},
           {{"import-trace", "--format=straggler-analysis", "/nonexistent/t.csv"},
            "/nonexistent/t.csv: open: No such file"},
           {{"import-trace", "--format=straggler-analysis", "--rank=1", Trace("AR")},
            "--rank applies to --format=flight-recorder"},
       }) {
    std::vector<std::string> argv = {Ringside()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    RunResult r = Exec(argv);
    EXPECT_EQ(r.exit_code, 2) << c.needle;
    EXPECT_TRUE(absl::StrContains(r.err, c.needle)) << c.needle << "\n" << r.err;
  }
}

TEST_F(ImportTraceCliTest, TraceArSummary) {
  RunResult r = Exec({Ringside(), "import-trace", "--format=straggler-analysis", Trace("AR")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "117216 rows, 2464 collective records (job trace-AR)"))
      << r.out;
  int worker_lines = 0;
  for (const std::string& line : Lines(r.out)) {
    if (absl::StartsWith(line, "  rank") && absl::StrContains(line, "-stage")) ++worker_lines;
  }
  EXPECT_EQ(worker_lines, 16) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "dp-stage0")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "ReduceScatter  704")) << r.out;
}

TEST_F(ImportTraceCliTest, JsonLinesReadBackAsRecords) {
  RunResult r =
      Exec({Ringside(), "import-trace", "--format=straggler-analysis", "-o", "json", Trace("AR")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2464u);
  std::set<std::string> hosts;
  std::map<std::string, int> functions;
  for (const std::string& line : lines) {
    ringside::v1::CollectiveRecord rec;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &rec).ok()) << line;
    hosts.insert(rec.host());
    ++functions[rec.function()];
  }
  EXPECT_EQ(hosts.size(), 16u);
  EXPECT_EQ(functions["ReduceScatter"], 704);
  EXPECT_EQ(functions["AllGather"], 704);
  EXPECT_EQ(functions["AllReduce"], 352 + 704);
}

TEST_F(ImportTraceCliTest, CsvOfTraceSt) {
  RunResult r = Exec({Ringside(), "import-trace", "--format=straggler-analysis", "-o", "csv",
                      "--job-id=st", Trace("ST")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 1u + 256 + 256 + 128 + 256);
  EXPECT_TRUE(absl::StartsWith(lines[0], "job_id,comm_id,comm_name,rank,nranks,function,seq"));
  EXPECT_TRUE(absl::StartsWith(lines[1], "st,")) << lines[1];
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(lines[1], ',')).size(), 17u);
}

TEST_F(ImportTraceCliTest, TruncatedGzipExitsTwoWithAClearMessage) {
  std::string gz = testing::ReadFileOrEmpty(Trace("ST"));
  ASSERT_FALSE(gz.empty());
  std::string path = Write("cut.csv.gz", gz.substr(0, gz.size() / 2));
  RunResult r = Exec({Ringside(), "import-trace", "--format=straggler-analysis", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "cut.csv.gz")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "gzip stream truncated")) << r.err;
}

TEST_F(ImportTraceCliTest, MalformedRowsFailOrAreSkipped) {
  std::string path = Write("bad.csv",
                           "dp_rank,stage,rank,step,optype,start_ts,duration,seq_id\n"
                           "0,0,0,1,grads-reduce-scatter,0.5,0.25,0\n"
                           "1,0,1,1,grads-reduce-scatter,oops,0.25,0\n"
                           "1,0,1,2,grads-reduce-scatter,0.5,0.25,0\n");
  RunResult r = Exec({Ringside(), "import-trace", "--format=straggler-analysis", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "bad.csv:3: start_ts \"oops\"")) << r.err;

  r = Exec({Ringside(), "import-trace", "--format=straggler-analysis", "--skip-malformed", "-o",
            "json", path});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(Lines(r.out).size(), 2u) << r.out;
  EXPECT_TRUE(absl::StrContains(r.err, "skipped 1 malformed rows")) << r.err;
}

TEST_F(ImportTraceCliTest, StdinIsReadForDash) {
  RunResult r = Exec({Ringside(), "import-trace", "--format=straggler-analysis", "-o", "csv", "-"},
                     "dp_rank,stage,rank,step,optype,start_ts,duration,seq_id\n"
                     "0,0,0,1,params-all-gather,0.5,0.25,0\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(Lines(r.out).size(), 2u) << r.out;
  EXPECT_TRUE(absl::StartsWith(Lines(r.out)[1], "stdin,")) << r.out;
}

TEST_F(ImportTraceCliTest, FlightRecorderDumpsOfAHungJobExitOne) {
  RunResult r = Exec({Ringside(), "import-trace", "--format=flight-recorder", "-o", "json",
                      FrFixture(0), FrFixture(1)});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(Lines(r.out).size(), 10u) << r.out;
  EXPECT_TRUE(absl::StrContains(r.err, "2 collectives did not complete")) << r.err;

  r = Exec({Ringside(), "import-trace", "--format=flight-recorder", FrFixture(0), FrFixture(1)});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "timed out (retired while started)")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "0:default_pg")) << r.out;

  // A dump whose collectives all completed imports cleanly: exit 0.
  std::string clean = Write("trace_rank_3.json", R"({"version": "2.4",
      "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[2, 3]"}},
      "entries": [{"process_group": ["0", "default_pg"], "collective_seq_id": 1,
                   "profiling_name": "nccl:all_reduce", "time_created_ns": 1000,
                   "duration_ms": 1.5, "state": "completed", "retired": true}]})");
  r = Exec(
      {Ringside(), "import-trace", "--format=flight-recorder", "-o", "csv", "--job-id=j9", clean});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(Lines(r.out).size(), 2u) << r.out;
  EXPECT_TRUE(absl::StartsWith(Lines(r.out)[1], "j9,")) << r.out;
  EXPECT_TRUE(absl::StrContains(Lines(r.out)[1], ",0:default_pg,1,2,AllReduce,1,")) << r.out;
  EXPECT_TRUE(absl::StrContains(Lines(r.out)[1], ",1000,1501000,1000,0,rank3,false")) << r.out;

  std::string pickle = Write("nccl_trace_rank_4", std::string("\x80\x04\x95 pickle", 10));
  r = Exec({Ringside(), "import-trace", "--format=flight-recorder", pickle});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "Python pickle")) << r.err;
}

}  // namespace
}  // namespace ringside::daemon
