// ringside-aggregator: receives the agents' streams (gRPC ringside.v1 Ingest on --listen), keeps
// per-series state and recent collective records and link events, journals payloads durably with
// --state-dir, and serves /metrics, /healthz and /api/v1/... on --http-listen. Flags are parsed
// here only and turned into AggregatorOptions (docs/aggregator.md).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "analysis/detection_options.h"
#include "daemon/aggregator/aggregator.h"
#include "daemon/aggregator/analysis_host.h"
#include "daemon/aggregator/aggregator_json.h"
#include "daemon/common/flags.h"
#include "daemon/common/log.h"
#include "daemon/common/signals.h"

ABSL_FLAG(std::string, listen, ":9472",
          "gRPC ingest address, [host]:port (port 0 picks a free one).");
ABSL_FLAG(std::string, http_listen, ":9473",
          "Address of /metrics, /healthz and /api/v1/...; empty to serve none.");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain of the aggregator.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of the aggregator.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA: agents must present a certificate it signed (mTLS), and the node name in their "
          "Hello must match it.");
ABSL_FLAG(bool, allow_insecure, false, "Allow plaintext on a non-loopback --listen.");
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

ABSL_FLAG(std::string, detection_config, "",
          "File of detector thresholds, one \"name = value\" per line (docs/detection.md; "
          "--list-detection-options prints every name with its default).");
ABSL_FLAG(std::vector<std::string>, detect_set, {},
          "Detector thresholds as name=value,name=value (after --detection-config), e.g. "
          "--detect-set=link.flap_window=5m,straggler.window=50.");
ABSL_FLAG(bool, list_detection_options, false,
          "Print every detector threshold with its value (after --detection-config and "
          "--detect-set) and exit.");

namespace {

using ringside::daemon::LogLine;

bool Positive(int64_t v, const char* name) {
  if (v > 0) return true;
  std::fprintf(stderr, "ringside-aggregator: --%s must be positive\n", name);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ringside-aggregator: receives ringside agents' streams.\n"
      "  ringside-aggregator --listen=:9472 --http-listen=:9473 --state-dir=/var/lib/ringside \\\n"
      "      --tls-cert=agg.pem --tls-key=agg.key --tls-ca=ca.pem\n"
      "  ringside-aggregator --dump-journal --state-dir=DIR");
  std::vector<std::string> args = ringside::daemon::NormalizeFlagNames(argc, argv);
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
                         stats.unparsable_payloads, " unparsable)"));
    return 0;
  }

  ringside::daemon::AggregatorOptions o;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.http_listen = absl::GetFlag(FLAGS_http_listen);
  o.tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  o.tls.key_file = absl::GetFlag(FLAGS_tls_key);
  o.tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  o.tls.allow_insecure = absl::GetFlag(FLAGS_allow_insecure);
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
  o.version = RINGSIDE_VERSION;

  absl::Notification stop;
  ringside::daemon::InstallStopSignals(&stop);

  // The detectors (docs/detection.md), fed by ingest; incidents in <state-dir>/incidents.db.
  std::unique_ptr<ringside::daemon::AnalysisHost> analysis;
  if (absl::GetFlag(FLAGS_detect)) {
    ringside::daemon::AnalysisHostOptions ao;
    ao.analysis = detection;
    ao.state_dir = state_dir;
    ao.topology_file = absl::GetFlag(FLAGS_topology);
    ao.log = [](const std::string& m) { LogLine(m); };
    auto host = ringside::daemon::AnalysisHost::Start(ao);
    if (!host.ok()) {
      std::fprintf(stderr, "ringside-aggregator: %s\n", host.status().ToString().c_str());
      return 1;
    }
    analysis = std::move(*host);
    o.observer = analysis.get();
  }

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
    LogLine(absl::StrCat("HTTP (/metrics, /healthz, /api/v1) listening on ", o.http_listen,
                         " (port ", (*agg)->http_port(), ")"));
  }
  stop.WaitForNotification();
  LogLine("stopping: closing sessions and flushing the journal");
  (*agg)->Shutdown();
  LogLine("stopped");
  return 0;
}
