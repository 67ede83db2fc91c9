// Why a straggler is late when no fabric incident explains it (the correlator's first choice,
// correlator.h). In order:
//   1. a GPU incident (gpu_throttled, gpu_xid, gpu_memory_error, gpu_pcie_degraded) on the rank's
//      own GPU: rank → node + the plugin's GPU PCI bus id → the incident whose entity has that
//      node and pci_bus_id, or that node and the NVML index the gpu info record gives the bus id
//      (GpuDirectory) — never the CUDA ordinal, which need not be NVML's index;
//   2. host evidence, when the lateness is on the host (or where it is is unknown): the rank's
//      cgroup throttled by its CPU quota, CPU, memory or IO pressure on its node (HostSignals);
//   3. else `host`, with the evidence that was checked and found clean in the cause's evidence.
// `where` is the straggler detector's split of the lateness (host: it enqueued late; gpu: it
// enqueued on time and its kernel started late; unknown: both are considered).
#ifndef RINGSIDE_ANALYSIS_STRAGGLER_CAUSE_H_
#define RINGSIDE_ANALYSIS_STRAGGLER_CAUSE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/gpu_detector.h"
#include "analysis/host_signals.h"
#include "analysis/incidents.h"

namespace ringside::analysis {

enum class LatenessWhere { kUnknown, kHost, kGpu };
LatenessWhere ParseLatenessWhere(absl::string_view s);  // "host", "gpu"; anything else unknown
// A straggler incident's `where` (entity label, else its summary's "where=…"); unknown if absent.
LatenessWhere WhereOf(const Incident& straggler);

// Where the rank runs, as its collective records tell.
struct RankPlacement {
  std::string node;
  std::string gpu_pci_bus_id;  // sysfs form; "" unknown
  std::string cgroup;          // "" unknown
};

struct StragglerCauseContext {
  const GpuDirectory* gpus = nullptr;  // may be null
  const HostSignals* host = nullptr;   // may be null
  const GpuDetector* detector = nullptr;  // may be null: the GPU's compute processes
  // A GPU incident explains the straggler when their times overlap within this slack (as a
  // fabric incident: CorrelatorOptions::window).
  absl::Duration window = absl::Minutes(5);
  size_t max_causes = 3;
};

// The causes of `straggler` among `gpu_incidents` (other kinds are skipped) and the host
// evidence; never empty.
std::vector<CauseLink> NonFabricCauses(const Incident& straggler, const RankPlacement& rank,
                                       LatenessWhere where,
                                       const std::vector<const Incident*>& gpu_incidents,
                                       const StragglerCauseContext& context);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_STRAGGLER_CAUSE_H_
