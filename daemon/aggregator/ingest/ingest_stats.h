// The aggregator's ingest self-metrics: plain atomic counters, bumped once per message (never per
// sample), read at scrape time. Bounded cardinality: every label set is a fixed enum.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_INGEST_INGEST_STATS_H_
#define RINGSIDE_DAEMON_AGGREGATOR_INGEST_INGEST_STATS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace ringside::daemon {

enum class MessageType : uint8_t {
  kHello,
  kSeriesDefs,
  kSamples,
  kCollectives,
  kLinkEvents,
  kOther,  // a body this build does not know (a newer agent), or none
  kCount,
};
absl::string_view MessageTypeName(MessageType t);

// Why a sample was not taken in.
enum class SampleRejection : uint8_t {
  kUndefinedId,  // the id was never defined in this session's node
  kOutOfOrder,   // not newer than the series' last sample
  kCount,
};
absl::string_view SampleRejectionName(SampleRejection r);

// A limit that refused something (the `reason` label of limit_rejections_total).
enum class LimitReason : uint8_t {
  kMaxNodes,
  kMaxSeriesPerNode,
  kMaxDefsPerMessage,
  kMaxSessions,
  kJournalBacklog,
  kMaxMessageBytes,  // a stream message over --max-message-bytes
  kCount,
};
absl::string_view LimitReasonName(LimitReason r);

// Why a stream was refused before or at its Hello.
enum class RefusalReason : uint8_t {
  kNoHello,       // the first message was not a Hello
  kBadHello,      // empty or malformed node name
  kVersion,       // protocol version ranges do not overlap
  kPermission,    // the node does not match the client certificate
  kHelloTimeout,  // no Hello within the timeout
  kLimit,         // a limit (max nodes, max sessions)
  kShuttingDown,
  kCount,
};
absl::string_view RefusalReasonName(RefusalReason r);

// How a stream that had said Hello ended.
enum class EndReason : uint8_t {
  kClientClosed,   // the agent closed its side
  kCancelled,      // cancelled or broken (network, deadline, a message over the size limit)
  kReplaced,       // a newer session of the same node took over
  kProtocolError,  // a malformed message (INVALID_ARGUMENT)
  kLimit,          // a limit (RESOURCE_EXHAUSTED) or the journal backlog (UNAVAILABLE)
  kShutdown,
  kCount,
};
absl::string_view EndReasonName(EndReason r);

// Counter-step classes (the `kind` label of sample_steps_total).
inline constexpr size_t kStepKinds = 8;  // analysis::StepKind values

template <typename Enum>
using CounterArray = std::array<std::atomic<uint64_t>, static_cast<size_t>(Enum::kCount)>;

struct IngestStats {
  CounterArray<MessageType> messages{};
  std::atomic<uint64_t> samples{0};  // taken in
  CounterArray<SampleRejection> samples_rejected{};
  std::array<std::atomic<uint64_t>, kStepKinds> steps{};
  std::atomic<uint64_t> collective_records{0};
  std::atomic<uint64_t> link_events{0};
  std::atomic<uint64_t> plugin_dropped_records{0};
  std::atomic<uint64_t> unparsable{0};    // messages that are no AgentMessage
  std::atomic<uint64_t> duplicates{0};    // sequenced messages at or below the watermark
  std::atomic<uint64_t> gap_messages{0};  // seqs skipped over (the agent no longer had them)
  std::atomic<uint64_t> acks{0};
  std::atomic<uint64_t> series_defined{0};
  std::atomic<uint64_t> series_redefined{0};
  CounterArray<LimitReason> limit_rejections{};
  CounterArray<RefusalReason> refusals{};
  CounterArray<EndReason> ends{};
  std::atomic<uint64_t> sessions_started{0};  // Hello accepted
  std::atomic<int64_t> sessions_active{0};    // streams open (with or without Hello)
  std::atomic<int64_t> admissions_queued{0};  // definitions waiting for an admission thread
  // Definitions by reference (definition_catalog.h).
  std::atomic<uint64_t> defs_by_reference{0};  // sessions defined from a held set
  std::atomic<uint64_t> definition_sets_learned{0};
  std::atomic<uint64_t> definition_sets_refused{0};  // complete_digest did not match the defs
  std::atomic<int64_t> definition_sets{0};           // held now

  template <typename Enum>
  static void Add(CounterArray<Enum>& a, Enum e, uint64_t n = 1) {
    a[static_cast<size_t>(e)].fetch_add(n, std::memory_order_relaxed);
  }
  static void Add(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
  }
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_INGEST_INGEST_STATS_H_
