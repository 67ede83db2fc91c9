// IngestSession: one agent session's messages, as bytes off the wire, through the aggregator's
// IngestCore (what ingest_service does with each message it reads), then every reader.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/aggregator/ingest/ingest_core.h"
#include "daemon/aggregator/ingest/ingest_stats.h"
#include "daemon/common/protocol.h"
#include "google/protobuf/stubs/logging.h"
#include "ringside/v1/ingest.pb.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"

namespace ringside::fuzz {
namespace {

using daemon::IngestCore;

class NullSession : public daemon::SessionLink {
 public:
  void Replace(absl::Status) override {}
  void AckReady() override {}
};

// Reads every accepted sample the way the analysis host would.
class CountingObserver : public daemon::IngestObserver {
 public:
  void OnSamples(absl::string_view node,
                 absl::Span<const analysis::ObservedSample> samples) override {
    seen += samples.size();
  }
  size_t seen = 0;
};

// The next length-prefixed chunk, or nullopt at the end of input.
std::optional<std::string> NextChunk(const uint8_t*& p, const uint8_t* end) {
  if (end - p < 2) return std::nullopt;
  size_t n = static_cast<size_t>(p[0]) | static_cast<size_t>(p[1]) << 8;
  p += 2;
  if (static_cast<size_t>(end - p) < n) n = static_cast<size_t>(end - p);
  std::string chunk(reinterpret_cast<const char*>(p), n);
  p += n;
  return chunk;
}

}  // namespace

bool IngestSession(const uint8_t* data, size_t size) {
  // Parsing invalid UTF-8 into a string field fails with a log line per message: noise here.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  daemon::IngestStats stats;
  daemon::IngestOptions o;
  const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  o.now = [t0] { return t0; };
  o.limits.max_series_per_node = 64;
  o.limits.max_defs_per_message = 64;
  o.windows.collective_records_per_node = 16;
  o.windows.link_events_per_node = 16;
  IngestCore core(o, &stats);
  CountingObserver observer;
  core.SetObserver(&observer);
  auto session = std::make_shared<NullSession>();

  const uint8_t* p = data;
  const uint8_t* const end = data + size;
  std::optional<std::string> chunk = NextChunk(p, end);
  if (!chunk) return false;
  v1::AgentMessage first;
  const bool first_parsed = first.ParseFromString(*chunk);
  v1::Hello hello;
  bool apply_first = false;
  if (first_parsed && first.has_hello()) {
    hello = first.hello();
  } else {
    hello.set_node("fuzz-node");
    hello.set_agent_epoch(7);
    hello.set_protocol_version(daemon::kProtocolVersion);
    hello.set_min_protocol_version(daemon::kMinProtocolVersion);
    if (!first_parsed) return false;  // gRPC ends a stream whose message does not parse
    apply_first = true;
  }
  absl::StatusOr<IngestCore::SessionStart> start = core.Hello(hello, 1, session);
  if (!start.ok()) {
    FUZZ_CHECK(start.status().code() == absl::StatusCode::kInvalidArgument ||
               start.status().code() == absl::StatusCode::kFailedPrecondition ||
               start.status().code() == absl::StatusCode::kResourceExhausted);
    return false;
  }
  const uint64_t epoch = hello.agent_epoch();
  bool accepted = true;
  bool have = apply_first;
  v1::AgentMessage m;
  if (apply_first) m = first;
  for (;;) {
    if (!have) {
      chunk = NextChunk(p, end);
      if (!chunk) break;
      if (!m.ParseFromString(*chunk)) {
        accepted = false;
        break;
      }
    }
    have = false;
    absl::Status s = core.Apply(*start->node, epoch, 1, m);
    if (!s.ok()) {
      FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument ||
                 s.code() == absl::StatusCode::kResourceExhausted ||
                 s.code() == absl::StatusCode::kUnavailable ||
                 s.code() == absl::StatusCode::kAborted);
      accepted = false;
      break;
    }
  }
  (void)core.Ackable(*start->node, epoch);
  core.EndSession(*start->node, 1);

  // Every reader on what the session left.
  for (const daemon::NodeStatus& n : core.Nodes()) {
    FUZZ_CHECK(n.series <= o.limits.max_series_per_node);
    FUZZ_CHECK(n.collective_records <= o.windows.collective_records_per_node);
    FUZZ_CHECK(n.link_events <= o.windows.link_events_per_node);
    FUZZ_CHECK(n.epochs.size() <= o.limits.max_epochs_per_node);
    for (const daemon::EpochStatus& e : n.epochs) FUZZ_CHECK(e.acked_seq <= e.received_seq);
    absl::StatusOr<std::vector<analysis::SeriesView>> series = core.Series(n.node);
    FUZZ_CHECK(series.ok());
    FUZZ_CHECK(series->size() == n.series);
    FUZZ_CHECK(core.RecentCollectives(n.node).size() == n.collective_records);
    FUZZ_CHECK(core.RecentLinkEvents(n.node).size() == n.link_events);
  }
  (void)core.Watermarks();
  (void)core.Totals();
  return accepted;
}

}  // namespace ringside::fuzz
