// A summary of collective records for people: communicators, functions and their durations,
// workers. Pure computation; daemon/ctl renders it.
#ifndef RINGSIDE_ANALYSIS_IMPORT_RECORD_SUMMARY_H_
#define RINGSIDE_ANALYSIS_IMPORT_RECORD_SUMMARY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ringside/v1/ingest.pb.h"

namespace ringside::analysis {

// Durations are kernel_stop - kernel_start of completed records (stop > 0), in milliseconds.
struct DurationStats {
  int64_t count = 0;
  double p50_ms = 0, p95_ms = 0, max_ms = 0;
};

struct FunctionSummary {
  std::string function;
  int64_t records = 0;
  int64_t instances = 0;   // distinct (communicator, seq)
  int64_t incomplete = 0;  // kernel_stop 0
  DurationStats duration;
};

struct CommSummary {
  std::string job_id;
  std::string comm_name;
  uint32_t nranks = 0;     // as the records say
  int64_t ranks_seen = 0;  // distinct ranks with records
  int64_t records = 0;
  std::vector<std::string> functions;
};

struct WorkerSummary {
  std::string host;  // the records' host: a worker name for imported traces
  int64_t records = 0;
  std::map<std::string, DurationStats> by_function;
};

struct RecordSummary {
  int64_t records = 0;
  std::vector<std::string> jobs;
  std::vector<FunctionSummary> functions;  // by name
  std::vector<CommSummary> comms;          // by job, name
  std::vector<WorkerSummary> workers;      // by host (natural order: rank2 before rank10)
  int64_t first_start_unix_nanos = 0;      // earliest kernel start (or enqueue), 0 if none
  int64_t last_stop_unix_nanos = 0;        // latest kernel stop, 0 if none
};

RecordSummary Summarize(const std::vector<ringside::v1::CollectiveRecord>& records);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_IMPORT_RECORD_SUMMARY_H_
