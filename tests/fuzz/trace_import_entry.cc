// TraceImport: the Flight Recorder and straggler-analysis importers (analysis/import) on arbitrary
// bytes (gzip'd or not: both importers take either).
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/import/byte_source.h"
#include "analysis/import/flight_recorder_importer.h"
#include "analysis/import/import_result.h"
#include "analysis/import/straggler_analysis_importer.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"

namespace ringside::fuzz {
namespace {

namespace a = ringside::analysis;

void CheckResult(const a::ImportResult& r, bool skip_malformed) {
  FUZZ_CHECK(r.records.size() == r.extras.size());
  FUZZ_CHECK(r.stats.records == static_cast<int64_t>(r.records.size()));
  FUZZ_CHECK(r.stats.rows >= 0 && r.stats.malformed >= 0);
  if (!skip_malformed) FUZZ_CHECK(r.stats.malformed == 0);
  FUZZ_CHECK(static_cast<int64_t>(r.stats.malformed_examples.size()) <= r.stats.malformed);
  for (size_t i = 0; i < r.records.size(); ++i) {
    const v1::CollectiveRecord& rec = r.records[i];
    FUZZ_CHECK(rec.comm_id() != 0);  // ImportedCommId is never 0
    FUZZ_CHECK(!rec.job_id().empty());
    FUZZ_CHECK(r.extras[i].global_rank >= -1);
  }
}

}  // namespace

bool TraceImport(const uint8_t* data, size_t size) {
  if (size == 0) return false;
  const uint8_t flags = data[0];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool skip = (flags & 2) != 0;
  const bool p2p = (flags & 4) != 0;
  absl::StatusOr<a::ImportResult> r;
  if (flags & 1) {
    a::StringSource src(text);
    a::StragglerAnalysisOptions opt;
    opt.source_name = "trace-fuzz.csv";
    opt.skip_malformed = skip;
    opt.include_p2p = p2p;
    r = a::ImportStragglerAnalysis(src, opt);
    if (r.ok()) FUZZ_CHECK(r->stats.format == "straggler-analysis");
  } else {
    std::vector<std::unique_ptr<a::StringSource>> sources;
    std::vector<a::FlightRecorderDump> dumps;
    const size_t cut = (flags & 8) ? text.find('\x1e') : std::string::npos;
    if (cut == std::string::npos) {
      sources.push_back(std::make_unique<a::StringSource>(text));
    } else {
      sources.push_back(std::make_unique<a::StringSource>(text.substr(0, cut)));
      sources.push_back(std::make_unique<a::StringSource>(text.substr(cut + 1)));
    }
    for (size_t i = 0; i < sources.size(); ++i) {
      dumps.push_back({"nccl_trace_rank_" + std::to_string(i) + ".json", sources[i].get(), {}});
    }
    a::FlightRecorderOptions opt;
    opt.skip_malformed = skip;
    opt.include_p2p = p2p;
    opt.max_dump_bytes = 1 << 20;  // a gzip bomb is refused, not expanded
    r = a::ImportFlightRecorder(dumps, opt);
    if (r.ok()) {
      FUZZ_CHECK(r->stats.format == "flight-recorder");
      FUZZ_CHECK(r->stats.inputs == static_cast<int64_t>(dumps.size()));
    }
  }
  if (!r.ok()) {
    const absl::StatusCode code = r.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kDataLoss ||
               code == absl::StatusCode::kResourceExhausted);
    return false;
  }
  CheckResult(*r, skip);
  return true;
}

}  // namespace ringside::fuzz
