// SampleBatchWire: the ingest path's in-place reader of a SampleBatch message
// (daemon/aggregator/ingest/sample_batch_view.h), checked against protobuf on the same bytes.
#include <string>

#include "absl/strings/string_view.h"
#include "daemon/aggregator/ingest/sample_batch_view.h"
#include "ringside/v1/ingest.pb.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"

namespace ringside::fuzz {

bool SampleBatchWire(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  thread_local daemon::SampleBatchView view;
  if (!daemon::ParseSampleBatchMessage(bytes, &view)) return false;  // protobuf's turn: fine
  // What the reader took, protobuf must take too, and read alike.
  v1::AgentMessage m;
  FUZZ_CHECK(m.ParseFromArray(data, static_cast<int>(size)));
  FUZZ_CHECK(m.has_samples());
  FUZZ_CHECK(view.seq == m.seq());
  const v1::SampleBatch& b = m.samples();
  FUZZ_CHECK(view.timestamp_unix_nanos == b.timestamp_unix_nanos());
  FUZZ_CHECK(view.ids.size() == static_cast<size_t>(b.ids_size()));
  FUZZ_CHECK(view.values.size() == static_cast<size_t>(b.values_size()));
  for (size_t i = 0; i < view.ids.size(); ++i) FUZZ_CHECK(view.ids[i] == b.ids(static_cast<int>(i)));
  for (size_t i = 0; i < view.values.size(); ++i) {
    FUZZ_CHECK(view.values[i] == b.values(static_cast<int>(i)));
  }
  return view.ids.size() == view.values.size();  // what the core then takes in
}

}  // namespace ringside::fuzz
