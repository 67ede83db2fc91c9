// Importer for PyTorch Flight Recorder dumps in JSON (`_dump_nccl_trace_json()`, or a pickle dump
// converted with the one-liner in docs/importers.md), format versions 2.x; gzip'd dumps too. One
// dump per rank; the dumps of one job are imported together, so every rank's records of a process
// group share its communicator id. The mapping is in docs/importers.md.
#ifndef RINGSIDE_ANALYSIS_IMPORT_FLIGHT_RECORDER_IMPORTER_H_
#define RINGSIDE_ANALYSIS_IMPORT_FLIGHT_RECORDER_IMPORTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/import/byte_source.h"
#include "analysis/import/import_result.h"

namespace ringside::analysis {

struct FlightRecorderDump {
  // The dump's file name: names it in messages, and its trailing digits give the global rank
  // ("nccl_trace_rank_3", "rank3.json.gz") unless `rank` or the dump itself says.
  std::string name;
  ByteSource* source = nullptr;  // not owned
  // The global rank of the dump's process; overrides everything else.
  std::optional<int64_t> rank;
};

struct FlightRecorderOptions {
  std::string job_id = "flight-recorder";
  // false: the first malformed entry fails the import (DataLoss naming the dump and the entry's
  // index); true: malformed entries are skipped and counted.
  bool skip_malformed = false;
  // Also produce Send/Recv records for point-to-point entries (is_p2p), numbered by p2p_seq_id.
  bool include_p2p = false;
  // A dump larger than this (after gzip) is refused.
  size_t max_dump_bytes = size_t{1} << 30;
};

// Errors: InvalidArgument for a pickle dump, a dump that is not a Flight Recorder dump, an
// unsupported major version or an unknown rank; DataLoss for JSON syntax errors (with line and
// column) and, unless skipped, malformed entries.
absl::StatusOr<ImportResult> ImportFlightRecorder(const std::vector<FlightRecorderDump>& dumps,
                                                  const FlightRecorderOptions& options);

// "nccl:all_reduce" → "AllReduce", "nccl:_allgather_base" → "AllGather",
// "nccl:reduce_scatter_tensor_coalesced" → "ReduceScatter", "nccl:send 0->1" → "Send",
// "nccl:coalesced" → "Coalesced"; "" for what it does not know.
std::string FlightRecorderFunction(absl::string_view profiling_name);

// Bytes of one element of a PyTorch dtype as the dump spells it ("Float" → 4, "BFloat16" → 2);
// 0 when unknown.
int DtypeBytes(absl::string_view dtype);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_IMPORT_FLIGHT_RECORDER_IMPORTER_H_
