#include "analysis/import/flight_recorder_importer.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "analysis/import/byte_source.h"
#include "tests/testing/temp_dir.h"

namespace ringside::analysis {
namespace {

using ringside::v1::CollectiveRecord;

std::string Fixture(const std::string& name) {
  return testing::ReadFileOrEmpty(
      absl::StrCat(RINGSIDE_SOURCE_DIR, "/tests/data/flight_recorder/", name));
}

class FlightRecorderImporterTest : public ::testing::Test {
 protected:
  // Imports in-memory dumps named `names`.
  absl::StatusOr<ImportResult> Import(const std::vector<std::pair<std::string, std::string>>& dumps,
                                      FlightRecorderOptions opt = {},
                                      std::optional<int64_t> rank = std::nullopt) {
    sources_.clear();
    std::vector<FlightRecorderDump> in;
    for (const auto& [name, text] : dumps) {
      sources_.push_back(std::make_unique<StringSource>(text));
      in.push_back({name, sources_.back().get(), rank});
    }
    return ImportFlightRecorder(in, opt);
  }

  absl::StatusOr<ImportResult> ImportFixtures(FlightRecorderOptions opt = {}) {
    return Import({{"nccl_trace_rank_0.json", Fixture("nccl_trace_rank_0.json")},
                   {"nccl_trace_rank_1.json", Fixture("nccl_trace_rank_1.json")}},
                  opt);
  }

  // The record of (host, function, seq).
  static const CollectiveRecord* Find(const ImportResult& r, const std::string& host,
                                      const std::string& function, uint64_t seq) {
    for (const CollectiveRecord& rec : r.records) {
      if (rec.host() == host && rec.function() == function && rec.seq() == seq) return &rec;
    }
    return nullptr;
  }

  std::vector<std::unique_ptr<StringSource>> sources_;
};

constexpr int64_t kT0 = 1700000000000000000;

TEST_F(FlightRecorderImporterTest, CompletedCollectivesMapToRecords) {
  absl::StatusOr<ImportResult> res = ImportFixtures();
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->stats.inputs, 2);
  EXPECT_EQ(res->stats.rows, 12);
  EXPECT_EQ(res->records.size(), 10u);  // 12 entries less the send and the recv

