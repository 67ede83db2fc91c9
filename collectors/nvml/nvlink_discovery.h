// Discovery of one GPU's NVLinks: how many links it has (asked of the device, never a constant),
// which error-counter API answers for it (the pre-Blackwell per-link DL counters, or the NVLink5
// field values where the DL call answers NOT_SUPPORTED), and its identity for the info record.
#ifndef RINGSIDE_COLLECTORS_NVML_NVLINK_DISCOVERY_H_
#define RINGSIDE_COLLECTORS_NVML_NVLINK_DISCOVERY_H_

#include <iterator>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectors/common/collector.h"
#include "collectors/common/series.h"
#include "collectors/nvml/nvml_api.h"

namespace ringside::collectors {

// The pre-Blackwell per-link counters (nvmlDeviceGetNvLinkErrorCounter), in series order.
struct NvlinkLegacyCounter {
  nvml::NvLinkErrorCounter id;
  const char* name;  // SeriesDef::counter
};
inline constexpr NvlinkLegacyCounter kNvlinkLegacyCounters[] = {
    {nvml::kDlReplay, "replay_errors"},
    {nvml::kDlRecovery, "recovery_errors"},
    {nvml::kDlCrcFlit, "crc_flit_errors"},
    {nvml::kDlCrcData, "crc_data_errors"},
};
inline constexpr size_t kNumNvlinkLegacyCounters = std::size(kNvlinkLegacyCounters);

// The Blackwell-and-later per-link field values (scope = link), in series order.
struct NvlinkField {
  unsigned int field_id;
  const char* name;  // SeriesDef::counter
  SeriesKind kind;
  Unit unit;
};
inline constexpr NvlinkField kNvlinkFields[] = {
    {nvml::kFieldNvLinkRecoveryEvents, "recovery_events", SeriesKind::kCounter, Unit::kCount},
    {nvml::kFieldNvLinkRecoverySuccessfulEvents, "recovery_successful_events", SeriesKind::kCounter,
     Unit::kCount},
    {nvml::kFieldNvLinkRecoveryFailedEvents, "recovery_failed_events", SeriesKind::kCounter,
     Unit::kCount},
    {nvml::kFieldNvLinkSymbolErrors, "symbol_errors", SeriesKind::kCounter, Unit::kCount},
    {nvml::kFieldNvLinkEffectiveErrors, "effective_errors", SeriesKind::kCounter, Unit::kCount},
    {nvml::kFieldNvLinkEffectiveBer, "effective_ber", SeriesKind::kGauge, Unit::kPackedBer},
    {nvml::kFieldNvLinkSymbolBer, "symbol_ber", SeriesKind::kGauge, Unit::kPackedBer},
};

// Upper bound for probing link indices when the device does not answer the link-count field; the
// probe normally stops much earlier, at the first INVALID_ARGUMENT.
inline constexpr unsigned int kMaxNvlinks = 1024;

// What discovery learned about one GPU.
struct GpuPlan {
  unsigned int index = 0;
  nvml::Device handle = nullptr;
  InfoRecord info;  // source "gpu", device = index
  unsigned int link_count = 0;
  bool legacy[kNumNvlinkLegacyCounters] = {};  // which DL counters to read
  std::vector<unsigned int> fields;            // which field ids to read per link
  // A probe failed in a way that may have hidden links or counters: discover again next cycle.
  bool incomplete = false;
};

// Probes GPU `index`. Fails only if no handle can be had for it; a failed probe is added to
// `errors` and marks the plan incomplete.
absl::StatusOr<GpuPlan> PlanGpu(const nvml::NvmlLibrary& lib, unsigned int index,
                                absl::string_view driver_version, CycleErrors& errors);

// "hopper", "blackwell", ...; "arch_<n>" for a value this build does not know.
std::string ArchitectureName(nvml::Architecture arch);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NVML_NVLINK_DISCOVERY_H_
