// One alert receiver (an Alertmanager or a webhook) with its own worker thread, queue, retry
// backoff and counters. The dispatcher fans incident changes out to every sender; Enqueue only
// queues (it runs on the analysis host's flush thread). What reached the receiver is recorded in
// the shared DeliveryState, so nothing delivered is sent again after a restart (Reconcile).
#ifndef RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERT_SENDER_H_
#define RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERT_SENDER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "analysis/incidents.h"
#include "daemon/agent/backoff.h"
#include "daemon/aggregator/alerts/delivery_state.h"
#include "daemon/aggregator/alerts/http_client.h"

namespace ringside::daemon {

// Counters of one receiver (raw cumulative values for /metrics).
struct SenderStats {
  std::atomic<uint64_t> delivered{0};           // requests answered 2xx
  std::atomic<uint64_t> failed{0};              // attempts that failed (error or non-2xx)
  std::atomic<uint64_t> retried{0};             // attempts after a failure
  std::atomic<uint64_t> dropped_queue_full{0};  // events pushed out of a full queue
  std::atomic<uint64_t> dropped_expired{0};     // events older than the max age, given up
  std::atomic<uint64_t> dropped_rejected{0};    // events the receiver refused with a 4xx
  std::atomic<uint64_t> duplicates_skipped{0};  // events already delivered (e.g. before a restart)
  std::atomic<int64_t> queue_length{0};
  std::atomic<int64_t> last_delivery_unix_ms{0};
};

// Changes that arrive within this of the first one go out together (--alert-batch-delay).
inline constexpr absl::Duration kDefaultAlertBatchDelay = absl::Milliseconds(10);
// --alert-min-firing: Alertmanager's group_wait (30s) + (3 - 1) peers x its peer_timeout (15s)
// + 15s margin: a cluster of up to three Alertmanagers with their defaults pages a short incident
// once (docs/alerts.md "Short incidents").
inline constexpr absl::Duration kDefaultAlertMinFiring = absl::Seconds(75);

struct SenderOptions {
  std::string type;  // "alertmanager" or "webhook"
  std::string name;  // the metrics label: "<type>:<host:port>" (no path: it may hold a token)
  std::string key;   // the delivery-state key: "<type>:<sha256(url)[:16]>"
  HttpUrl url;
  DeliveryState* state = nullptr;  // required; outlives the sender
  absl::Duration http_timeout = absl::Seconds(10);
  HttpTlsOptions tls;  // https:// receivers: CA file, client certificate
  BackoffOptions backoff{absl::Seconds(1), absl::Seconds(30), 2.0, 0.2};
  absl::Duration max_age = absl::Hours(1);  // a queued event older than this is dropped
  size_t queue_size = 1000;
  // Webhooks: the HMAC-SHA256 key.
  std::string secret;
  // Alertmanager: re-send firing alerts this often; gather changes for batch_delay first.
  absl::Duration resend_interval = absl::Seconds(60);
  absl::Duration batch_delay = kDefaultAlertBatchDelay;
  // Alertmanager: a resolved alert is sent no sooner than this after Alertmanager first accepted
  // it firing (per kind: min_firing_for, else min_firing), so every member of an Alertmanager
  // cluster pages it once (docs/alerts.md "Short incidents").
  absl::Duration min_firing = kDefaultAlertMinFiring;
  std::map<analysis::IncidentKind, absl::Duration> min_firing_for;
  std::string runbook_base;
  // Resolved deliveries older than this are dropped from the state file.
  absl::Duration state_retention = absl::Hours(24);
  std::function<absl::Time()> now = absl::Now;
  std::function<void(const std::string&)> log;
};

// Any incident by id (open or resolved), from the incident store; nullopt when unknown.
using IncidentLookup = std::function<std::optional<analysis::Incident>(uint64_t id)>;

// The minimum firing time of `kind` under `options` (min_firing_for, else min_firing).
absl::Duration MinFiring(const SenderOptions& options, analysis::IncidentKind kind);

// The incident as it was while open: `resolved` and `resolution` cleared, the revision before the
// resolution (at least 1). What a receiver is sent firing when the resolution is the first it
// would otherwise hear of the incident.
analysis::Incident FiringView(const analysis::Incident& resolved);

class AlertSender {
 public:
  explicit AlertSender(SenderOptions options) : options_(std::move(options)) {}
  virtual ~AlertSender() = default;
  AlertSender(const AlertSender&) = delete;
  AlertSender& operator=(const AlertSender&) = delete;

  // Queues a change (never blocks on the network).
  virtual void Enqueue(const analysis::IncidentChange& change) = 0;
  // At start: queues what the receiver has not seen, comparing the delivery state with the open
  // incidents now (and looking up those it saw open that are no longer).
  virtual void Reconcile(const std::vector<analysis::Incident>& open,
                         const IncidentLookup& lookup) = 0;
  // Stops the worker (an attempt in flight finishes or times out). Idempotent.
  virtual void Stop() = 0;

  const SenderOptions& options() const { return options_; }
  const SenderStats& stats() const { return stats_; }

 protected:
  // Logs a failure at a limited rate (the 1st, 2nd, 4th, 8th, ... in a row) and the recovery.
  void NoteFailure(const std::string& what);
  void NoteSuccess();
  void Log(const std::string& m) const {
    if (options_.log) options_.log(m);
  }

  SenderOptions options_;
  SenderStats stats_;
  uint64_t failures_in_a_row_ = 0;  // worker thread only
};

// Whether a failed response is worth retrying (5xx, 408, 429) or a permanent refusal (other 4xx).
bool RetryableHttpStatus(int status);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERT_SENDER_H_