  const CollectiveRecord* ar0 = Find(*res, "rank0", "AllReduce", 1);
  const CollectiveRecord* ar1 = Find(*res, "rank1", "AllReduce", 1);
  ASSERT_NE(ar0, nullptr);
  ASSERT_NE(ar1, nullptr);
  EXPECT_EQ(ar0->job_id(), "flight-recorder");
  EXPECT_EQ(ar0->comm_name(), "0:default_pg");
  EXPECT_EQ(ar0->comm_id(), ar1->comm_id());  // the join key is the process group's name
  EXPECT_EQ(ar0->comm_id(), ImportedCommId("flight-recorder", "0"));
  EXPECT_EQ(ar0->rank(), 0u);
  EXPECT_EQ(ar1->rank(), 1u);
  EXPECT_EQ(ar0->nranks(), 2u);
  EXPECT_EQ(ar0->bytes(), 1024u * 1024u * 4u);  // [[1024, 1024]] Float
  EXPECT_EQ(ar0->enqueue_unix_nanos(), kT0);
  EXPECT_EQ(ar0->kernel_start_unix_nanos(), kT0);
  EXPECT_EQ(ar0->kernel_stop_unix_nanos(), kT0 + 2'500'000);  // duration_ms 2.5
  EXPECT_EQ(ar1->kernel_stop_unix_nanos() - ar1->kernel_start_unix_nanos(), 400'000);
  EXPECT_FALSE(ar0->clock_synchronized());
  EXPECT_EQ(ar0->pid(), 0u);

  const CollectiveRecord* ag = Find(*res, "rank0", "AllGather", 1);
  ASSERT_NE(ag, nullptr);
  EXPECT_EQ(ag->comm_name(), "1:dp");
  EXPECT_NE(ag->comm_id(), ar0->comm_id());
  EXPECT_EQ(ag->bytes(), 512u);  // the input shard: [[256]] BFloat16

  // reduce_scatter_tensor_coalesced: one record, bytes of the outputs ([[512], [1024]] Float).
  const CollectiveRecord* rs0 = Find(*res, "rank0", "ReduceScatter", 2);
  ASSERT_NE(rs0, nullptr);
  EXPECT_EQ(rs0->bytes(), 6144u);
  EXPECT_EQ(rs0->kernel_stop_unix_nanos() - rs0->kernel_start_unix_nanos(), 1'250'000);

  // nccl:coalesced: one record for the group, sizes not recorded.
  const CollectiveRecord* co = Find(*res, "rank1", "Coalesced", 2);
  ASSERT_NE(co, nullptr);
  EXPECT_EQ(co->bytes(), 0u);
  EXPECT_EQ(co->kernel_stop_unix_nanos() - co->kernel_start_unix_nanos(), 2'000'000);
}

TEST_F(FlightRecorderImporterTest, WithoutTimingTheWatchdogTimesAreUsed) {
  absl::StatusOr<ImportResult> res = ImportFixtures();
  ASSERT_TRUE(res.ok()) << res.status();
  const CollectiveRecord* rs1 = Find(*res, "rank1", "ReduceScatter", 2);
  ASSERT_NE(rs1, nullptr);
  EXPECT_EQ(rs1->enqueue_unix_nanos(), kT0 + 20'500'000);
  EXPECT_EQ(rs1->kernel_start_unix_nanos(), kT0 + 20'600'000);
  EXPECT_EQ(rs1->kernel_stop_unix_nanos(), kT0 + 22'000'000);
}

TEST_F(FlightRecorderImporterTest, TimedOutAndUnstartedEntriesAreKeptIncomplete) {
  absl::StatusOr<ImportResult> res = ImportFixtures();
  ASSERT_TRUE(res.ok()) << res.status();
  // Rank 0 started all_reduce #3 and timed out waiting; rank 1 never launched it.
  const CollectiveRecord* hung = Find(*res, "rank0", "AllReduce", 3);
  const CollectiveRecord* never = Find(*res, "rank1", "AllReduce", 3);
  ASSERT_NE(hung, nullptr);
  ASSERT_NE(never, nullptr);
  EXPECT_EQ(hung->kernel_start_unix_nanos(), kT0 + 50'200'000);
  EXPECT_EQ(hung->kernel_stop_unix_nanos(), 0);
  EXPECT_EQ(hung->bytes(), 64u);  // [[8]] Long
  EXPECT_EQ(never->kernel_start_unix_nanos(), 0);
  EXPECT_EQ(never->kernel_stop_unix_nanos(), 0);
  EXPECT_EQ(never->enqueue_unix_nanos(), kT0 + 90'000'000);
  EXPECT_EQ(res->stats.incomplete,
            (std::map<std::string, int64_t>{{"timed out (retired while started)", 1},
                                            {"in flight at dump time (scheduled)", 1}}));
}

TEST_F(FlightRecorderImporterTest, PointToPointIsSkippedUnlessAskedFor) {
  absl::StatusOr<ImportResult> res = ImportFixtures();
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->stats.skipped["point-to-point (nccl:send), imported only with include_p2p"], 1);
  EXPECT_EQ(res->stats.skipped["point-to-point (nccl:recv), imported only with include_p2p"], 1);
  EXPECT_EQ(Find(*res, "rank0", "Send", 1), nullptr);

  FlightRecorderOptions opt;
  opt.include_p2p = true;
  opt.job_id = "j1";
  res = ImportFixtures(opt);
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->records.size(), 12u);
  const CollectiveRecord* send = Find(*res, "rank0", "Send", 1);  // p2p_seq_id 1
  const CollectiveRecord* recv = Find(*res, "rank1", "Recv", 1);
  ASSERT_NE(send, nullptr);
  ASSERT_NE(recv, nullptr);
  EXPECT_EQ(send->comm_id(), recv->comm_id());
  EXPECT_EQ(send->bytes(), 64u);
  EXPECT_EQ(send->job_id(), "j1");
  ASSERT_EQ(res->extras.size(), res->records.size());
  for (size_t i = 0; i < res->records.size(); ++i) {
    const CollectiveRecord& r = res->records[i];
    EXPECT_EQ(res->extras[i].global_rank, r.host() == "rank0" ? 0 : 1);
    // "nccl:send 0->1" on rank 0 and "nccl:recv 1<-0" on rank 1: each names the other.
    int32_t want_peer = r.function() == "Send" ? 1 : r.function() == "Recv" ? 0 : -1;
    EXPECT_EQ(res->extras[i].peer, want_peer) << r.function();
  }
}

