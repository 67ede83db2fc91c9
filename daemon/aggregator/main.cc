// ringside-aggregator: receives the agents' streams (gRPC ringside.v1 Ingest on --listen), keeps
// per-series state and recent collective records and link events, journals payloads durably with
// --state-dir, and serves /metrics, /healthz, /readyz and /api/v1/... on --http-listen. Flags are
// parsed here only and turned into AggregatorOptions (docs/aggregator.md).
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "analysis/detection_options.h"
#include "daemon/aggregator/aggregator.h"
#include "daemon/aggregator/alerts/alert_dispatcher.h"
#include "daemon/aggregator/alerts/repeated_flags.h"
#include "daemon/aggregator/analysis_host.h"
#include "daemon/aggregator/ingest/observer_fanout.h"
#include "daemon/aggregator/metrics/analysis_metrics.h"
#include "daemon/aggregator/query/aggregator_json.h"
#include "daemon/aggregator/query/query_api.h"
#include "daemon/aggregator/shards/peer_incidents.h"
#include "daemon/aggregator/shards/shard_watch.h"
#include "daemon/aggregator/topology/discovered_fabric.h"
#include "daemon/common/flags.h"
#include "daemon/common/log.h"
#include "daemon/common/progress_watch.h"
#include "daemon/common/shard_files.h"
#include "daemon/common/signals.h"
#include "daemon/common/systemd_notify.h"

ABSL_FLAG(std::string, listen, ":9472",
          "gRPC ingest address, [host]:port (port 0 picks a free one).");
ABSL_FLAG(std::string, http_listen, ":9473",
          "Address of /metrics, /healthz, /readyz and /api/v1/...; empty to serve none.");
ABSL_FLAG(std::string, web_config_file, "",
          "exporter-toolkit web configuration for --http-listen (also spelled "
          "--web.config.file): TLS, client certificates, bcrypt basic_auth_users, headers; re-read "
          "when it or the files it names change. Empty: plaintext, where /api/v1 answers only "
          "loopback peers unless --allow-insecure. /healthz and /readyz stay open for probes "
          "(docs/http-security.md).");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain of the aggregator.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of the aggregator.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA: agents must present a certificate it signed (mTLS), and the node name in their "
          "Hello must match it.");
ABSL_FLAG(bool, allow_insecure, false,
          "Allow plaintext on a non-loopback --listen, and the plaintext JSON API (/api/v1) to "
          "non-loopback peers.");
ABSL_FLAG(std::string, reader_identities, "",
          "Client-certificate names (common name or DNS SAN; a trailing * matches a prefix) that "
          "have the reader role on the Query API (the CLI, Grafana's source, the other shards' "
          "aggregators for --peers and cross-shard watching). Under TLS every other certificate "
          "is an agent's: it may only ingest, as its own node. Comma-separated.");
ABSL_FLAG(std::string, reader_token_file, "",
          "File of read-only bearer tokens for the Query API, one per line (ringside "
          "--token-file); re-read when it changes. With it, clients without a certificate may "
          "connect, and only a token or a reader certificate lets them read.");
ABSL_FLAG(std::string, peer_token_file, "",
          "A read-only token this aggregator presents to the other aggregators' Query API (for "
          "--peers and cross-shard watching), instead of relying on its certificate being in "
          "their --reader-identities.");
ABSL_FLAG(absl::Duration, tls_refresh_interval, absl::Seconds(60),
          "How often --tls-cert, --tls-key and --tls-ca are checked for renewal: new connections "
          "use the new files, open streams go on.");
ABSL_FLAG(std::string, peers, "",
          "The other replicas of this aggregator's shard (host:port of their gRPC, comma-"
          "separated): at start, before alerting, their open incidents are taken over, so a "
          "restarted or replaced replica pages nobody again (needs --state-dir).");
ABSL_FLAG(absl::Duration, peer_timeout, absl::Seconds(5),
          "How long to wait for each peer at start.");
ABSL_FLAG(std::string, shard_map, "",
          "The shard map the agents use (a file, or statefulset:COUNT:TEMPLATE[,TEMPLATE]; "
          "docs/scale.md). With --shard, this aggregator watches every OTHER shard's incidents "
          "(WatchIncidents, either replica), so a straggler of a job hosted here is attributed "
          "to a fabric incident raised by another shard, and that incident lists the job.");
ABSL_FLAG(std::string, shard, "",
          "This aggregator's shard in --shard-map: its name (shard-0) or its index (0).");
ABSL_FLAG(bool, detect, true,
          "Run the detectors (link flaps, pause storms, congestion, degraded links, stragglers) "
          "over what the agents send, and log the incidents they open and resolve.");
ABSL_FLAG(std::string, topology, "",
          "ibnetdiscover output, or lines of \"node switch\", telling which leaf switch each node "
          "hangs off (for pause-storm spread and straggler causes).");
