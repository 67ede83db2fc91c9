// The aggregator's ingest logic without the transport: sessions' Hellos, dedup by (node,
// agent_epoch, seq), series definitions and samples into analysis::SeriesStore, collective records
// and link events into the journal and into bounded per-node windows, the ack watermarks, and
// per-node freshness. The gRPC reactor (ingest_service) feeds it one message at a time; tests and
// the detectors read it through the accessors at the bottom.
//
// Locking: one mutex per node (different nodes are ingested in parallel), taken after a session's
// own mutex and never held while calling a session or the journal's writer.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_INGEST_INGEST_CORE_H_
#define RINGSIDE_DAEMON_AGGREGATOR_INGEST_INGEST_CORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "analysis/series_state.h"
#include "daemon/aggregator/ingest/ingest_stats.h"
#include "daemon/aggregator/ingest/sample_batch_view.h"
#include "daemon/aggregator/ingest/series_defs_view.h"
#include "daemon/aggregator/journal/journal.h"
#include "daemon/common/protocol.h"
#include "daemon/common/steady_time.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::daemon {

struct IngestLimits {
  size_t max_nodes = 10000;
  size_t max_series_per_node = 10000;
  size_t max_defs_per_message = 10000;
  size_t max_message_bytes = 4u << 20;  // enforced by gRPC (max receive message size)
  size_t max_name_bytes = 256;          // node, source, device, port, counter, unit
  size_t max_epochs_per_node = 4;       // agent restarts remembered per node (oldest forgotten)
  size_t max_sessions = 0;              // open streams; 0: 2 x max_nodes + 64
};

// Recent collective records and link events kept per node for the detectors.
struct WindowOptions {
  size_t collective_records_per_node = 1024;
  size_t link_events_per_node = 256;
};

struct IngestOptions {
  // The protocol versions this aggregator speaks (tests narrow them to exercise refusals).
  uint32_t min_protocol_version = kMinProtocolVersion;
  uint32_t max_protocol_version = kProtocolVersion;
  IngestLimits limits;
  WindowOptions windows;
  absl::Duration stale_after = absl::Seconds(30);
  // The wall clock (last_seen, receive times) and the interval clock staleness is judged on, so
  // that a step of the wall clock neither marks every node stale nor keeps a dead one fresh.
  std::function<absl::Time()> now = absl::Now;
  std::function<absl::Time()> steady_now = SteadyNow;
  std::function<void(const std::string&)> log;
  // This aggregator was started without --peers: the first agent whose Hello says it streams to
  // several replicas ("replicas=N") makes it log a warning (docs/deploy.md: a replica restarted
  // with an empty state dir without --peers pages the open incidents again).
  bool warn_replicas_without_peers = false;
};

struct ReceivedCollective {
  absl::Time received;
  uint64_t agent_epoch = 0;
  uint64_t seq = 0;  // of the message that carried it
  v1::CollectiveRecord record;
};

struct ReceivedLinkEvent {
  absl::Time received;
  uint64_t agent_epoch = 0;
  uint64_t seq = 0;
  v1::LinkEvent event;
};

struct EpochStatus {
  uint64_t agent_epoch = 0;
  uint64_t received_seq = 0;  // highest seq taken in (payloads queued to the journal included)
  uint64_t acked_seq = 0;     // what may be acknowledged (every payload at or below it durable)
};

struct NodeStatus {
  std::string node;
  absl::Time last_seen;  // the aggregator's clock at the node's last message
  // No message for longer than stale_after, measured on the monotonic clock (steady_now), not
  // from last_seen; never for a collectives-only node.
  bool stale = false;
  // Only collective records come here: the node's counters go to another shard (its agent said so
  // in its Hello's capabilities), so its silence between jobs is no sign of trouble.
  bool collectives_only = false;
  bool session_active = false;
  uint64_t current_epoch = 0;  // of the latest Hello (0 before any since start)
  std::string agent_version;   // from the latest Hello (empty before any since start)
  size_t series = 0;
  size_t collective_records = 0;  // in the window
  size_t link_events = 0;         // in the window
  std::vector<EpochStatus> epochs;
};

