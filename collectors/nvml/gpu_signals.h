// The per-GPU health and speed signals that tell why a rank's GPU runs slow
// (shared/reference/gpu-causes.md): clock event reasons, clocks, temperature, power, throttle-time
// counters, ECC, row remapping, PCIe, compute processes, XIDs.
//
// Series (source "gpu", device = the NVML GPU index as a string, port ""):
//   clock_event_reasons        GAUGE   raw nvmlClocksEventReasons bitmask (enum)
//   sm_clock_mhz               GAUGE   MHz            sm_clock_max_mhz  GAUGE MHz (read once)
//   temperature_c              GAUGE   °C
//   power_mw, power_limit_mw   GAUGE   mW (power limit: the enforced one)
//   utilization_gpu_percent    GAUGE   %
//   pcie_link_gen, pcie_link_width            GAUGE  current
//   pcie_link_gen_max, pcie_link_width_max    GAUGE  read once at discovery
//   --- slow: read every NvmlOptions::slow_interval, carried over (ValueStatus::kStale) between ---
//   throttle_power_cap_ns, throttle_sw_thermal_ns,
//   throttle_hw_thermal_ns, throttle_hw_power_brake_ns  COUNTER 64-bit ns (field values)
//   ecc_uncorrected_volatile   COUNTER 64-bit
//   remap_pending, remap_failure  GAUGE 0/1
//   pcie_replay                COUNTER 32-bit
//   compute_processes          GAUGE   compute processes on the GPU (their pids: InfoRecord
//                                      source "gpu_processes", label pids)
//   --- from the XID event thread (xid_events.h) ---
//   xid_events                 COUNTER 64-bit XIDs seen since the agent started
//   last_xid                   GAUGE   the latest XID (absent until the first)
//
// A signal whose entry point the driver lacks, or that answers NOT_SUPPORTED when discovery
// probes it, has no series on that GPU (never an error, never a crash).
#ifndef RINGSIDE_COLLECTORS_NVML_GPU_SIGNALS_H_
#define RINGSIDE_COLLECTORS_NVML_GPU_SIGNALS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "collectors/common/collector.h"
#include "collectors/common/series.h"
#include "collectors/nvml/nvml_api.h"

namespace ringside::collectors {

enum class GpuSignal : uint8_t {
  kClockEventReasons,
  kSmClock,
  kSmClockMax,
  kTemperature,
  kPower,
  kPowerLimit,
  kUtilization,
  kPcieGen,
  kPcieGenMax,
  kPcieWidth,
  kPcieWidthMax,
  // Slow.
  kThrottlePowerCap,
  kThrottleSwThermal,
  kThrottleHwThermal,
  kThrottleHwPowerBrake,
  kEccUncorrected,
  kRemapPending,
  kRemapFailure,
  kPcieReplay,
  kComputeProcesses,
  // Events.
  kXidEvents,
  kLastXid,
};

struct GpuSignalSpec {
  GpuSignal signal;
  const char* counter;  // SeriesDef::counter
  SeriesKind kind;
  Unit unit;
  uint8_t width;  // counters only
  bool slow;      // read every slow_interval only
};

// Every signal, in series order.
const std::vector<GpuSignalSpec>& GpuSignalSpecs();
const GpuSignalSpec& SpecOf(GpuSignal s);

// What the XID event thread has seen on one GPU (xid_events.h).
struct XidTally {
  bool registered = false;  // the GPU's XID events are watched
  uint64_t count = 0;
  uint64_t last = 0;  // valid when count > 0
};

// The signals of one GPU: which ones it answers, their series, and one cycle's reads.
class GpuSignals {
 public:
  // Probes which signals GPU `index` answers. `new_throttle_ids`: the driver numbers the SW
  // thermal, HW thermal and HW power brake fields 269-271 (else 251-253). `xid`: the XID event
  // thread watches this GPU (the two XID series are added).
  static GpuSignals Plan(const nvml::NvmlLibrary& lib, nvml::Device dev, unsigned int index,
                         bool new_throttle_ids, bool xid, CycleErrors& errors);

  // This GPU's series, in the order Read fills them.
  void AddDefs(std::vector<SeriesDef>& defs) const;
  size_t size() const { return signals_.size(); }
  const std::vector<GpuSignal>& signals() const { return signals_; }

  // Fills values[0..size()) for this cycle. `slow`: read the slow signals now (else their last
  // readings are carried over as kStale). `xid` is what the event thread has seen.
  void Read(const nvml::NvmlLibrary& lib, bool slow, const XidTally& xid, Value* values,
            CycleErrors& errors);

  // The pids of the compute processes at the latest slow read, ascending.
  const std::vector<unsigned int>& pids() const { return pids_; }
  unsigned int index() const { return index_; }

 private:
  // One non-field signal (its cached value for the *Max ones).
  nvml::Return ReadOne(const nvml::NvmlLibrary& lib, GpuSignal s, uint64_t* value);
  void ReadSlow(const nvml::NvmlLibrary& lib, CycleErrors& errors);

  nvml::Device dev_ = nullptr;
  unsigned int index_ = 0;
  std::vector<GpuSignal> signals_;
  std::vector<unsigned int> throttle_fields_;  // field ids of the throttle signals present
  std::vector<GpuSignal> throttle_signals_;    // parallel to throttle_fields_
  uint64_t sm_clock_max_ = 0, pcie_gen_max_ = 0, pcie_width_max_ = 0;
  // Slow readings, by signal, carried between slow reads.
  std::vector<Value> slow_values_ =
      std::vector<Value>(static_cast<size_t>(GpuSignal::kLastXid) + 1);
  std::vector<unsigned int> pids_;
};

// The branch of a driver or NVML version string: "580.159.04" → 580, "13.580.159.04" → 580 (an
// NVML version: CUDA major first); 0 when it cannot tell.
unsigned int DriverBranch(const std::string& version);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NVML_GPU_SIGNALS_H_
