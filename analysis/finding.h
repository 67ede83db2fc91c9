// What a detector says about one entity at one moment: a finding that is active (open or still
// open) or inactive (resolved). The incident manager turns the stream of findings into incidents
// with ids, lifecycles and history.
#ifndef RINGSIDE_ANALYSIS_FINDING_H_
#define RINGSIDE_ANALYSIS_FINDING_H_

#include <map>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringside::analysis {

enum class IncidentKind {
  kLinkFlapping,
  kLinkDown,
  kLinkDegraded,
  kPauseStorm,
  kCongestion,
  kStraggler,
  kJobSlowdown,
  // GPU faults that hurt a job (analysis/gpu_detector.h); entity node, gpu, pci_bus_id.
  kGpuThrottled,     // HW slowdown, HW/SW thermal, power brake; a power cap slower than peers
  kGpuXid,           // a serious XID
  kGpuMemoryError,   // uncorrectable ECC, row-remap failure
  kGpuPcieDegraded,  // PCIe link below its generation or width while busy; replays
};
// The last kind (for tables indexed by kind).
inline constexpr IncidentKind kLastIncidentKind = IncidentKind::kGpuPcieDegraded;

absl::string_view IncidentKindName(IncidentKind kind);

enum class Severity { kInfo, kWarning, kCritical };

absl::string_view SeverityName(Severity s);

struct Finding {
  IncidentKind kind = IncidentKind::kStraggler;
  // What it is about: node, device, port, netdev, priority, gpu, link, job, rank, comm... as apply.
  std::map<std::string, std::string> entity;
  Severity severity = Severity::kWarning;
  absl::Time at;
  bool active = true;  // false: the condition has cleared (resolve)
  // The numbers that triggered it (scores, margins, rates, counter deltas).
  std::map<std::string, double> evidence;
  std::string summary;
};

// A stable key for the entity of a finding: kind plus entity labels.
std::string FindingKey(const Finding& f);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_FINDING_H_
