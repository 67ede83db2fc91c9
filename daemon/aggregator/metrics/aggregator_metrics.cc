#include "daemon/aggregator/metrics/aggregator_metrics.h"

#include <dirent.h>
#include <sys/resource.h>

#include <map>
#include <utility>

#include "absl/time/time.h"
#include "analysis/series_state.h"
#include "daemon/aggregator/metrics/catalog_families.h"

namespace ringside::daemon {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;


// Open file descriptors of this process (/proc/self/fd, less the one reading it); -1 if unknown.
double OpenFds() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  double n = 0;
  while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n - 1;
}

double Load(const std::atomic<uint64_t>& a) {
  return static_cast<double>(a.load(std::memory_order_relaxed));
}

template <typename Enum, size_t N>
void AddEnum(CatalogFamilies& out, absl::string_view family, absl::string_view label,
             const std::array<std::atomic<uint64_t>, N>& counters,
             absl::string_view (*name)(Enum)) {
  for (size_t i = 0; i < counters.size(); ++i) {
    out.Add(family, {{std::string(label), std::string(name(static_cast<Enum>(i)))}},
            Load(counters[i]));
  }
}

}  // namespace

const std::vector<AggregatorMetricSpec>& AggregatorMetricCatalog() {
  static const auto* catalog = new std::vector<AggregatorMetricSpec>{
      {"ringside_aggregator_build_info", MetricType::Gauge, "version",
       "Always 1; the aggregator's version as a label."},
      {"ringside_aggregator_messages_received_total", MetricType::Counter, "type",
       "Stream messages received, by type (hello, series_defs, samples, collectives, link_events, "
       "other), duplicates included."},
      {"ringside_aggregator_unparsable_messages_total", MetricType::Counter, "",
       "Stream messages that did not parse as an AgentMessage (the stream ends with "
       "INVALID_ARGUMENT)."},
      {"ringside_aggregator_samples_received_total", MetricType::Counter, "",
       "Sample values taken into series state."},
      {"ringside_aggregator_samples_rejected_total", MetricType::Counter, "reason",
       "Sample values skipped: undefined_id (never defined for the node), out_of_order (not newer "
       "than the series' last sample)."},
      {"ringside_aggregator_sample_steps_total", MetricType::Counter, "kind",
       "Samples taken in, by how the step was classified: baseline, normal, wrap, reset, "
       "saturated, invalid, value (gauges and states)."},
      {"ringside_aggregator_collective_records_received_total", MetricType::Counter, "",
       "Collective records received (each once: duplicates are not counted)."},
      {"ringside_aggregator_link_events_received_total", MetricType::Counter, "",
       "Link events received (each once)."},
      {"ringside_aggregator_plugin_dropped_records_total", MetricType::Counter, "",
       "Collective records the NCCL plugins reported dropping, summed over agents."},
      {"ringside_aggregator_duplicate_messages_total", MetricType::Counter, "",
       "Sequenced messages dropped as duplicates (seq at or below the epoch's watermark)."},
      {"ringside_aggregator_sequence_gap_messages_total", MetricType::Counter, "",
       "Sequence numbers skipped over: messages the agent no longer held (dropped from its "
       "buffer) or whose watermark a restart lost."},
      {"ringside_aggregator_acks_sent_total", MetricType::Counter, "", "Acks sent to agents."},
      {"ringside_aggregator_series_defined_total", MetricType::Counter, "",
       "Series ids defined for the first time."},
      {"ringside_aggregator_series_redefined_total", MetricType::Counter, "",
       "Series ids redefined with a changed definition."},
      {"ringside_aggregator_limit_rejections_total", MetricType::Counter, "reason",
       "Things refused by a limit: max_nodes, max_series_per_node, max_defs_per_message, "
       "max_sessions, journal_backlog, max_message_bytes."},
      {"ringside_aggregator_sessions_refused_total", MetricType::Counter, "reason",
       "Streams refused at or before their Hello: no_hello, bad_hello, version, permission, "
       "hello_timeout, limit, shutting_down, cancelled (ended before a Hello by the client or by "
       "gRPC: a message over --max-message-bytes)."},
      {"ringside_aggregator_sessions_ended_total", MetricType::Counter, "reason",
       "Sessions (after a Hello) that ended: client_closed, cancelled, replaced, protocol_error, "
       "limit, shutdown."},
      {"ringside_aggregator_sessions_started_total", MetricType::Counter, "",
       "Sessions whose Hello was accepted."},
      {"ringside_aggregator_sessions_active", MetricType::Gauge, "", "Nodes with a live session."},
      {"ringside_aggregator_streams_open", MetricType::Gauge, "",
       "Ingest streams open, with or without a Hello."},
      {"ringside_aggregator_admissions_queued", MetricType::Gauge, "",
       "Streams whose definitions (the SeriesDefs after their Hello) wait for an admission "
       "thread (--admission-threads): high during a reconnection storm, 0 otherwise."},
      {"ringside_aggregator_definitions_by_reference_total", MetricType::Counter, "",
       "Sessions whose node's series were defined from a definition set this aggregator held "
       "(the Hello's defs_digest), so that the agent sent none of those definitions."},
      {"ringside_aggregator_definition_sets_learned_total", MetricType::Counter, "",
       "Definition sets kept after an agent sent one whole with its digest, checked here."},
      {"ringside_aggregator_definition_sets_refused_total", MetricType::Counter, "",
       "Definition sets not kept: the digest the agent sent did not match the definitions "
       "received (an agent bug or a rogue client), or the ids did not ascend."},
      {"ringside_aggregator_definition_sets", MetricType::Gauge, "",
       "Definition sets held to answer Hellos by reference (at most 64; the least recently used "
       "goes first)."},
      {"ringside_aggregator_open_fds", MetricType::Gauge, "",
       "File descriptors open: one per gRPC connection (agents, queries, idle or hostile clients "
       "until --handshake-timeout or --max-connection-idle closes them), plus journal and "
       "database files."},
      {"ringside_aggregator_max_fds", MetricType::Gauge, "",
       "The open file limit (RLIMIT_NOFILE, raised to its hard limit at start)."},
      {"ringside_aggregator_nodes", MetricType::Gauge, "", "Nodes known."},
      {"ringside_aggregator_nodes_stale", MetricType::Gauge, "",
       "Known nodes with no message for longer than --stale-after."},
      {"ringside_aggregator_series", MetricType::Gauge, "", "Series defined, all nodes."},
      {"ringside_aggregator_series_state_bytes", MetricType::Gauge, "",
       "Bytes of series state: every node's series table (60 bytes a series) and the shared "
       "pool of series identities."},
      {"ringside_aggregator_window_collective_records", MetricType::Gauge, "",
       "Collective records held in the per-node windows."},
      {"ringside_aggregator_window_link_events", MetricType::Gauge, "",
       "Link events held in the per-node windows."},
      {"ringside_aggregator_node_last_seen_timestamp_seconds", MetricType::Gauge, "node",
       "When the node's last message arrived (aggregator clock, Unix seconds)."},
      {"ringside_aggregator_node_stale", MetricType::Gauge, "node",
       "1 when the node sent nothing for longer than --stale-after, else 0."},
      {"ringside_aggregator_node_series", MetricType::Gauge, "node", "Series defined by the node."},
      {"ringside_aggregator_journal_enabled", MetricType::Gauge, "",
       "1 with --state-dir (durable journal), 0 in memory-only mode."},
      {"ringside_aggregator_journal_healthy", MetricType::Gauge, "",
       "1 when the journal's last write succeeded; 0 while writes fail (nothing is acked)."},
      {"ringside_aggregator_journal_bytes", MetricType::Gauge, "",
       "Bytes of journal segments on disk."},
      {"ringside_aggregator_journal_segments", MetricType::Gauge, "", "Journal segments on disk."},
      {"ringside_aggregator_journal_pending_bytes", MetricType::Gauge, "",
       "Journal bytes queued, not yet durable."},
      {"ringside_aggregator_journal_records_written_total", MetricType::Counter, "",
       "Payload records made durable."},
      {"ringside_aggregator_journal_commits_total", MetricType::Counter, "",
       "Group commits (one write and one fdatasync each)."},
      {"ringside_aggregator_journal_write_errors_total", MetricType::Counter, "",
       "Failed journal writes or syncs (full disk, I/O error)."},
      {"ringside_aggregator_journal_segments_deleted_total", MetricType::Counter, "",
       "Old segments deleted to stay within --journal-max-bytes."},
      // Alert delivery (daemon/aggregator/alerts/alert_metrics.cc, docs/alerts.md).
      {"ringside_aggregator_alert_deliveries_total", MetricType::Counter, "receiver, type, result",
       "Alert delivery attempts per receiver (type alertmanager or webhook), by result: ok (2xx) "
       "or failed (error, timeout or non-2xx)."},
      {"ringside_aggregator_alert_retries_total", MetricType::Counter, "receiver, type",
       "Delivery attempts made after a failed one (jittered exponential backoff)."},
      {"ringside_aggregator_alert_dropped_total", MetricType::Counter, "receiver, type, reason",
       "Alert events given up: queue_full (pushed out of --alert-queue-size), expired (older than "
       "--webhook-max-age), rejected (a 4xx other than 408/429)."},
      {"ringside_aggregator_alert_duplicates_skipped_total", MetricType::Counter, "receiver, type",
       "Alert events not sent because the receiver already has them (e.g. before a restart)."},
      {"ringside_aggregator_alert_queue_length", MetricType::Gauge, "receiver, type",
       "Alert events waiting to be delivered."},
      {"ringside_aggregator_alert_last_delivery_timestamp_seconds", MetricType::Gauge,
       "receiver, type", "When the receiver last accepted a delivery (Unix seconds)."},
      // Cross-shard attribution (daemon/aggregator/shards/shard_watch.cc, docs/scale.md).
      {"ringside_aggregator_shard_watch_up", MetricType::Gauge, "shard",
       "1 while this aggregator's watch of another shard's incidents is connected (--shard-map)."},
      {"ringside_aggregator_shard_watch_snapshots_total", MetricType::Counter, "shard",
       "Snapshots of another shard's incidents taken (one per connection)."},
      {"ringside_aggregator_shard_watch_changes_total", MetricType::Counter, "shard",
       "Incident changes received from another shard's WatchIncidents stream."},
      {"ringside_aggregator_shard_watch_failures_total", MetricType::Counter, "shard",
       "Connections to another shard that failed or ended (each is retried with backoff)."},
      // The Query API (daemon/aggregator/query/query_api.cc, docs/query-api.md).
      {"ringside_aggregator_query_watchers", MetricType::Gauge, "",
       "WatchIncidents streams open."},
      {"ringside_aggregator_query_watchers_cut_off_total", MetricType::Counter, "",
       "WatchIncidents streams ended with RESOURCE_EXHAUSTED for falling more than "
       "--watch-queue-limit (1024) incident changes behind."},
  };
  return *catalog;
}

