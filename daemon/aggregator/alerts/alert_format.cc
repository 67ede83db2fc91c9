#include "daemon/aggregator/alerts/alert_format.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "analysis/straggler_where.h"

namespace ringside::daemon {

using analysis::Incident;
using analysis::IncidentChangeType;
using analysis::IncidentKind;

std::string AlertName(IncidentKind kind) {
  switch (kind) {
    case IncidentKind::kLinkFlapping:
      return "RingsideLinkFlapping";
    case IncidentKind::kLinkDown:
      return "RingsideLinkDown";
    case IncidentKind::kLinkDegraded:
      return "RingsideLinkDegraded";
    case IncidentKind::kPauseStorm:
      return "RingsidePauseStorm";
    case IncidentKind::kCongestion:
      return "RingsideCongestion";
    case IncidentKind::kStraggler:
      return "RingsideStraggler";
    case IncidentKind::kJobSlowdown:
      return "RingsideJobSlowdown";
    case IncidentKind::kGpuThrottled:
      return "RingsideGpuThrottled";
    case IncidentKind::kGpuXid:
      return "RingsideGpuXid";
    case IncidentKind::kGpuMemoryError:
      return "RingsideGpuMemoryError";
    case IncidentKind::kGpuPcieDegraded:
      return "RingsideGpuPcieDegraded";
  }
  return "RingsideIncident";
}

const std::vector<std::string>& AlertEntityLabels() {
  static const auto* labels = new std::vector<std::string>{
      "node", "device", "port", "netdev", "gpu", "link", "priority", "job", "rank", "comm",
      "pod",  "namespace", "cuda_device", "pci_bus_id"};
  return *labels;
}

std::map<std::string, std::string> AlertLabels(const Incident& inc) {
  std::map<std::string, std::string> labels;
  labels["alertname"] = AlertName(inc.kind);
  labels["severity"] = std::string(analysis::SeverityName(inc.severity));
  for (const std::string& name : AlertEntityLabels()) {
    auto it = inc.entity.find(name);
    if (it != inc.entity.end() && !it->second.empty()) labels[name] = it->second;
  }
  // The key, not the local id: replicas fed the same data send the same alert (docs/alerts.md).
  labels["ringside_incident_key"] = analysis::StableIncidentKey(inc);
  return labels;
}

std::string CompactEvidence(const std::map<std::string, double>& evidence) {
  std::vector<std::string> parts;
  parts.reserve(evidence.size());
  for (const auto& [k, v] : evidence) parts.push_back(absl::StrFormat("%s=%g", k, v));
  return absl::StrJoin(parts, " ");
}

std::string RunbookUrl(absl::string_view base, IncidentKind kind) {
  return absl::StrCat(absl::StripSuffix(base, "#"), "#", analysis::IncidentKindName(kind));
}

std::string AlertTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

std::string PostableAlertJson(const Incident& inc, absl::string_view runbook_base) {
  std::map<std::string, std::string> annotations;
  annotations["summary"] =
      inc.summary.empty() ? absl::StrCat(analysis::IncidentKindName(inc.kind), " incident ", inc.id)
                          : inc.summary;
  const std::string evidence = CompactEvidence(inc.evidence);
  if (!evidence.empty()) annotations["evidence"] = evidence;
  // Where a straggler's lateness is (host, gpu, unknown). An annotation, not a label: it may
  // change while the incident is open, and a changed label would be another alert to Alertmanager.
  if (inc.kind == IncidentKind::kStraggler) {
    annotations["where"] = analysis::StragglerWhere(inc.evidence);
  }
  std::vector<std::string> causes;
  for (const analysis::CauseLink& c : inc.causes) {
    causes.push_back(c.summary.empty() ? c.kind : c.summary);
  }
  if (!causes.empty()) annotations["cause"] = absl::StrJoin(causes, "; ");
  // The first cause's numbers: a GPU's throttled share, a cgroup's throttling, or what was
  // checked and found clean behind a plain "host".
  if (!inc.causes.empty() && !inc.causes[0].evidence.empty()) {
    annotations["cause_evidence"] = CompactEvidence(inc.causes[0].evidence);
  }
  std::vector<std::string> jobs;
  for (const analysis::AffectedJob& j : inc.affected) {
    jobs.push_back(absl::StrCat(j.job, " (", j.ranks.size(), " ranks)"));
  }
  if (!jobs.empty()) annotations["affected"] = absl::StrJoin(jobs, ", ");
  if (!runbook_base.empty()) annotations["runbook_url"] = RunbookUrl(runbook_base, inc.kind);
  if (inc.resolved && !inc.resolution.empty()) annotations["resolution"] = inc.resolution;
  std::string out = absl::StrCat("{\"labels\":", analysis::LabelsJson(AlertLabels(inc)),
                                 ",\"annotations\":", analysis::LabelsJson(annotations),
                                 ",\"startsAt\":\"", AlertTime(inc.opened), "\"");
  if (inc.resolved) absl::StrAppend(&out, ",\"endsAt\":\"", AlertTime(*inc.resolved), "\"");
  absl::StrAppend(&out, "}");
  return out;
}

std::string PostableAlertsJson(const std::vector<const Incident*>& incidents,
                               absl::string_view runbook_base) {
  std::string out = "[";
  for (size_t i = 0; i < incidents.size(); ++i) {
    if (i > 0) out.push_back(',');
    absl::StrAppend(&out, PostableAlertJson(*incidents[i], runbook_base));
  }
  out.push_back(']');
  return out;
}

std::string DeliveryId(const Incident& inc, IncidentChangeType type) {
  return absl::StrCat("inc-", inc.id, "-r", inc.revision, "-",
                      analysis::IncidentChangeTypeName(type));
}

absl::Time EventTime(const Incident& inc, IncidentChangeType type) {
  switch (type) {
    case IncidentChangeType::kOpened:
      return inc.opened;
    case IncidentChangeType::kResolved:
      return inc.resolved.value_or(inc.updated);
    case IncidentChangeType::kUpdated:
      break;
  }
  return inc.updated;
}

std::string WebhookBody(const Incident& inc, IncidentChangeType type) {
  return absl::StrCat("{\"delivery_id\":", analysis::JsonQuote(DeliveryId(inc, type)),
                      ",\"type\":", analysis::JsonQuote(analysis::IncidentChangeTypeName(type)),
                      ",\"timestamp\":\"", AlertTime(EventTime(inc, type)),
                      "\",\"incident\":", analysis::IncidentJson(inc), "}");
}

}  // namespace ringside::daemon