ABSL_FLAG(std::string, state_dir, "",
          "Folder of the durable journal (exactly-once across restarts); empty: memory only.");
ABSL_FLAG(bool, dump_journal, false,
          "Print the journal of --state-dir as JSON lines on stdout and exit.");
ABSL_FLAG(absl::Duration, stale_after, absl::Seconds(30),
          "A node that sent nothing for this long is marked stale.");
ABSL_FLAG(absl::Duration, hello_timeout, absl::Seconds(10),
          "A stream that sends no Hello within this long is closed.");
ABSL_FLAG(int64_t, max_nodes, 10000, "Nodes the aggregator accepts; more are refused.");
ABSL_FLAG(int64_t, max_series_per_node, 10000, "Series one node may define.");
ABSL_FLAG(int64_t, max_defs_per_message, 10000, "Series definitions in one SeriesDefs message.");
ABSL_FLAG(int64_t, max_message_bytes, 4 << 20, "Largest stream message accepted (bytes).");
ABSL_FLAG(int64_t, max_sessions, 0, "Open ingest streams at most (0: 2 x --max-nodes + 64).");
ABSL_FLAG(int, admission_threads, 0,
          "Threads that admit a node's series definitions after its Hello, off gRPC's threads "
          "(0: one per four cores, at least one).");
ABSL_FLAG(int, grpc_threads, 1,
          "Threads of the gRPC server (agents' streams and the Query API), each polling its own "
          "completion queue. 1 reads every socket on one thread, the least CPU a sample; more "
          "spread a shard over more cores at a higher cost a sample (docs/scale.md).");
ABSL_FLAG(int64_t, max_streams_per_connection, 16, "Concurrent streams on one connection.");
ABSL_FLAG(int64_t, window_collective_records, 1024,
          "Recent collective records kept in memory per node for the detectors.");
ABSL_FLAG(int64_t, window_link_events, 256, "Recent link events kept in memory per node.");
ABSL_FLAG(int64_t, journal_segment_bytes, 64 << 20, "Size at which a journal segment is closed.");
ABSL_FLAG(int64_t, journal_max_bytes, int64_t{1} << 30, "Journal size bound (all segments).");
ABSL_FLAG(std::string, journal_when_full, "delete-oldest",
          "At --journal-max-bytes: delete-oldest (drop the oldest segments) or stop (stop writing "
          "and acknowledging, as on a full disk).");
ABSL_FLAG(int64_t, journal_max_pending_bytes, 64 << 20,
          "Journal bytes that may wait for the disk; past it payloads are refused (UNAVAILABLE).");
ABSL_FLAG(absl::Duration, journal_retry_interval, absl::Seconds(1),
          "After a failed journal write, retry this often.");
ABSL_FLAG(absl::Duration, keepalive_time, absl::Seconds(30),
          "Ping an idle agent connection this often.");
ABSL_FLAG(absl::Duration, keepalive_timeout, absl::Seconds(10),
          "Drop a connection whose ping is not answered within this.");
ABSL_FLAG(int64_t, watch_queue_limit, 1024,
          "Incident changes queued for a WatchIncidents client that does not read; past it the "
          "watch is ended with RESOURCE_EXHAUSTED.");
ABSL_FLAG(absl::Duration, max_connection_idle, absl::Minutes(5),
          "Close a gRPC connection with no call open for this long (agents always have one).");
ABSL_FLAG(absl::Duration, handshake_timeout, absl::Seconds(10),
          "Close a gRPC connection that has not finished its TLS / HTTP/2 handshake within this.");

// Alerts (docs/alerts.md): incidents to Alertmanager and to signed webhooks.
ABSL_FLAG(std::string, alertmanager_url, "",
          "Alertmanager base URL(s), http://host:9093 or https://...; comma-separated or "
          "repeated. Each gets every alert (POST <url>/api/v2/alerts).");
ABSL_FLAG(std::string, webhook_url, "",
          "Webhook URL(s) that get every incident change as signed JSON; comma-separated or "
          "repeated.");
ABSL_FLAG(std::string, webhook_secret_file, "",
          "File holding the HMAC-SHA256 key of X-Ringside-Signature (one trailing newline is "
          "stripped); required with --webhook-url.");
ABSL_FLAG(std::string, runbook_base_url, ringside::daemon::kDefaultRunbookBaseUrl,
          "The runbook_url annotation is this + \"#<kind>\".");
ABSL_FLAG(absl::Duration, alert_resend_interval, absl::Seconds(60),
          "Re-send firing alerts to Alertmanager this often (keep it below its resolve_timeout).");
ABSL_FLAG(absl::Duration, webhook_max_age, absl::Hours(1),
          "Retry a webhook event (and a resolved alert) until it is this old, then drop it.");
