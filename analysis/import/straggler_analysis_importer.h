// Importer for the per-operation traces of "Understanding Stragglers in Large Model Training Using
// What-if Analysis" (OSDI 2025; ../shared/data/straggler-analysis): CSV, optionally gzip'd, one row
// per operation per worker. Produces one CollectiveRecord per collective per worker; the mapping is
// in docs/importers.md.
#ifndef RINGSIDE_ANALYSIS_IMPORT_STRAGGLER_ANALYSIS_IMPORTER_H_
#define RINGSIDE_ANALYSIS_IMPORT_STRAGGLER_ANALYSIS_IMPORTER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/import/byte_source.h"
#include "analysis/import/import_result.h"

namespace ringside::analysis {

struct StragglerAnalysisOptions {
  // Names the input in messages ("trace-AR.csv.gz:17: ...").
  std::string source_name = "<input>";
  // The records' job_id; empty: derived from source_name (JobIdFromFileName).
  std::string job_id;
  // false: the first malformed row fails the import (DataLoss naming its line). true: malformed
  // rows are skipped and counted in ImportStats::malformed.
  bool skip_malformed = false;
  // Also produce Send/Recv records for the pipeline's point-to-point transfers (forward/backward
  // send/recv), on one two-rank communicator per pair of adjacent stages.
  bool include_p2p = false;
};

// Reads a whole trace (plain or gzip'd CSV). Errors: InvalidArgument for a missing header or
// column, DataLoss for a truncated/corrupt gzip stream or (unless skipped) a malformed row.
absl::StatusOr<ImportResult> ImportStragglerAnalysis(ByteSource& input,
                                                     const StragglerAnalysisOptions& options);

// "…/trace-AR.csv.gz" → "trace-AR": the base name without .gz, .csv and .json suffixes.
std::string JobIdFromFileName(absl::string_view path);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_IMPORT_STRAGGLER_ANALYSIS_IMPORTER_H_
