#include "analysis/import/ringside_journal_importer.h"

#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "analysis/import/gzip_source.h"
#include "analysis/import/line_reader.h"
#include "analysis/import/record_observation.h"

namespace ringside::analysis {
namespace {

using nlohmann::json;

// Returns why the line is malformed, or "" after taking it in (as a record or as skipped).
std::string TakeLine(const std::string& line, const RingsideJournalOptions& opt,
                     ImportResult& out) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return "not a JSON object";
  auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string()) return "no \"kind\"";
  const std::string k = kind->get<std::string>();
  ++out.stats.rows;
  ++out.stats.rows_by_type[k];
  if (k != "collective") {
    ++out.stats.skipped[absl::StrCat("not a collective record (", k, ")")];
    return "";
  }
  auto rec = j.find("record");
  if (rec == j.end() || !rec->is_object()) return "a collective line without \"record\"";
  google::protobuf::util::JsonParseOptions po;
  po.ignore_unknown_fields = true;  // a journal of a newer aggregator
  ringside::v1::CollectiveRecord r;
  if (auto s = google::protobuf::util::JsonStringToMessage(rec->dump(), &r, po); !s.ok()) {
    return absl::StrCat("bad record: ", s.ToString());
  }
  RecordExtras x;
  if (auto node = j.find("node"); node != j.end() && node->is_string()) {
    x.node = node->get<std::string>();
  }
  if (auto clock = j.find("clock"); clock != j.end() && clock->is_object()) {
    ringside::v1::CollectiveBatch batch;
    if (auto s = google::protobuf::util::JsonStringToMessage(clock->dump(), batch.mutable_clock(),
                                                             po);
        !s.ok()) {
      return absl::StrCat("bad clock: ", s.ToString());
    }
    x.clock_error_ns = ClockErrorOf(batch);
  }
  if (!opt.job_id.empty() && r.job_id() != opt.job_id) {
    ++out.stats.skipped["another job"];
    return "";
  }
  if (r.kernel_stop_unix_nanos() <= 0) ++out.stats.incomplete["no kernel stop time"];
  if (r.host().empty()) r.set_host(x.node);
  out.records.push_back(std::move(r));
  out.extras.push_back(std::move(x));
  ++out.stats.records;
  return "";
}

}  // namespace

absl::StatusOr<ImportResult> ImportRingsideJournal(ByteSource& input,
                                                   const RingsideJournalOptions& opt) {
  ImportResult out;
  out.stats.format = "ringside-journal";
  out.stats.inputs = 1;
  MaybeGzipSource src(&input);
  LineReader lines(&src);
  std::string line;
  for (;;) {
    absl::StatusOr<bool> more = lines.Next(&line);
    if (!more.ok()) {
      return absl::Status(more.status().code(),
                          absl::StrCat(opt.source_name, ": ", more.status().message()));
    }
    if (!*more) break;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const std::string why = TakeLine(line, opt, out);
    if (why.empty()) continue;
    const std::string msg = absl::StrCat(opt.source_name, ":", lines.line_number(), ": ", why);
    if (!opt.skip_malformed) return absl::DataLossError(msg);
    ++out.stats.malformed;
    if (out.stats.malformed_examples.size() < 10) out.stats.malformed_examples.push_back(msg);
  }
  if (out.records.empty() && out.stats.rows == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(opt.source_name, ": no journal lines (ringside-aggregator --dump-journal)"));
  }
  return out;
}

}  // namespace ringside::analysis
