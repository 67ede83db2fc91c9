// How `ringside import-trace` prints collective records: JSON Lines, CSV, or a summary for people.
#ifndef RINGSIDE_DAEMON_CTL_RECORD_OUTPUT_H_
#define RINGSIDE_DAEMON_CTL_RECORD_OUTPUT_H_

#include <ostream>
#include <vector>

#include "analysis/import/import_result.h"
#include "analysis/import/record_summary.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::daemon::ctl {

// One JSON object per line, in protobuf's canonical JSON mapping of CollectiveRecord with the
// proto field names and every field present (64-bit integers are strings, as that mapping says),
// so google::protobuf::util::JsonStringToMessage reads each line back.
void WriteJsonLines(const std::vector<ringside::v1::CollectiveRecord>& records, std::ostream& out);

// A header row of the proto field names, then one row per record.
void WriteCsv(const std::vector<ringside::v1::CollectiveRecord>& records, std::ostream& out);

// Tables: what was read, communicators, functions with durations, workers, notes and problems.
void WriteSummary(const analysis::ImportStats& stats, const analysis::RecordSummary& summary,
                  std::ostream& out);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_RECORD_OUTPUT_H_
