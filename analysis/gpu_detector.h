// GPU faults that hurt a job, from the agent's NVML series (source "gpu", device = the NVML index;
// docs/metrics.md) and its XID events (source "nvml_xid", detail "XID <n>"):
//
//   gpu_throttled      hardware slowdown (clock-event bit 0x8), hardware thermal slowdown (0x40 /
//                      throttle_hw_thermal_ns), hardware power brake (0x80 /
//                      throttle_hw_power_brake_ns) for `throttle_share` of the window, or software
//                      thermal slowdown (0x20 / throttle_sw_thermal_ns) for `sw_thermal_share`;
//                      and a software power cap (0x4 / throttle_power_cap_ns) — normal under full
//                      load — only when the GPU's SM clock (against its maximum) runs slower than
//                      its busy peers' median by `power_cap_clock_deficit`.
//   gpu_xid            an XID in `xids` (critical when in `critical_xids`); resolves `xid_hold`
//                      after the last one.
//   gpu_memory_error   uncorrectable ECC errors (Δecc_uncorrected_volatile > 0) or a row-remap
//                      failure (remap_failure = 1); resolves `memory_hold` after the last error
//                      once no failure is reported.
//   gpu_pcie_degraded  the PCIe link below its maximum generation or width while the GPU is busy
//                      for `pcie_min_duration`, or PCIe replays above `pcie_replay_per_min`.
//
// Entity: node, gpu (the NVML index) and pci_bus_id (sysfs form, from the gpu info record, when
// known when the incident opens). Times are the data's (sample and event times); findings come
// out as the series arrive, except the power-cap comparison, which needs every peer and is made
// in Advance. Thread-compatible.
#ifndef RINGSIDE_ANALYSIS_GPU_DETECTOR_H_
#define RINGSIDE_ANALYSIS_GPU_DETECTOR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/fabric_inputs.h"
#include "analysis/finding.h"

namespace ringside::analysis {

struct GpuOptions {
  absl::Duration window = absl::Seconds(30);  // throttled share is judged over this
  double throttle_share = 0.2;     // HW slowdown / HW thermal / power brake share → gpu_throttled
  double sw_thermal_share = 0.5;   // SW thermal slowdown share → gpu_throttled (warning)
  double resolve_share = 0.05;     // resolves when every reason is below this share
  int min_samples = 3;             // clock-event samples in the window before a bit is judged
  double power_cap_share = 0.5;    // power-capped share from which a slower GPU is blamed ...
  double power_cap_clock_deficit = 0.05;  // ... SM clock/max this far below its peers' median
  int power_cap_min_peers = 2;     // busy peers (other GPUs) needed for that comparison
  double busy_utilization = 10;    // utilization_gpu_percent from which a GPU is busy
  absl::Duration pcie_min_duration = absl::Seconds(30);  // below max gen/width while busy
  double pcie_replay_per_min = 31;  // PCIe replays per minute over the window (0 off)
  std::vector<int> xids = {32, 38, 39, 42, 48, 54, 56, 57, 58, 60, 61, 62, 63,
                           64, 74, 78, 79, 92, 94, 95, 119, 120, 140};
  std::vector<int> critical_xids = {48, 64, 74, 79, 95, 119, 120, 140};
  absl::Duration xid_hold = absl::Minutes(10);
  absl::Duration memory_hold = absl::Minutes(30);
  absl::Duration stale_after = absl::Minutes(2);  // no sample this long: throttle/PCIe resolve
};

// NVML index ↔ PCI bus id per node, from the agent's gpu info records. Thread-compatible.
class GpuDirectory {
 public:
  // `pci_bus_id` in any spelling (normalised to the sysfs form).
  void Map(absl::string_view node, absl::string_view index, absl::string_view pci_bus_id);
  std::string BusIdOf(absl::string_view node, absl::string_view index) const;  // "" unknown
  std::string IndexOf(absl::string_view node, absl::string_view pci_bus_id) const;

 private:
  absl::flat_hash_map<std::string, std::string> bus_of_;    // node \x1f index → bus id
  absl::flat_hash_map<std::string, std::string> index_of_;  // node \x1f bus id → index
};

class GpuDetector {
 public:
  // `directory` may be null; it must outlive the detector.
  GpuDetector(GpuOptions options, const GpuDirectory* directory);

  static bool Uses(absl::string_view source, absl::string_view counter);
  static bool UsesEvent(absl::string_view source) { return source == "nvml_xid"; }

