// Importer for what `ringside-aggregator --dump-journal` prints (docs/aggregator.md): JSON Lines,
// plain or gzip'd, one collective record per "collective" line, with the agent's node, the
// record's proto3 JSON and (from agents that send it) the node's clock bound. The records come
// back exactly as the aggregator received them, so `ringside import-trace --analyze` replays a
// real run through the same detector.
#ifndef RINGSIDE_ANALYSIS_IMPORT_RINGSIDE_JOURNAL_IMPORTER_H_
#define RINGSIDE_ANALYSIS_IMPORT_RINGSIDE_JOURNAL_IMPORTER_H_

#include <string>

#include "absl/status/statusor.h"
#include "analysis/import/byte_source.h"
#include "analysis/import/import_result.h"

namespace ringside::analysis {

struct RingsideJournalOptions {
  std::string source_name = "<input>";  // names the input in messages
  // false: the first malformed line fails the import (DataLoss naming its line). true: malformed
  // lines are skipped and counted in ImportStats::malformed.
  bool skip_malformed = false;
  // Only the records of this job; empty: every job.
  std::string job_id;
};

// Lines of other kinds (plugin_drops, link_event, watermark) are counted in rows_by_type and
// skipped. extras[i].node and clock_error_ns come from the line of records[i].
absl::StatusOr<ImportResult> ImportRingsideJournal(ByteSource& input,
                                                   const RingsideJournalOptions& options);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_IMPORT_RINGSIDE_JOURNAL_IMPORTER_H_