ABSL_FLAG(int64_t, alert_queue_size, 10000,
          "Events queued per receiver at most; past it the oldest is dropped (and counted).");
ABSL_FLAG(absl::Duration, alert_timeout, absl::Seconds(10),
          "Timeout of one delivery (connect, send, answer).");
ABSL_FLAG(std::string, alert_ca, "",
          "PEM file of the CAs trusted for https:// Alertmanagers and webhooks (instead of the "
          "system CA store).");
ABSL_FLAG(std::string, alert_client_cert, "",
          "PEM client certificate presented to https:// receivers (an Alertmanager behind mTLS); "
          "with --alert-client-key.");
ABSL_FLAG(std::string, alert_client_key, "", "PEM private key of --alert-client-cert.");
ABSL_FLAG(absl::Duration, alert_retry_initial, absl::Seconds(1),
          "First retry delay after a failed delivery; doubles (±20% jitter) up to "
          "--alert-retry-max.");
ABSL_FLAG(absl::Duration, alert_retry_max, absl::Seconds(30), "Longest retry delay.");
ABSL_FLAG(absl::Duration, alert_batch_delay, ringside::daemon::kDefaultAlertBatchDelay,
          "Send an incident change to Alertmanager this long after it (changes within it go "
          "together).");
ABSL_FLAG(absl::Duration, alert_min_firing, ringside::daemon::kDefaultAlertMinFiring,
          "Send a resolved alert to Alertmanager no sooner than this after it first accepted the "
          "alert firing, so a short incident pages (once, across an Alertmanager cluster): at "
          "least group_wait + (peers - 1) x peer_timeout (docs/alerts.md).");
ABSL_FLAG(std::string, alert_min_firing_for, "",
          "--alert-min-firing per incident kind: kind=duration, comma-separated or repeated "
          "(e.g. link_down=90s).");

ABSL_FLAG(std::string, detection_config, "",
          "File of detector thresholds, one \"name = value\" per line (docs/detection.md; "
          "--list-detection-options prints every name with its default).");
ABSL_FLAG(std::vector<std::string>, detect_set, {},
          "Detector thresholds as name=value,name=value (after --detection-config), e.g. "
          "--detect-set=link.flap_window=5m,straggler.window=50.");
ABSL_FLAG(bool, list_detection_options, false,
          "Print every detector threshold with its value (after --detection-config and "
          "--detect-set) and exit.");
ABSL_FLAG(int64_t, metrics_max_links, 20000,
          "Series of ringside_link_health (and _flaps_in_window) on /metrics at most; past it the "
          "unhealthiest links are kept.");
ABSL_FLAG(int64_t, metrics_max_ports, 20000,
          "Series of each PFC paused-ratio and RoCE congestion-rate family on /metrics at most; "
          "past it the highest values are kept.");
ABSL_FLAG(int64_t, metrics_max_ranks, 20000,
          "Series of each ringside_straggler_* family on /metrics at most; past it the highest "
          "scores are kept.");
ABSL_FLAG(int64_t, metrics_max_jobs, 50,
          "Jobs with series of their own in ringside_collective_duration_seconds; records of "
          "further jobs count under job=\"_other\" (a job idle for 30 minutes gives its place).");

namespace {

using ringside::daemon::LogLine;

bool Positive(int64_t v, const char* name) {
  if (v > 0) return true;
  std::fprintf(stderr, "ringside-aggregator: --%s must be positive\n", name);
  return false;
}

// Each agent holds a connection (a file descriptor); so do idle or hostile clients until the
// --handshake-timeout / --max-connection-idle cut them off. The soft limit (1024 under many
// service managers) is raised to the hard one, so fds run out later than the connections the
// limits allow; ringside_aggregator_open_fds and _max_fds show both.
void RaiseOpenFileLimit() {
  rlimit lim = {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  const rlim_t was = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &lim) == 0) {
    LogLine(absl::StrCat("open file limit raised from ", was, " to ", lim.rlim_cur));
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, which leaves Mutex deadlock detection on: every lock
  // would update a global lock graph under a global spin lock. ringside's lock order is fixed and
  // its tests run under the same library, so production skips it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  {
    absl::FlagsUsageConfig usage;
    usage.version_string = [] { return std::string("ringside-aggregator " RINGSIDE_VERSION "\n"); };
    absl::SetFlagsUsageConfig(usage);
  }
  absl::SetProgramUsageMessage(
      "ringside-aggregator: receives ringside agents' streams.\n"
      "  ringside-aggregator --listen=:9472 --http-listen=:9473 --state-dir=/var/lib/ringside \\\n"
      "      --tls-cert=agg.pem --tls-key=agg.key --tls-ca=ca.pem\n"
      "  ringside-aggregator --dump-journal --state-dir=DIR");
  std::vector<std::string> args = ringside::daemon::NormalizeFlagNames(argc, argv);
  ringside::daemon::MergeRepeatedFlag(args, "alertmanager_url");  // repeatable list flags
  ringside::daemon::MergeRepeatedFlag(args, "webhook_url");
  ringside::daemon::MergeRepeatedFlag(args, "alert_min_firing_for");
  std::vector<char*> argp = ringside::daemon::ArgvPointers(args);
  absl::ParseCommandLine(static_cast<int>(args.size()), argp.data());
  ringside::daemon::SetLogProgram("ringside-aggregator");