  void ObserveCounter(const CounterStep& step, std::vector<Finding>& out);
  void ObserveState(const StateSample& sample, std::vector<Finding>& out);
  // An "nvml_xid" event; `detail` "XID <n>".
  void ObserveXid(absl::string_view node, absl::string_view gpu, absl::Time at,
                  absl::string_view detail, std::vector<Finding>& out);
  // Power-cap comparison, holds and staleness.
  void Advance(absl::Time now, std::vector<Finding>& out);
  // Takes over an open incident of a gpu_* kind after a restart.
  bool Restore(const Finding& open);

  size_t gpus() const { return gpus_.size(); }
  // The latest compute_processes of a GPU (NVML's running compute processes); -1 unknown. More
  // than one: ranks that share the GPU time-slice it, and look late by turns.
  double ComputeProcesses(absl::string_view node, absl::string_view index) const;

 private:
  // A share of time over a sliding window: (time, on, total) entries and their sums.
  struct ShareWindow {
    std::deque<std::pair<absl::Time, std::pair<double, double>>> q;
    double on = 0, total = 0;
    void Add(absl::Time t, double on_part, double total_part, absl::Duration window);
    double Share() const { return total > 0 ? on / total : 0; }
  };
  enum Reason { kHwSlowdown, kHwThermal, kHwPowerBrake, kSwThermal, kPowerCap, kReasons };
  struct Open {
    bool open = false;
    std::map<std::string, std::string> entity;
    uint32_t reasons = 0;  // gpu_throttled: the reasons last reported
  };
  struct Gpu {
    std::string node, index;
    absl::Time last_seen = absl::InfinitePast();
    ShareWindow bits[kReasons];      // clock-event-reason samples
    ShareWindow counters[kReasons];  // throttle-ns counters (no counter for HW slowdown)
    std::optional<absl::Time> since[kReasons];
    ShareWindow clock;               // SM clock / max while busy (on = ratio, total = 1)
    double sm_clock = -1, sm_clock_max = -1, temperature = -1, power_mw = -1, limit_mw = -1;
    double utilization = -1, compute_processes = -1;
    std::optional<uint64_t> reasons_mask;
    absl::Time busy_at = absl::InfinitePast();  // last sample that showed it busy
    double gen = -1, gen_max = -1, width = -1, width_max = -1;
    std::optional<absl::Time> pcie_since;
    ShareWindow replays;  // on = replays, total = seconds
    double ecc_uncorrected = 0, remap_failure = 0, remap_pending = 0;
    absl::Time last_memory_error = absl::InfinitePast();
    absl::Time last_xid = absl::InfinitePast(), last_xid_event = absl::InfinitePast();
    int last_xid_code = -1;
    double xid_count = 0, last_xid_gauge = -1;
    Open throttled, xid, memory, pcie;
  };

  Gpu& GpuOf(absl::string_view node, absl::string_view index);
  std::map<std::string, std::string> EntityOf(const Gpu& g) const;
  bool Busy(const Gpu& g) const;
  double ReasonShare(const Gpu& g, int r) const;
  // Opens, updates (when `changed`) or keeps an incident; resolves with `resolution` when !active.
  void Report(Gpu& g, Open& o, IncidentKind kind, bool active, bool changed, Severity severity,
              absl::Time at, std::map<std::string, double> evidence, std::string summary,
              std::vector<Finding>& out);
  void JudgeThrottle(Gpu& g, absl::Time at, bool power_cap_blamed, double peer_ratio,
                     std::vector<Finding>& out);
  void JudgePcie(Gpu& g, absl::Time at, std::vector<Finding>& out);
  void JudgeMemory(Gpu& g, absl::Time at, std::vector<Finding>& out);
  void RaiseXid(Gpu& g, int xid, absl::Time at, std::vector<Finding>& out);
  std::string Name(const Gpu& g) const;  // "GPU 3 (0000:19:00.0) on node-05"

  GpuOptions options_;
  const GpuDirectory* directory_;
  std::map<std::string, Gpu> gpus_;  // node \x1f index; ordered: deterministic findings
  absl::flat_hash_map<std::string, bool> power_capped_;  // key → blamed at the last Advance
};

// "XID 79" (or "79", "Xid 79, ...") → 79; -1 when there is no number.
int ParseXid(absl::string_view detail);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_GPU_DETECTOR_H_