TEST_F(FlightRecorderImporterTest, SubgroupRankIsThePositionInItsRankList) {
  std::string dump = R"({"version": "2.4",
    "pg_config": {"5": {"name": "5", "desc": "tp", "ranks": "[2, 3]"}},
    "entries": [{"process_group": ["5", "tp"], "collective_seq_id": 7, "p2p_seq_id": 0,
                 "profiling_name": "nccl:broadcast", "time_created_ns": 100, "duration_ms": 1,
                 "input_sizes": [[2, 3]], "input_dtypes": ["Half"], "state": "completed",
                 "time_discovered_started_ns": null, "time_discovered_completed_ns": null,
                 "retired": true, "is_p2p": false}]})";
  absl::StatusOr<ImportResult> res = Import({{"/tmp/x/rank_3.json.gz", dump}});
  ASSERT_TRUE(res.ok()) << res.status();
  ASSERT_EQ(res->records.size(), 1u);
  const CollectiveRecord& r = res->records[0];
  EXPECT_EQ(r.host(), "rank3");
  EXPECT_EQ(r.rank(), 1u);
  EXPECT_EQ(r.nranks(), 2u);
  EXPECT_EQ(r.function(), "Broadcast");
  EXPECT_EQ(r.seq(), 7u);
  EXPECT_EQ(r.bytes(), 12u);
  EXPECT_EQ(r.kernel_stop_unix_nanos(), 100 + 1'000'000);
}

TEST_F(FlightRecorderImporterTest, RankComesFromOverrideThenDumpThenName) {
  std::string dump = R"({"version": "2.4", "rank": 6, "pg_config": {},
    "entries": [{"process_group": ["0", ""], "collective_seq_id": 1,
                 "profiling_name": "nccl:all_reduce", "time_created_ns": 5, "state": "scheduled"}]})";
  absl::StatusOr<ImportResult> res = Import({{"dump_without_number.json", dump}});
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->records[0].host(), "rank6");
  EXPECT_EQ(res->records[0].rank(), 6u);  // no rank list: the global rank, nranks unknown
  EXPECT_EQ(res->records[0].nranks(), 0u);
  EXPECT_EQ(res->records[0].comm_name(), "0");
  res = Import({{"dump_without_number.json", dump}}, {}, 9);
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->records[0].host(), "rank9");

  std::string no_rank = absl::StrReplaceAll(dump, {{"\"rank\": 6,", ""}});
  res = Import({{"dump_without_number.json", no_rank}});
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(res.status().message(), "cannot tell the global rank"));
}

TEST_F(FlightRecorderImporterTest, DuplicateEntriesFromTwoDumpsOfOneRankAreMerged) {
  std::string early = R"({"version": "2.4", "pg_config": {"0": {"ranks": "[0]"}},
    "entries": [{"process_group": ["0", "x"], "collective_seq_id": 1, "op_id": 1,
                 "profiling_name": "nccl:all_reduce", "time_created_ns": 5, "state": "started",
                 "time_discovered_started_ns": 7}]})";
  std::string late = absl::StrReplaceAll(
      early, {{"\"state\": \"started\"", "\"state\": \"completed\", \"duration_ms\": 1"}});
  absl::StatusOr<ImportResult> res = Import({{"a_0.json", early}, {"b_0.json", late}});
  ASSERT_TRUE(res.ok()) << res.status();
  ASSERT_EQ(res->records.size(), 1u);
  EXPECT_EQ(res->records[0].kernel_stop_unix_nanos(), 5 + 1'000'000);
  EXPECT_TRUE(res->stats.incomplete.empty());
}

TEST_F(FlightRecorderImporterTest, BadDumpsGiveClearErrors) {
  struct Case {
    std::string text, needle;
    absl::StatusCode code;
  };
  const std::string good = Fixture("nccl_trace_rank_0.json");
  for (const Case& c : std::vector<Case>{
           {std::string("\x80\x04\x95", 3), "Python pickle", absl::StatusCode::kInvalidArgument},
           {"{\"version\": \"2.4\", \"entries\": [", "not valid JSON", absl::StatusCode::kDataLoss},
           {good.substr(0, good.size() / 2), "not valid JSON", absl::StatusCode::kDataLoss},
           {"[1, 2]", "not a Flight Recorder dump", absl::StatusCode::kInvalidArgument},
           {R"({"version": "3.0", "entries": []})", "version 3.0 is not supported",
            absl::StatusCode::kInvalidArgument},
           {R"({"entries": {"a": 1}, "pg_config": {}})", "\"entries\" is not a list",
            absl::StatusCode::kDataLoss},
           {R"({"entries": [{"profiling_name": "nccl:all_reduce", "time_created_ns": "soon",
               "process_group": ["0", ""], "collective_seq_id": 1}], "pg_config": {}})",
            "entries[0]: time_created_ns", absl::StatusCode::kDataLoss},
           {R"({"entries": [{"profiling_name": "nccl:all_reduce", "time_created_ns": 1,
               "process_group": ["0", ""]}], "pg_config": {}})",
            "entries[0]: collective_seq_id missing", absl::StatusCode::kDataLoss},
           {R"({"entries": [{"profiling_name": "nccl:all_reduce", "time_created_ns": 1,
               "process_group": ["0", ""], "collective_seq_id": 1, "state": "lost"}],
               "pg_config": {}})",
            "unknown state", absl::StatusCode::kDataLoss},
           {R"({"entries": [{"profiling_name": "nccl:all_reduce", "time_created_ns": 1,
               "process_group": ["0", ""], "collective_seq_id": 1, "duration_ms": "x"}],
               "pg_config": {}})",
            "duration_ms", absl::StatusCode::kDataLoss},
       }) {
    absl::StatusOr<ImportResult> res = Import({{"nccl_trace_rank_0", c.text}});
    ASSERT_FALSE(res.ok()) << c.needle;
    EXPECT_EQ(res.status().code(), c.code) << res.status();
    EXPECT_TRUE(absl::StrContains(res.status().message(), c.needle)) << res.status();
    EXPECT_TRUE(absl::StartsWith(res.status().message(), "nccl_trace_rank_0: ")) << res.status();
  }
}