// A node whose staleness changed (IngestCore::StaleChanges).
struct StaleChange {
  std::string node;
  bool stale = false;
  absl::Time last_seen;  // as NodeStatus::last_seen
};

struct IngestTotals {
  size_t nodes = 0;
  size_t stale_nodes = 0;
  size_t series = 0;
  size_t state_bytes = 0;  // series tables and interned names
  size_t window_collective_records = 0;
  size_t window_link_events = 0;
  size_t active_sessions = 0;  // nodes with a session
};

// What ingest takes in, for the analysis host (the detectors): called on the ingest threads, in
// order per node, with the node's lock held — so be quick and never block (copy into a queue the
// analysis thread drains). Each message is seen once (duplicates are not); payloads are seen when
// they are taken in (with a journal: queued, not yet durable), and journal replay at start is not
// seen (IngestCore::RecentCollectives has it). Views are valid only during the call.
class IngestObserver {
 public:
  virtual ~IngestObserver() = default;
  // The accepted samples of one SampleBatch (undefined ids and out-of-order samples left out).
  virtual void OnSamples(absl::string_view node,
                         absl::Span<const analysis::ObservedSample> samples) {}
  virtual void OnCollectives(absl::string_view node, uint64_t agent_epoch, uint64_t seq,
                             absl::Time received, const v1::CollectiveBatch& batch) {}
  virtual void OnLinkEvents(absl::string_view node, uint64_t agent_epoch, uint64_t seq,
                            absl::Time received, const v1::LinkEvents& events) {}
  // The node's complete set of info records (SeriesDefs.info), each time the agent sends it.
  // Only info and has_info are meant: defs may be empty (ingest reads them without the message).
  virtual void OnInfo(absl::string_view node, const v1::SeriesDefs& defs) {}
  // The node's latest Hello offers only collectives: its agent moved to another shard
  // (docs/scale.md), which has its counters and info records from now on. Called at each such
  // Hello (also the first one, after this aggregator restarted).
  virtual void OnCountersElsewhere(absl::string_view node) {}
};

// The stream session as the core sees it (implemented by the gRPC reactor).
class SessionLink {
 public:
  virtual ~SessionLink() = default;
  // A newer session of the same node took over: end with `status`.
  virtual void Replace(absl::Status status) = 0;
  // More may be acknowledged now (a journal commit): send an Ack if there is news.
  virtual void AckReady() = 0;
};

class IngestCore {
 public:
  struct NodeEntry;  // opaque to callers

  struct SessionStart {
    std::shared_ptr<NodeEntry> node;
    uint64_t acked_seq = 0;                 // for HelloAck
    uint32_t protocol_version = 0;          // negotiated
    std::shared_ptr<SessionLink> replaced;  // the older session, to be told (outside any lock)
  };

  IngestCore(IngestOptions options, IngestStats* stats);
  ~IngestCore();

  // With a journal, payloads are durable before they are acknowledged. Set before any session.
  void SetJournal(Journal* journal) { journal_ = journal; }
  // Set before any session; must outlive the core's sessions.
  void SetObserver(IngestObserver* observer) { observer_ = observer; }

  // Journal replay at startup.
  void RestoreEntry(const JournalEntry& entry);
  void RestoreWatermarks(const std::vector<Watermark>& marks);

  // A session's Hello (the node name is already checked against the peer certificate).
  // InvalidArgument for a malformed Hello, FailedPrecondition when the protocol version ranges do
  // not overlap, ResourceExhausted past max_nodes.
  absl::StatusOr<SessionStart> Hello(const v1::Hello& hello, uint64_t session_id,
                                     std::weak_ptr<SessionLink> session);

  // One message after the Hello. OK: continue (including duplicates, dropped and counted).
  // Otherwise the status to end the session with: InvalidArgument (malformed), ResourceExhausted
  // (a limit), Unavailable (journal backlog full), Aborted (replaced by a newer session).
  absl::Status Apply(NodeEntry& node, uint64_t agent_epoch, uint64_t session_id,
                     const v1::AgentMessage& message);

