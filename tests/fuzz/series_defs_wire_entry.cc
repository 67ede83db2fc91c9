// SeriesDefsWire: the admission path's in-place reader of a SeriesDefs message
// (daemon/aggregator/ingest/series_defs_view.h), checked against protobuf on the same bytes.
#include <string>

#include "absl/strings/string_view.h"
#include "daemon/aggregator/ingest/definition_catalog.h"
#include "daemon/aggregator/ingest/series_defs_view.h"
#include "daemon/common/series_set_digest.h"
#include "ringside/v1/ingest.pb.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"

namespace ringside::fuzz {

bool SeriesDefsWire(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  thread_local daemon::SeriesDefsView view;
  if (!daemon::ParseSeriesDefsMessage(bytes, &view)) return false;  // protobuf's turn: fine
  // What the reader took, protobuf must take too, and read alike.
  v1::AgentMessage m;
  FUZZ_CHECK(m.ParseFromArray(data, static_cast<int>(size)));
  FUZZ_CHECK(m.has_series_defs() && m.seq() == 0);
  const v1::SeriesDefs& d = m.series_defs();
  FUZZ_CHECK(view.defs_received == static_cast<size_t>(d.defs_size()));
  FUZZ_CHECK(view.info_received == static_cast<size_t>(d.info_size()));
  FUZZ_CHECK(view.defs.size() <= view.defs_received);
  FUZZ_CHECK(view.complete_digest == d.complete_digest());
  for (size_t i = 0; i < view.defs.size(); ++i) {
    const analysis::SeriesDefinitionRef& r = view.defs[i];
    const v1::SeriesDef& p = d.defs(static_cast<int>(i));
    FUZZ_CHECK(r.id == p.id());
    FUZZ_CHECK(r.source == p.source() && r.device == p.device() && r.port == p.port());
    FUZZ_CHECK(r.counter == p.counter() && r.unit == p.unit());
    FUZZ_CHECK(r.priority == p.priority());
    FUZZ_CHECK(static_cast<int>(r.kind) == static_cast<int>(p.kind()));
    FUZZ_CHECK(r.width == p.width());
    FUZZ_CHECK(r.saturates == p.saturates());
    FUZZ_CHECK(r.term_width == (p.term_width() == 32 ? 32 : 0));
    FUZZ_CHECK(daemon::CheckWireDefinition(p.id(), p.kind(), p.width()).ok());
  }
  if (view.malformed.ok()) {
    FUZZ_CHECK(view.defs.size() == view.defs_received);
    // Definitions by reference: the aggregator's digest of what it read is the agent's of the
    // same definitions.
    daemon::SeriesSetDigest agent;
    for (const v1::SeriesDef& p : d.defs()) agent.Add(p);
    FUZZ_CHECK(daemon::DefinitionCatalog::DigestOf(view.defs) == agent.Finish());
  } else {
    // It stopped at the first definition the ingest checks refuse.
    FUZZ_CHECK(view.defs.size() < view.defs_received);
    const v1::SeriesDef& bad = d.defs(static_cast<int>(view.defs.size()));
    FUZZ_CHECK(!daemon::CheckWireDefinition(bad.id(), bad.kind(), bad.width()).ok());
  }
  if (view.info != nullptr) {
    FUZZ_CHECK(d.has_info());
    FUZZ_CHECK(view.info->info_size() == d.info_size());
  } else {
    FUZZ_CHECK(!d.has_info());
  }
  return view.malformed.ok();
}

}  // namespace ringside::fuzz
