// An Alertmanager (v2 API): POST <url>/api/v2/alerts with every firing alert (one per open
// incident, endsAt omitted) and every resolved alert not yet delivered (endsAt = resolved time).
// Sent batch_delay after a change (changes arriving within it go together) and re-sent every
// resend_interval while anything fires, as Alertmanager expects (it resolves an alert that is not
// re-sent within its resolve_timeout). A failed POST is retried with jittered exponential backoff;
// a resolved alert is given up after max_age. Alertmanager deduplicates firing alerts by their
// labels, so re-sending them after a restart raises nothing new; resolved alerts it acknowledged
// are recorded and never sent again.
//
// No lost pages: an incident is always sent firing before its resolution, however short it was
// (one that opened and resolved between two sends is sent firing first), and its resolution is
// held until min_firing (per kind) after Alertmanager first accepted it firing — meanwhile it is
// sent, and re-sent, firing. Alertmanager never notifies an alert that arrives already resolved,
// and a cluster member that waited its turn (peer position x peer_timeout) would notify firing
// again after a quick resolution; the hold covers both (docs/alerts.md "Short incidents").
#ifndef RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERTMANAGER_SENDER_H_
#define RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERTMANAGER_SENDER_H_

#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/aggregator/alerts/alert_sender.h"
#include "daemon/common/steady_time.h"

namespace ringside::daemon {

class AlertmanagerSender final : public AlertSender {
 public:
  // `options.url` is the Alertmanager's base URL; /api/v2/alerts is appended to its path.
  explicit AlertmanagerSender(SenderOptions options);
  ~AlertmanagerSender() override;

  void Enqueue(const analysis::IncidentChange& change) override ABSL_LOCKS_EXCLUDED(mu_);
  void Reconcile(const std::vector<analysis::Incident>& open, const IncidentLookup& lookup) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One incident's alert, from its first change until its resolution is delivered.
  struct Alert {
    analysis::Incident firing;                      // its latest open revision
    analysis::IncidentChangeType type = analysis::IncidentChangeType::kOpened;  // made `firing`
    std::optional<analysis::Incident> resolution;   // once it resolved
    absl::Time queued;                              // when the resolution (else `firing`) came
    // When Alertmanager first accepted it firing (InfiniteFuture: not yet).
    absl::Time fired_at = absl::InfiniteFuture();
    bool unsent = true;  // `firing` changed since the last send
    // Label sets this incident was sent firing with before its labels changed (a severity that
    // escalated): each is sent resolved (endsAt = when it changed), in the same POST as the new
    // labels, until Alertmanager accepts it. Else the old alert would fire on until its
    // resolve_timeout, and be paged resolved only then.
    std::vector<analysis::Incident> retired;
  };
  // One alert of a POST: the incident as sent, and what it stands for.
  struct Sent {
    analysis::Incident incident;
    analysis::IncidentChangeType type;
    bool retired = false;  // an old label set of a firing incident, sent resolved
  };
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  void UpdateQueueLength() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddResolved(const analysis::Incident& inc, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When `a`'s resolution may go out (InfiniteFuture: no resolution, or not yet fired).
  absl::Time ReleaseTime(const Alert& a) const;

  HttpUrl post_url_;
  absl::Mutex mu_;
  std::map<uint64_t, Alert> alerts_ ABSL_GUARDED_BY(mu_);
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  SteadyCondVar cv_;  // wakes Run: dirty_ or stop_ set; its deadlines are monotonic
  Backoff backoff_;
  std::thread worker_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERTMANAGER_SENDER_H_