TEST_F(FlightRecorderImporterTest, SkipMalformedKeepsTheGoodEntries) {
  std::string dump = R"({"pg_config": {}, "entries": [
      {"profiling_name": "nccl:all_reduce", "time_created_ns": 1, "process_group": ["0", ""],
       "collective_seq_id": 1, "state": "completed", "duration_ms": 0.5},
      17,
      {"profiling_name": "nccl:all_reduce", "process_group": ["0", ""], "collective_seq_id": 2},
      {"profiling_name": "nccl:some_future_op", "time_created_ns": 3, "process_group": ["0", ""],
       "collective_seq_id": 3}]})";
  FlightRecorderOptions opt;
  opt.skip_malformed = true;
  absl::StatusOr<ImportResult> res = Import({{"r_0.json", dump}}, opt);
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->records.size(), 1u);
  EXPECT_EQ(res->stats.malformed, 2);
  EXPECT_EQ(res->stats.skipped["unknown operation (nccl:some_future_op)"], 1);
  ASSERT_EQ(res->stats.malformed_examples.size(), 2u);
  EXPECT_EQ(res->stats.malformed_examples[0], "r_0.json: entries[1]: not an object");
}

TEST_F(FlightRecorderImporterTest, EveryTruncationOfADumpIsHandled) {
  const std::string good = Fixture("nccl_trace_rank_1.json");
  ASSERT_FALSE(good.empty());
  for (size_t cut = 0; cut < good.size(); cut += 13) {
    absl::StatusOr<ImportResult> res = Import({{"nccl_trace_rank_1.json", good.substr(0, cut)}});
    EXPECT_FALSE(res.ok()) << cut;
  }
}

TEST_F(FlightRecorderImporterTest, FunctionNames) {
  const std::map<std::string, std::string> cases = {
      {"nccl:all_reduce", "AllReduce"},
      {"nccl:allreduce_coalesced", "AllReduce"},
      {"nccl:all_reduce_barrier", "AllReduce"},
      {"nccl:_allgather_base", "AllGather"},
      {"nccl:all_gather_into_tensor_coalesced", "AllGather"},
      {"nccl:reduce_scatter_tensor_coalesced", "ReduceScatter"},
      {"nccl:_reduce_scatter_base", "ReduceScatter"},
      {"nccl:reduce", "Reduce"},
      {"nccl:broadcast", "Broadcast"},
      {"nccl:all_to_all", "AllToAll"},
      {"nccl:alltoall_base", "AllToAll"},
      {"nccl:gather", "Gather"},
      {"nccl:scatter", "Scatter"},
      {"nccl:send 1->2", "Send"},
      {"nccl:recv 3<-0", "Recv"},
      {"nccl:coalesced", "Coalesced"},
      {"nccl:mystery", ""},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(FlightRecorderFunction(in), want) << in;
  EXPECT_EQ(DtypeBytes("Float"), 4);
  EXPECT_EQ(DtypeBytes("BFloat16"), 2);
  EXPECT_EQ(DtypeBytes("Float8_e4m3fn"), 1);
  EXPECT_EQ(DtypeBytes("Long"), 8);
  EXPECT_EQ(DtypeBytes("Quaternion"), 0);
}

}  // namespace
}  // namespace ringside::analysis
