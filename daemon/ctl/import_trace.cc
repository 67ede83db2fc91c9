#include "daemon/ctl/import_trace.h"

#include <memory>
#include <ostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "analysis/detection_options.h"
#include "analysis/import/flight_recorder_importer.h"
#include "analysis/import/record_summary.h"
#include "analysis/import/ringside_journal_importer.h"
#include "analysis/import/straggler_analysis_importer.h"
#include "daemon/ctl/analyze_trace.h"
#include "daemon/ctl/args.h"
#include "daemon/ctl/file_source.h"
#include "daemon/ctl/record_output.h"

namespace ringside::daemon::ctl {
namespace {

const std::vector<FlagSpec>& Specs() {
  static const auto* specs = new std::vector<FlagSpec>{
      {"format", "", true, "FORMAT",
       "straggler-analysis, flight-recorder or ringside-journal (required)", ""},
      {"output", "o", true, "OUTPUT",
       "summary (tables), json (one record per line, JSON Lines) or csv", "summary"},
      {"job-id", "", true, "ID",
       "job_id of the records (ringside-journal: only the records of this job)",
       "straggler-analysis: the file name; flight-recorder: "
       "flight-recorder; ringside-journal: every job"},
      {"include-p2p", "", false, "", "also import point-to-point transfers as Send/Recv records",
       ""},
      {"skip-malformed", "", false, "",
       "skip and count malformed rows or entries instead of failing on the first one", ""},
      {"rank", "", true, "N",
       "flight-recorder, one FILE: its global rank (else the dump's rank, else the file name's "
       "trailing digits)",
       ""},
      {"detect-set", "", true, "NAME=VALUE,...",
       "with --analyze: detector thresholds, as the aggregator's --detect-set (straggler.*)",
       "the aggregator's defaults"},
      {"analyze", "", false, "",
       "run the straggler and job_slowdown detectors over the trace on its own clock and print "
       "the incidents (-o json: a JSON array; else a table); implies --include-p2p",
       ""},
  };
  return *specs;
}

constexpr const char* kUsage =
    "Usage: ringside import-trace --format=FORMAT [-o summary|json|csv] [flags] FILE...\n"
    "\n"
    "Reads offline traces into collective records, the records the NCCL plugin produces (one per\n"
    "collective per rank), and prints them. FILE may be gzip'd; \"-\" reads standard input.\n"
    "\n"
    "Formats:\n"
    "  straggler-analysis  the CSV(.gz) traces of the OSDI'25 straggler study (one job per file)\n"
    "  flight-recorder     PyTorch Flight Recorder dumps in JSON, one per rank, of one job\n"
    "  ringside-journal    what `ringside-aggregator --dump-journal` prints (JSON Lines): the\n"
    "                      records exactly as the aggregator received them, replayed through\n"
    "                      the aggregator's straggler detector with --analyze\n"
    "\n"
    "Exit codes: 0 imported; 1 imported, with problems (malformed rows skipped, collectives that\n"
    "did not complete); 2 error (bad usage, unreadable or invalid input).\n"
    "Field mappings and limitations: docs/importers.md.\n"
    "\n";

int Fail(CommandContext& ctx, const std::string& msg) {
  ctx.err << "ringside import-trace: " << msg << "\n";
  return kExitError;
}

}  // namespace

int RunImportTrace(const std::vector<std::string>& args, CommandContext& ctx) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, Specs());
  if (!parsed.ok()) {
    return Fail(ctx, absl::StrCat(parsed.status().message(), " (see --help)"));
  }
  if (parsed->help) {
    ctx.out << kUsage << FlagsHelp(Specs());
    return kExitOk;
  }
  const bool analyze = parsed->Flag("analyze");
  const std::string format = parsed->Get("format");
  const std::string output = parsed->Get("output", "summary");
  if (format != "straggler-analysis" && format != "flight-recorder" &&
      format != "ringside-journal") {
    constexpr const char* kFormats = "straggler-analysis, flight-recorder or ringside-journal";
    return Fail(ctx, format.empty()
                         ? absl::StrCat("--format is required: ", kFormats)
                         : absl::StrCat("unknown --format \"", format, "\": ", kFormats));
  }
  if (output != "summary" && output != "json" && output != "csv") {
    return Fail(ctx, absl::StrCat("unknown -o \"", output, "\": summary, json or csv"));
  }
  if (parsed->positional.empty()) return Fail(ctx, "no FILE given (see --help)");
  analysis::FabricAnalysisOptions detection;
  if (parsed->Has("detect-set")) {
    if (!analyze) return Fail(ctx, "--detect-set applies to --analyze");
    if (absl::Status s = analysis::ParseDetectionAssignments(parsed->Get("detect-set"), detection);
        !s.ok()) {
      return Fail(ctx, std::string(s.message()));
    }
  }
  std::optional<int64_t> rank;
  if (parsed->Has("rank")) {
    int64_t r = 0;
    if (format != "flight-recorder" || parsed->positional.size() != 1) {
      return Fail(ctx, "--rank applies to --format=flight-recorder with one FILE");
    }
    if (!absl::SimpleAtoi(parsed->Get("rank"), &r) || r < 0) {
      return Fail(ctx, absl::StrCat("--rank \"", parsed->Get("rank"), "\" is not a rank"));
    }
    rank = r;
  }

  std::vector<std::unique_ptr<FileSource>> files;
  for (const std::string& path : parsed->positional) {
    absl::StatusOr<std::unique_ptr<FileSource>> f = FileSource::Open(path);
    if (!f.ok()) return Fail(ctx, std::string(f.status().message()));
    files.push_back(std::move(*f));
  }

  analysis::ImportResult all;
  if (format == "straggler-analysis") {
    all.stats.format = format;
    for (size_t i = 0; i < files.size(); ++i) {
      analysis::StragglerAnalysisOptions opt;
      opt.source_name = parsed->positional[i] == "-" ? "<stdin>" : parsed->positional[i];
      opt.job_id = parsed->Get("job-id");
      if (opt.job_id.empty() && parsed->positional[i] == "-") opt.job_id = "stdin";
      opt.skip_malformed = parsed->Flag("skip-malformed");
      opt.include_p2p = parsed->Flag("include-p2p") || analyze;
      absl::StatusOr<analysis::ImportResult> r = analysis::ImportStragglerAnalysis(*files[i], opt);
      if (!r.ok()) return Fail(ctx, std::string(r.status().message()));
      analysis::MergeStats(all.stats, r->stats);
      for (auto& rec : r->records) all.records.push_back(std::move(rec));
      all.extras.insert(all.extras.end(), r->extras.begin(), r->extras.end());
    }
  } else if (format == "ringside-journal") {
    all.stats.format = format;
    for (size_t i = 0; i < files.size(); ++i) {
      analysis::RingsideJournalOptions opt;
      opt.source_name = parsed->positional[i] == "-" ? "<stdin>" : parsed->positional[i];
      opt.skip_malformed = parsed->Flag("skip-malformed");
      opt.job_id = parsed->Get("job-id");
      absl::StatusOr<analysis::ImportResult> r = analysis::ImportRingsideJournal(*files[i], opt);
      if (!r.ok()) return Fail(ctx, std::string(r.status().message()));
      analysis::MergeStats(all.stats, r->stats);
      for (auto& rec : r->records) all.records.push_back(std::move(rec));
      all.extras.insert(all.extras.end(), r->extras.begin(), r->extras.end());
    }
  } else {
    analysis::FlightRecorderOptions opt;
    if (parsed->Has("job-id")) opt.job_id = parsed->Get("job-id");
    opt.skip_malformed = parsed->Flag("skip-malformed");
    opt.include_p2p = parsed->Flag("include-p2p") || analyze;
    std::vector<analysis::FlightRecorderDump> dumps;
    for (size_t i = 0; i < files.size(); ++i) {
      dumps.push_back(
          {parsed->positional[i] == "-" ? "<stdin>" : parsed->positional[i], files[i].get(), rank});
    }
    absl::StatusOr<analysis::ImportResult> r = analysis::ImportFlightRecorder(dumps, opt);
    if (!r.ok()) return Fail(ctx, std::string(r.status().message()));
    all = std::move(*r);
  }

  if (analyze) {
    std::vector<TraceIncident> incidents = AnalyzeRecords(all, detection.straggler);
    if (output == "json") {
      WriteIncidentsJson(incidents, ctx.out);
    } else {
      WriteIncidentsTable(incidents, ctx.out);
    }
  } else if (output == "json") {
    WriteJsonLines(all.records, ctx.out);
  } else if (output == "csv") {
    WriteCsv(all.records, ctx.out);
  } else {
    WriteSummary(all.stats, analysis::Summarize(all.records), ctx.out);
  }
  ctx.out.flush();

  int64_t incomplete = 0;
  for (const auto& [why, n] : all.stats.incomplete) incomplete += n;
  if (all.stats.malformed > 0) {
    ctx.err << "ringside import-trace: skipped " << all.stats.malformed << " malformed "
            << (format == "flight-recorder" ? "entries" : format == "ringside-journal" ? "lines" : "rows")
            << "; the first: " << all.stats.malformed_examples.front() << "\n";
  }
  if (incomplete > 0) {
    ctx.err << "ringside import-trace: " << incomplete
            << " collectives did not complete (timed out or in flight at dump time)\n";
  }
  if (!ctx.out) return Fail(ctx, "could not write the output");
  return all.stats.malformed > 0 || incomplete > 0 ? kExitProblems : kExitOk;
}

}  // namespace ringside::daemon::ctl