  // A SeriesDefs with seq 0 read straight from the wire (series_defs_view.h): what Apply does with
  // it, without the parsed message. Its views must stay valid during the call.
  absl::Status ApplySeriesDefs(NodeEntry& node, uint64_t session_id, const SeriesDefsView& defs);
  // Defines the node's series from a definition set the aggregator holds (definitions by
  // reference, definition_catalog.h), as a SeriesDefs of them would, without counting a message.
  // `identity_hints`: the set's (NodeSeries::DefineAll).
  absl::Status DefineFromSet(NodeEntry& node, uint64_t session_id,
                             absl::Span<const analysis::SeriesDefinitionRef> defs,
                             absl::Span<std::atomic<uint64_t>> identity_hints = {});

  // A message whose body is a SampleBatch, read straight from the wire (sample_batch_view.h):
  // what Apply does with it, without the parsed message.
  absl::Status ApplySamples(NodeEntry& node, uint64_t agent_epoch, uint64_t session_id,
                            const SampleBatchView& batch);

  // The seq an Ack may carry for this session now.
  uint64_t Ackable(NodeEntry& node, uint64_t agent_epoch);

  void EndSession(NodeEntry& node, uint64_t session_id);

  // Every epoch's ackable watermark, for journal checkpoints.
  std::vector<Watermark> Watermarks() const;

  // --- Readers (any thread) ---
  std::vector<NodeStatus> Nodes() const;
  std::optional<NodeStatus> Node(const std::string& node) const;
  // The nodes whose staleness changed since the previous call (a node is first taken as not
  // stale), sorted by name: each change once. For the housekeeping log, twice a second: it visits
  // every node but builds no NodeStatus (Nodes() at 12,500 nodes, every 500 ms, was 7 % of the
  // aggregator's CPU). One caller at a time.
  std::vector<StaleChange> StaleChanges();
  // NotFound for an unknown node.
  absl::StatusOr<std::vector<analysis::SeriesView>> Series(const std::string& node) const;
  // The window of recent collective records / link events of a node, oldest first.
  std::vector<ReceivedCollective> RecentCollectives(const std::string& node) const;
  std::vector<ReceivedLinkEvent> RecentLinkEvents(const std::string& node) const;
  IngestTotals Totals() const;

  const IngestOptions& options() const { return options_; }
  const analysis::SeriesStore& store() const { return store_; }

 private:
  std::shared_ptr<NodeEntry> FindNode(const std::string& node) const;
  absl::StatusOr<std::shared_ptr<NodeEntry>> GetOrAddNode(const std::string& node);
  std::vector<std::shared_ptr<NodeEntry>> AllNodes() const;
  void OnDurable(const std::shared_ptr<NodeEntry>& node, uint64_t agent_epoch, uint64_t seq);
  // A SeriesDefs's definitions and info records, with the node's lock held.
  absl::Status DefineAllLocked(NodeEntry& node,
                               absl::Span<const analysis::SeriesDefinitionRef> defs,
                               absl::Span<std::atomic<uint64_t>> identity_hints = {});
  absl::Status DefineLocked(NodeEntry& node, const SeriesDefsView& defs);
  // A SampleBatch's samples (its seq already judged new), with the node's lock held.
  absl::Status SamplesLocked(NodeEntry& node, uint64_t seq, absl::Time now,
                             int64_t timestamp_unix_nanos, absl::Span<const uint32_t> ids,
                             absl::Span<const uint64_t> values);
  // A message of `session_id` came for `node` (its lock held): Aborted when a newer session owns
  // the node, else the node is seen now (`now` on the wall clock, `steady` on steady_now).
  absl::Status TakeMessageLocked(NodeEntry& node, uint64_t session_id, absl::Time now,
                                 absl::Time steady);

  const IngestOptions options_;
  IngestStats* const stats_;
  Journal* journal_ = nullptr;
  IngestObserver* observer_ = nullptr;
  analysis::SeriesStore store_;
  const absl::Time started_;
  const absl::Time started_steady_;  // options_.steady_now() at construction
  std::atomic<bool> warned_replicas_{false};  // warn_replicas_without_peers: logged once

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<NodeEntry>> nodes_ ABSL_GUARDED_BY(mu_);
};

// Whether `name` may be a node name: 1..max_bytes of [A-Za-z0-9._:@-].
bool ValidNodeName(absl::string_view name, size_t max_bytes);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_INGEST_INGEST_CORE_H_
