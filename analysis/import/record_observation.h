// A ringside.v1.CollectiveRecord as the straggler detector sees it. One conversion for the
// aggregator (records as they arrive) and `ringside import-trace --analyze` (records read back),
// so a replay runs the detector on exactly what the aggregator gave it.
#ifndef RINGSIDE_ANALYSIS_IMPORT_RECORD_OBSERVATION_H_
#define RINGSIDE_ANALYSIS_IMPORT_RECORD_OBSERVATION_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "analysis/collective_observation.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::analysis {

// The clock error bound the detector may use from a batch's ClockBound: its maximum error when
// the kernel says the clock is synchronised, else -1 (unknown).
int64_t ClockErrorOf(const ringside::v1::CollectiveBatch& batch);

// `node`: the agent that forwarded it (the record's host when the record names none).
// `clock_error_ns`: its node's clock error bound (ClockErrorOf), -1 when unknown.
CollectiveObservation ObservationFromRecord(const ringside::v1::CollectiveRecord& record,
                                            absl::string_view node, int64_t clock_error_ns);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_IMPORT_RECORD_OBSERVATION_H_