  // Detector thresholds: defaults, then the file, then --detect-set.
  ringside::analysis::FabricAnalysisOptions detection;
  if (const std::string file = absl::GetFlag(FLAGS_detection_config); !file.empty()) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    absl::Status s = in ? ringside::analysis::ParseDetectionConfig(text.str(), detection)
                        : absl::NotFoundError("cannot read the file");
    if (!s.ok()) {
      std::fprintf(stderr, "ringside-aggregator: --detection-config=%s: %s\n", file.c_str(),
                   std::string(s.message()).c_str());
      return 2;
    }
  }
  for (const std::string& item : absl::GetFlag(FLAGS_detect_set)) {
    if (absl::Status s = ringside::analysis::ParseDetectionAssignments(item, detection); !s.ok()) {
      std::fprintf(stderr, "ringside-aggregator: --detect-set: %s\n",
                   std::string(s.message()).c_str());
      return 2;
    }
  }
  if (absl::GetFlag(FLAGS_list_detection_options)) {
    for (const auto& i : ringside::analysis::ListDetectionOptions(detection)) {
      std::printf("%-40s %-10s %-9s %s\n", i.name.c_str(), i.value.c_str(), i.type.c_str(),
                  i.help.c_str());
    }
    return 0;
  }

  const std::string state_dir = absl::GetFlag(FLAGS_state_dir);
  if (absl::GetFlag(FLAGS_dump_journal)) {
    if (state_dir.empty()) {
      std::fprintf(stderr, "ringside-aggregator: --dump-journal needs --state-dir\n");
      return 2;
    }
    ringside::daemon::JournalReadStats stats;
    absl::Status s =
        ringside::daemon::DumpJournalJson(absl::StrCat(state_dir, "/journal"), std::cout, &stats);
    if (!s.ok()) {
      std::fprintf(stderr, "ringside-aggregator: %s\n", s.ToString().c_str());
      return 1;
    }
    LogLine(absl::StrCat("journal: ", stats.segments, " segments, ", stats.bytes, " bytes, ",
                         stats.payloads - stats.duplicates, " payloads (", stats.duplicates,
                         " duplicates skipped, ", stats.corrupt_segments, " torn tails, ",
                         stats.unreadable_segments, " unreadable segments, ",
                         stats.unparsable_payloads, " unparsable)"));
    for (const std::string& d : stats.damage) LogLine(absl::StrCat("journal: ", d));
    return 0;
  }

  ringside::daemon::AggregatorOptions o;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.http_listen = absl::GetFlag(FLAGS_http_listen);
  o.web_config_file = absl::GetFlag(FLAGS_web_config_file);
  o.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  o.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  o.tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  o.tls.allow_insecure = absl::GetFlag(FLAGS_allow_insecure);
  o.tls.refresh_interval_s = static_cast<unsigned>(
      std::max<int64_t>(1, absl::ToInt64Seconds(absl::GetFlag(FLAGS_tls_refresh_interval))));
  {
    ringside::daemon::RoleOptions ro;
    ro.enforce = !o.tls.cert_file.empty();
    ro.reader_identities = absl::StrSplit(absl::GetFlag(FLAGS_reader_identities), ',',
                                          absl::SkipWhitespace());
    ro.reader_token_file = absl::GetFlag(FLAGS_reader_token_file);
    absl::StatusOr<std::shared_ptr<ringside::daemon::RoleAuthorizer>> roles =
        ringside::daemon::RoleAuthorizer::Create(ro);
    if (!roles.ok()) {
      std::fprintf(stderr, "ringside-aggregator: %s\n", roles.status().ToString().c_str());
      return 2;
    }
    o.roles = *roles;
    o.tls.client_cert_optional = o.roles->tokens_enabled();
  }
  o.state_dir = state_dir;
  o.stale_after = absl::GetFlag(FLAGS_stale_after);
  o.hello_timeout = absl::GetFlag(FLAGS_hello_timeout);
  const int64_t max_nodes = absl::GetFlag(FLAGS_max_nodes);
  const int64_t max_series = absl::GetFlag(FLAGS_max_series_per_node);
  const int64_t max_defs = absl::GetFlag(FLAGS_max_defs_per_message);
  const int64_t max_message = absl::GetFlag(FLAGS_max_message_bytes);
  const int64_t max_streams = absl::GetFlag(FLAGS_max_streams_per_connection);
  const int64_t segment = absl::GetFlag(FLAGS_journal_segment_bytes);
  const int64_t journal_max = absl::GetFlag(FLAGS_journal_max_bytes);
  const int64_t pending = absl::GetFlag(FLAGS_journal_max_pending_bytes);
  if (!Positive(max_nodes, "max-nodes") || !Positive(max_series, "max-series-per-node") ||
      !Positive(max_defs, "max-defs-per-message") || !Positive(max_message, "max-message-bytes") ||
      !Positive(max_streams, "max-streams-per-connection") ||
      !Positive(segment, "journal-segment-bytes") || !Positive(journal_max, "journal-max-bytes") ||
      !Positive(pending, "journal-max-pending-bytes")) {
    return 2;
  }
  if (absl::GetFlag(FLAGS_max_sessions) < 0 || absl::GetFlag(FLAGS_window_collective_records) < 0 ||
      absl::GetFlag(FLAGS_window_link_events) < 0) {
    std::fprintf(stderr, "ringside-aggregator: window and session limits cannot be negative\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_admission_threads) < 0 || absl::GetFlag(FLAGS_admission_threads) > 64) {
    std::fprintf(stderr, "ringside-aggregator: --admission-threads must be 0 (automatic) to 64\n");
    return 2;
  }
  o.admission_threads = absl::GetFlag(FLAGS_admission_threads);
  if (absl::GetFlag(FLAGS_grpc_threads) < 1 || absl::GetFlag(FLAGS_grpc_threads) > 64) {
    std::fprintf(stderr, "ringside-aggregator: --grpc-threads must be 1 to 64\n");
    return 2;
  }
  o.grpc_threads = absl::GetFlag(FLAGS_grpc_threads);
  o.limits.max_nodes = static_cast<size_t>(max_nodes);
  o.limits.max_series_per_node = static_cast<size_t>(max_series);
  o.limits.max_defs_per_message = static_cast<size_t>(max_defs);
  o.limits.max_message_bytes = static_cast<size_t>(max_message);
  o.limits.max_sessions = static_cast<size_t>(absl::GetFlag(FLAGS_max_sessions));
  o.max_streams_per_connection = static_cast<int>(max_streams);
  o.windows.collective_records_per_node =
      static_cast<size_t>(absl::GetFlag(FLAGS_window_collective_records));
  o.windows.link_events_per_node = static_cast<size_t>(absl::GetFlag(FLAGS_window_link_events));
  o.journal.segment_bytes = static_cast<uint64_t>(segment);
  o.journal.max_bytes = static_cast<uint64_t>(journal_max);
  o.journal.max_pending_bytes = static_cast<uint64_t>(pending);
  o.journal.retry_interval = absl::GetFlag(FLAGS_journal_retry_interval);
  const std::string when_full = absl::GetFlag(FLAGS_journal_when_full);
  if (when_full == "delete-oldest") {
    o.journal.when_full = ringside::daemon::JournalOptions::WhenFull::kDeleteOldest;
  } else if (when_full == "stop") {
    o.journal.when_full = ringside::daemon::JournalOptions::WhenFull::kStop;
  } else {
    std::fprintf(stderr,
                 "ringside-aggregator: --journal-when-full must be delete-oldest or stop, not "
                 "\"%s\"\n",
                 when_full.c_str());
    return 2;
  }
  o.keepalive.time = absl::GetFlag(FLAGS_keepalive_time);
  o.keepalive.timeout = absl::GetFlag(FLAGS_keepalive_timeout);
  o.keepalive.max_connection_idle = absl::GetFlag(FLAGS_max_connection_idle);
  o.keepalive.handshake_timeout = absl::GetFlag(FLAGS_handshake_timeout);
  if (o.keepalive.max_connection_idle < absl::Milliseconds(100) ||
      o.keepalive.handshake_timeout < absl::Milliseconds(100)) {
    std::fprintf(stderr,
                 "ringside-aggregator: --max-connection-idle and --handshake-timeout must be at "
                 "least 100ms\n");
    return 2;
  }
  RaiseOpenFileLimit();
  o.version = RINGSIDE_VERSION;

  // systemd (Type=notify, WatchdogSec=): READY=1 once serving, WATCHDOG=1 from the housekeeping
  // thread, STOPPING=1 on SIGTERM; all no-ops without $NOTIFY_SOCKET. Shared with the signal
  // thread, which may run until the process ends.
  auto notifier = std::make_shared<ringside::daemon::SystemdNotifier>();
  if (notifier->active()) {
    const absl::Duration wd = notifier->watchdog_period();
    LogLine(absl::StrCat("systemd notification socket set; watchdog ",
                         wd > absl::ZeroDuration()
                             ? absl::StrCat(absl::FormatDuration(wd), ", pet by housekeeping")
                             : std::string("off")));
    if (std::string w = ringside::daemon::WatchdogPeriodWarning("housekeeping pass",
                                                                o.housekeeping_interval, wd);
        !w.empty()) {
      LogLine(w);
    }
  }

  absl::Notification stop;
  ringside::daemon::InstallStopSignals(&stop, [notifier] {
    notifier->Stopping("stopping: closing sessions and flushing the journal");
  });

  // Declared before the analysis host so that it outlives the host's listener (alerts below).
  std::unique_ptr<ringside::daemon::AlertDispatcher> alerts;
  // The detectors (docs/detection.md), fed by ingest; incidents in <state-dir>/incidents.db.
  std::unique_ptr<ringside::daemon::AnalysisHost> analysis;
  if (absl::GetFlag(FLAGS_detect)) {
    ringside::daemon::AnalysisHostOptions ao;
    ao.analysis = detection;
    ao.state_dir = state_dir;
    ao.topology_file = absl::GetFlag(FLAGS_topology);
    ao.log = [](const std::string& m) { LogLine(m); };
    if (absl::GetFlag(FLAGS_peers).empty()) {
      // Right for a lone aggregator; a replica of a shard needs it (docs/deploy.md). The
      // aggregator warns louder once an agent says it streams to several replicas.
      LogLine(
          "no --peers: if other replicas of this shard stream the same nodes, start this one "
          "with --peers=<their gRPC host:port>, or a restart with an empty --state-dir pages "
          "their open incidents a second time (docs/deploy.md)");
      o.warn_replicas_without_peers = true;
    }
    if (const std::string peers = absl::GetFlag(FLAGS_peers); !peers.empty()) {
      // Before the first alert: the other replicas' open incidents, so a restart pages nobody.
      ringside::daemon::PeerFetchOptions po;
      po.peers = absl::StrSplit(peers, ',', absl::SkipWhitespace());
      po.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
      po.tls.key_file = absl::GetFlag(FLAGS_tls_key);
      po.tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
      po.tls.allow_insecure = absl::GetFlag(FLAGS_allow_insecure);
      po.tls.refresh_interval_s = o.tls.refresh_interval_s;
      po.tls.token_file = absl::GetFlag(FLAGS_peer_token_file);
      po.timeout = absl::GetFlag(FLAGS_peer_timeout);
      po.log = [](const std::string& m) { LogLine(m); };
      ao.adopt = ringside::daemon::FetchPeerOpenIncidents(po);
    }
    auto host = ringside::daemon::AnalysisHost::Start(ao);
    if (!host.ok()) {
      std::fprintf(stderr, "ringside-aggregator: %s\n", host.status().ToString().c_str());
      return 1;
    }
    analysis = std::move(*host);
    o.observer = analysis.get();
  }

  // Cross-shard attribution (docs/scale.md): the other shards' incidents, watched.
  std::unique_ptr<ringside::daemon::ShardWatch> shard_watch;
  {
    const std::string spec = absl::GetFlag(FLAGS_shard_map);
    const std::string self = absl::GetFlag(FLAGS_shard);
    if (spec.empty() != self.empty()) {
      std::fprintf(stderr, "ringside-aggregator: --shard-map and --shard go together\n");
      return 2;
    }
    if (!spec.empty()) {
      absl::StatusOr<ringside::analysis::ShardMap> map = ringside::daemon::LoadShardMap(spec);
      if (!map.ok()) {
        std::fprintf(stderr, "ringside-aggregator: --shard-map: %s\n",
                     std::string(map.status().message()).c_str());
        return 2;
      }
      int index = -1;
      for (size_t i = 0; i < map->size(); ++i) {
        if (map->shards()[i].name == self) index = static_cast<int>(i);
      }
      if (int n = 0; index < 0 && absl::SimpleAtoi(self, &n) && n >= 0 &&
                     static_cast<size_t>(n) < map->size()) {
        index = n;
      }
      if (index < 0) {
        std::fprintf(stderr, "ringside-aggregator: --shard=%s is not a shard of --shard-map (%zu "
                     "shards)\n", self.c_str(), map->size());
        return 2;
      }
      if (analysis == nullptr) {
        std::fprintf(stderr, "ringside-aggregator: --shard-map needs the detectors (--detect)\n");
        return 2;
      }
      ringside::daemon::ShardWatchOptions so;
      for (size_t i = 0; i < map->size(); ++i) {
        if (static_cast<int>(i) != index) so.shards.push_back(map->shards()[i]);
      }
      so.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
      so.tls.key_file = absl::GetFlag(FLAGS_tls_key);
      so.tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
      so.tls.allow_insecure = absl::GetFlag(FLAGS_allow_insecure);
      so.tls.refresh_interval_s = o.tls.refresh_interval_s;
      so.tls.token_file = absl::GetFlag(FLAGS_peer_token_file);
      so.log = [](const std::string& m) { LogLine(m); };
      ringside::daemon::AnalysisHost* host = analysis.get();
      ringside::daemon::ShardWatchSink sink;
      sink.replace = [host](const std::string& shard,
                            const std::vector<ringside::analysis::Incident>& incidents) {
        host->ReplaceRemote(shard, incidents);
      };
      sink.apply = [host](const std::string& shard, const ringside::analysis::Incident& inc) {
        host->ApplyRemote(shard, inc);
      };
      LogLine(absl::StrCat("shard ", map->shards()[index].name, " of ", map->size(),
                           ": watching the incidents of the other ", so.shards.size()));
      shard_watch = ringside::daemon::ShardWatch::Start(std::move(so), std::move(sink));
      o.collectables.push_back(shard_watch->metrics());
    }
  }

  // What Prometheus and Grafana get from the analysis (docs/metrics.md "## Aggregator"):
  // incidents, link health, PFC and congestion per port, stragglers, collective durations.
  ringside::daemon::AnalysisMetricsOptions mo;
  const int64_t max_links = absl::GetFlag(FLAGS_metrics_max_links);
  const int64_t max_ports = absl::GetFlag(FLAGS_metrics_max_ports);
  const int64_t max_ranks = absl::GetFlag(FLAGS_metrics_max_ranks);
  const int64_t max_jobs = absl::GetFlag(FLAGS_metrics_max_jobs);
  if (!Positive(max_links, "metrics-max-links") || !Positive(max_ports, "metrics-max-ports") ||
      !Positive(max_ranks, "metrics-max-ranks") || !Positive(max_jobs, "metrics-max-jobs")) {
    return 2;
  }
  mo.max_links = static_cast<size_t>(max_links);
  mo.max_ports = static_cast<size_t>(max_ports);
  mo.max_ranks = static_cast<size_t>(max_ranks);
  mo.histograms.max_jobs = static_cast<size_t>(max_jobs);
  auto analysis_metrics =
      std::make_shared<ringside::daemon::AnalysisMetrics>(mo, analysis.get());
  // The agents' InfiniBand subnet discovery (--fabric-discover): logged as it changes.
  ringside::daemon::DiscoveredFabric discovered_fabric([](const std::string& m) { LogLine(m); });
  ringside::daemon::ObserverFanout observers(
      {analysis.get(), analysis_metrics.get(), &discovered_fabric});
  o.observer = &observers;
  o.collectables.push_back(analysis_metrics);

  // Alerts (docs/alerts.md): every incident change to each Alertmanager and webhook; what was
  // delivered is kept in <state-dir>/alert_delivery_state so a restart sends no duplicates.
  {
    ringside::daemon::AlertOptions al;
    al.alertmanager_urls = ringside::daemon::SplitList(absl::GetFlag(FLAGS_alertmanager_url));
    al.webhook_urls = ringside::daemon::SplitList(absl::GetFlag(FLAGS_webhook_url));
    if (!al.alertmanager_urls.empty() || !al.webhook_urls.empty()) {
      if (analysis == nullptr) {
        std::fprintf(stderr, "ringside-aggregator: alerts need the detectors (--detect)\n");
        return 2;
      }
      if (const std::string f = absl::GetFlag(FLAGS_webhook_secret_file); !f.empty()) {
        absl::StatusOr<std::string> secret = ringside::daemon::ReadSecretFile(f);
        if (!secret.ok()) {
          std::fprintf(stderr, "ringside-aggregator: %s\n",
                       std::string(secret.status().message()).c_str());
          return 2;
        }
        al.webhook_secret = *secret;
      }
      const int64_t queue = absl::GetFlag(FLAGS_alert_queue_size);
      if (!Positive(queue, "alert-queue-size")) return 2;
      al.queue_size = static_cast<size_t>(queue);
      al.runbook_base_url = absl::GetFlag(FLAGS_runbook_base_url);
      al.resend_interval = absl::GetFlag(FLAGS_alert_resend_interval);
      al.max_age = absl::GetFlag(FLAGS_webhook_max_age);
      al.http_timeout = absl::GetFlag(FLAGS_alert_timeout);
      al.tls.ca_file = absl::GetFlag(FLAGS_alert_ca);
      al.tls.client_cert = absl::GetFlag(FLAGS_alert_client_cert);
      al.tls.client_key = absl::GetFlag(FLAGS_alert_client_key);
      al.backoff.initial = absl::GetFlag(FLAGS_alert_retry_initial);
      al.backoff.max = absl::GetFlag(FLAGS_alert_retry_max);
      al.batch_delay = absl::GetFlag(FLAGS_alert_batch_delay);
      al.min_firing = absl::GetFlag(FLAGS_alert_min_firing);
      auto min_firing_for =
          ringside::daemon::ParseMinFiringFor(absl::GetFlag(FLAGS_alert_min_firing_for));
      if (!min_firing_for.ok()) {
        std::fprintf(stderr, "ringside-aggregator: %s\n",
                     std::string(min_firing_for.status().message()).c_str());
        return 2;
      }
      al.min_firing_for = std::move(*min_firing_for);
      al.state_dir = state_dir;
      al.log = [](const std::string& m) { LogLine(m); };
      auto d = ringside::daemon::AlertDispatcher::Start(al);
      if (!d.ok()) {
        std::fprintf(stderr, "ringside-aggregator: %s\n", std::string(d.status().message()).c_str());
        return 2;
      }
      alerts = std::move(*d);
      ringside::daemon::AlertDispatcher* dispatcher = alerts.get();
      analysis->AddListener([dispatcher](const std::vector<ringside::analysis::IncidentChange>& c) {
        dispatcher->OnChanges(c);
      });
      ringside::analysis::IncidentStore* store = analysis->store();
      dispatcher->Reconcile(analysis->OpenIncidents(),
                            [store](uint64_t id) -> std::optional<ringside::analysis::Incident> {
                              if (store == nullptr) return std::nullopt;
                              auto inc = store->Get(id);
                              if (!inc.ok()) return std::nullopt;
                              return *inc;
                            });
      o.collectables.push_back(alerts->metrics());
    }
  }

  // The watchdog is pet from the aggregator's housekeeping thread (Aggregator::Housekeeping),
  // after each pass: a pass expires handshakes under the ingest service's lock and lists nodes
  // under the core's lock, so a wedged ingest path (a lock held forever, a stuck journal append
  // under the core's lock) stops the pets and systemd restarts the process. With the detectors,
  // the pass also checks that the analysis host's flush loop still completes flushes (one per
  // second; a flush wedged in the incident store or in an alert listener stalls it): after 30s
  // without one, the pets stop too.
  auto flushes = std::make_shared<ringside::daemon::ProgressWatch>(absl::Seconds(30));
  o.heartbeat = [notifier, flushes, host = analysis.get(), stalled = false]() mutable {
    if (host != nullptr && !flushes->Moving(host->flush_stats().flushes)) {
      if (!stalled) {
        LogLine(absl::StrCat("analysis flush loop stuck for ",
                             absl::FormatDuration(flushes->still_for()),
                             ": no longer petting the systemd watchdog"));
      }
      stalled = true;
      return;
    }
    if (stalled) LogLine("analysis flush loop moving again");
    stalled = false;
    notifier->PetWatchdog();
  };

  // The Query API (docs/query-api.md) on the ingest port, and GET /api/v1/incidents.
  ringside::daemon::QueryServiceOptions query_options;
  query_options.roles = o.roles;
  query_options.watch.queue_limit =
      static_cast<size_t>(std::max<int64_t>(1, absl::GetFlag(FLAGS_watch_queue_limit)));
  ringside::daemon::InstallQueryApi(o, analysis.get(), query_options);

  absl::StatusOr<std::unique_ptr<ringside::daemon::Aggregator>> agg =
      ringside::daemon::Aggregator::Start(o);
  if (!agg.ok()) {
    std::fprintf(stderr, "ringside-aggregator: %s\n", agg.status().ToString().c_str());
    return 1;
  }
  LogLine(absl::StrCat(
      "ingest (gRPC) listening on ", o.listen, " (port ", (*agg)->grpc_port(), ")",
      o.tls.ca_file.empty() ? (o.tls.cert_file.empty() ? ", plaintext" : ", TLS") : ", mTLS"));
  if (!o.http_listen.empty()) {
    // The wording is parsed by tests and the simulator: keep "HTTP (a, b, c) listening on".
    LogLine(absl::StrCat("HTTP (/metrics, /healthz, /api/v1) listening on ", o.http_listen,
                         " (port ", (*agg)->http_port(), ")"));
  }
  // Ready: the journal is open (replayed), the gRPC and HTTP listeners serve.
  notifier->Ready(absl::StrCat(
      "ingest on ", o.listen,
      o.http_listen.empty() ? "" : absl::StrCat(", HTTP on ", o.http_listen),
      o.state_dir.empty() ? ", memory only" : absl::StrCat(", journal in ", o.state_dir)));
  stop.WaitForNotification();
  LogLine("stopping: closing sessions and flushing the journal");
  (*agg)->Shutdown();
  LogLine("stopped");
  return 0;
}