std::vector<MetricFamily> AggregatorCollectable::Collect() const {
  CatalogFamilies out(AggregatorMetricCatalog());
  const IngestStats& s = *stats_;
  out.Add("ringside_aggregator_build_info", {{"version", version_}}, 1);
  AddEnum(out, "ringside_aggregator_messages_received_total", "type", s.messages, MessageTypeName);
  out.Add("ringside_aggregator_unparsable_messages_total", {}, Load(s.unparsable));
  out.Add("ringside_aggregator_samples_received_total", {}, Load(s.samples));
  AddEnum(out, "ringside_aggregator_samples_rejected_total", "reason", s.samples_rejected,
          SampleRejectionName);
  for (size_t k = 1; k < kStepKinds; ++k) {  // kNone never counts
    out.Add("ringside_aggregator_sample_steps_total",
            {{"kind", std::string(analysis::StepKindName(static_cast<analysis::StepKind>(k)))}},
            Load(s.steps[k]));
  }
  out.Add("ringside_aggregator_collective_records_received_total", {}, Load(s.collective_records));
  out.Add("ringside_aggregator_link_events_received_total", {}, Load(s.link_events));
  out.Add("ringside_aggregator_plugin_dropped_records_total", {}, Load(s.plugin_dropped_records));
  out.Add("ringside_aggregator_duplicate_messages_total", {}, Load(s.duplicates));
  out.Add("ringside_aggregator_sequence_gap_messages_total", {}, Load(s.gap_messages));
  out.Add("ringside_aggregator_acks_sent_total", {}, Load(s.acks));
  out.Add("ringside_aggregator_series_defined_total", {}, Load(s.series_defined));
  out.Add("ringside_aggregator_series_redefined_total", {}, Load(s.series_redefined));
  AddEnum(out, "ringside_aggregator_limit_rejections_total", "reason", s.limit_rejections,
          LimitReasonName);
  AddEnum(out, "ringside_aggregator_sessions_refused_total", "reason", s.refusals,
          RefusalReasonName);
  AddEnum(out, "ringside_aggregator_sessions_ended_total", "reason", s.ends, EndReasonName);
  out.Add("ringside_aggregator_sessions_started_total", {}, Load(s.sessions_started));
  out.Add("ringside_aggregator_streams_open", {},
          static_cast<double>(s.sessions_active.load(std::memory_order_relaxed)));
  out.Add("ringside_aggregator_admissions_queued", {},
          static_cast<double>(s.admissions_queued.load(std::memory_order_relaxed)));
  out.Add("ringside_aggregator_definitions_by_reference_total", {}, Load(s.defs_by_reference));
  out.Add("ringside_aggregator_definition_sets_learned_total", {},
          Load(s.definition_sets_learned));
  out.Add("ringside_aggregator_definition_sets_refused_total", {},
          Load(s.definition_sets_refused));
  out.Add("ringside_aggregator_definition_sets", {},
          static_cast<double>(s.definition_sets.load(std::memory_order_relaxed)));
  out.Add("ringside_aggregator_open_fds", {}, OpenFds());
  rlimit lim = {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    out.Add("ringside_aggregator_max_fds", {},
            lim.rlim_cur == RLIM_INFINITY ? -1 : static_cast<double>(lim.rlim_cur));
  }

  const IngestTotals t = core_->Totals();
  out.Add("ringside_aggregator_sessions_active", {}, static_cast<double>(t.active_sessions));
  out.Add("ringside_aggregator_nodes", {}, static_cast<double>(t.nodes));
  out.Add("ringside_aggregator_nodes_stale", {}, static_cast<double>(t.stale_nodes));
  out.Add("ringside_aggregator_series", {}, static_cast<double>(t.series));
  out.Add("ringside_aggregator_series_state_bytes", {}, static_cast<double>(t.state_bytes));
  out.Add("ringside_aggregator_window_collective_records", {},
          static_cast<double>(t.window_collective_records));
  out.Add("ringside_aggregator_window_link_events", {}, static_cast<double>(t.window_link_events));
  for (const NodeStatus& n : core_->Nodes()) {
    out.Add("ringside_aggregator_node_last_seen_timestamp_seconds", {{"node", n.node}},
            absl::ToDoubleSeconds(n.last_seen - absl::UnixEpoch()));
    out.Add("ringside_aggregator_node_stale", {{"node", n.node}}, n.stale ? 1 : 0);
    out.Add("ringside_aggregator_node_series", {{"node", n.node}}, static_cast<double>(n.series));
  }

  out.Add("ringside_aggregator_journal_enabled", {}, journal_ != nullptr ? 1 : 0);
  if (journal_ != nullptr) {
    const JournalStats j = journal_->stats();
    out.Add("ringside_aggregator_journal_healthy", {}, j.healthy ? 1 : 0);
    out.Add("ringside_aggregator_journal_bytes", {}, static_cast<double>(j.bytes));
    out.Add("ringside_aggregator_journal_segments", {}, static_cast<double>(j.segments));
    out.Add("ringside_aggregator_journal_pending_bytes", {}, static_cast<double>(j.pending_bytes));
    out.Add("ringside_aggregator_journal_records_written_total", {},
            static_cast<double>(j.records_written));
    out.Add("ringside_aggregator_journal_commits_total", {}, static_cast<double>(j.commits));
    out.Add("ringside_aggregator_journal_write_errors_total", {},
            static_cast<double>(j.write_errors));
    out.Add("ringside_aggregator_journal_segments_deleted_total", {},
            static_cast<double>(j.segments_deleted));
  }
  return out.Take();
}

}  // namespace ringside::daemon
