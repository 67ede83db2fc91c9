#include "analysis/finding.h"

#include "absl/strings/str_cat.h"

namespace ringside::analysis {

absl::string_view IncidentKindName(IncidentKind kind) {
  switch (kind) {
    case IncidentKind::kLinkFlapping:
      return "link_flapping";
    case IncidentKind::kLinkDown:
      return "link_down";
    case IncidentKind::kLinkDegraded:
      return "link_degraded";
    case IncidentKind::kPauseStorm:
      return "pause_storm";
    case IncidentKind::kCongestion:
      return "congestion";
    case IncidentKind::kStraggler:
      return "straggler";
    case IncidentKind::kJobSlowdown:
      return "job_slowdown";
    case IncidentKind::kGpuThrottled:
      return "gpu_throttled";
    case IncidentKind::kGpuXid:
      return "gpu_xid";
    case IncidentKind::kGpuMemoryError:
      return "gpu_memory_error";
    case IncidentKind::kGpuPcieDegraded:
      return "gpu_pcie_degraded";
  }
  return "unknown";
}

absl::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kCritical:
      return "critical";
  }
  return "unknown";
}

std::string FindingKey(const Finding& f) {
  std::string key(IncidentKindName(f.kind));
  for (const auto& [k, v] : f.entity) absl::StrAppend(&key, "|", k, "=", v);
  return key;
}

}  // namespace ringside::analysis
