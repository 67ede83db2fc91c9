// What an incident looks like to the outside: Alertmanager v2 postable alerts (a fixed alertname
// per kind, labels from the entity, annotations from summary, evidence and causes) and the
// webhook event body. Pure functions; docs/alerts.md documents the shapes.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERT_FORMAT_H_
#define RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERT_FORMAT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/incidents.h"

namespace ringside::daemon {

// link_flapping → "RingsideLinkFlapping", pause_storm → "RingsidePauseStorm", ...
std::string AlertName(analysis::IncidentKind kind);

// The entity labels that become alert labels (others stay in the incident only).
const std::vector<std::string>& AlertEntityLabels();

// alertname, severity, the entity labels that apply, ringside_incident_key (the same on every
// replica: analysis::StableIncidentKey).
std::map<std::string, std::string> AlertLabels(const analysis::Incident& incident);

// "rate_per_s=1.5 transitions=4" (sorted by name, %g).
std::string CompactEvidence(const std::map<std::string, double>& evidence);

// `base` + "#" + kind (base ends without '#').
std::string RunbookUrl(absl::string_view base, analysis::IncidentKind kind);

// RFC 3339 UTC with milliseconds: "2026-11-22T08:09:08.123Z".
std::string AlertTime(absl::Time t);

// One postable alert (a JSON object): startsAt = opened; endsAt = resolved when resolved, else
// omitted (Alertmanager keeps it firing for its resolve_timeout; the sender re-sends).
std::string PostableAlertJson(const analysis::Incident& incident, absl::string_view runbook_base);
// A JSON array of them (the body of POST /api/v2/alerts).
std::string PostableAlertsJson(const std::vector<const analysis::Incident*>& incidents,
                               absl::string_view runbook_base);

// A stable id of one incident change: "inc-<id>-r<revision>-<type>". The same across retries
// and restarts, so a receiver can drop repeats.
std::string DeliveryId(const analysis::Incident& incident, analysis::IncidentChangeType type);

// When the change happened: resolved time, else updated (opened for an opened event).
absl::Time EventTime(const analysis::Incident& incident, analysis::IncidentChangeType type);

// The webhook body: {"delivery_id":..,"type":"opened|updated|resolved","timestamp":"RFC 3339",
// "incident":IncidentJson}.
std::string WebhookBody(const analysis::Incident& incident, analysis::IncidentChangeType type);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_ALERTS_ALERT_FORMAT_H_
