// What an importer returns: the collective records (ringside.v1.CollectiveRecord, the same record
// the NCCL plugin produces) and an account of what it read, kept and left out.
#ifndef RINGSIDE_ANALYSIS_IMPORT_IMPORT_RESULT_H_
#define RINGSIDE_ANALYSIS_IMPORT_IMPORT_RESULT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::analysis {

struct ImportStats {
  std::string format;   // "straggler-analysis", "flight-recorder" or "ringside-journal"
  int64_t inputs = 0;   // files (dumps) read
  int64_t rows = 0;     // data rows or dump entries read
  int64_t records = 0;  // records produced
  // Rows by their type in the source (optype, or the Flight Recorder's profiling_name).
  std::map<std::string, int64_t> rows_by_type;
  // Rows that produced no record, by reason ("not a collective (forward-compute)", ...).
  std::map<std::string, int64_t> skipped;
  // Malformed rows that were skipped (only when the options allow skipping), and the first few
  // of their messages ("FILE:LINE: reason").
  int64_t malformed = 0;
  std::vector<std::string> malformed_examples;
  // Facts a user should know about this input ("start_ts restarts every step: ...").
  std::vector<std::string> notes;
  // Records of operations that did not complete, by why (Flight Recorder: timed out, or in
  // flight at dump time). They are kept, with kernel_stop_unix_nanos 0.
  std::map<std::string, int64_t> incomplete;
};

// What an imported record knows beyond CollectiveRecord's fields (the NCCL plugin has neither).
struct RecordExtras {
  int64_t global_rank = -1;  // the worker's rank in the job; -1 when unknown
  int32_t peer = -1;         // point-to-point: the peer's rank in the communicator; -1 otherwise
  // ringside-journal: the agent's node that forwarded it, and that node's clock error bound when
  // it did (ClockErrorOf in record_observation.h; -1 unknown).
  std::string node;
  int64_t clock_error_ns = -1;
};

struct ImportResult {
  std::vector<ringside::v1::CollectiveRecord> records;
  std::vector<RecordExtras> extras;  // extras[i] belongs to records[i]
  ImportStats stats;
};

// The communicator id of an imported communicator: FNV-1a 64 of "job_id/comm_name", never 0.
// Every rank's records of one communicator get the same id.
uint64_t ImportedCommId(absl::string_view job_id, absl::string_view comm_name);

// Adds `b` into `a` (counts summed, examples and notes appended).
void MergeStats(ImportStats& a, const ImportStats& b);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_IMPORT_IMPORT_RESULT_H_
