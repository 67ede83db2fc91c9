#include "collectors/nvml/gpu_signals.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace ringside::collectors {
namespace {

using nvml::Return;
constexpr SeriesKind C = SeriesKind::kCounter;
constexpr SeriesKind G = SeriesKind::kGauge;

// The most compute processes listed per GPU (more are counted, not listed).
constexpr unsigned int kMaxProcesses = 256;

bool IsThrottle(GpuSignal s) {
  return s == GpuSignal::kThrottlePowerCap || s == GpuSignal::kThrottleSwThermal ||
         s == GpuSignal::kThrottleHwThermal || s == GpuSignal::kThrottleHwPowerBrake;
}

const char* SymbolOf(const nvml::Functions& fn, GpuSignal s) {
  switch (s) {
    case GpuSignal::kClockEventReasons:
      return fn.clocks_event_reasons_symbol ? fn.clocks_event_reasons_symbol
                                            : nvml::kDeviceGetClocksEventReasonsSymbol;
    case GpuSignal::kSmClock:
      return nvml::kDeviceGetClockInfoSymbol;
    case GpuSignal::kSmClockMax:
      return nvml::kDeviceGetMaxClockInfoSymbol;
    case GpuSignal::kTemperature:
      return nvml::kDeviceGetTemperatureSymbol;
    case GpuSignal::kPower:
      return nvml::kDeviceGetPowerUsageSymbol;
    case GpuSignal::kPowerLimit:
      return nvml::kDeviceGetEnforcedPowerLimitSymbol;
    case GpuSignal::kUtilization:
      return nvml::kDeviceGetUtilizationRatesSymbol;
    case GpuSignal::kPcieGen:
      return nvml::kDeviceGetCurrPcieLinkGenerationSymbol;
    case GpuSignal::kPcieGenMax:
      return nvml::kDeviceGetMaxPcieLinkGenerationSymbol;
    case GpuSignal::kPcieWidth:
      return nvml::kDeviceGetCurrPcieLinkWidthSymbol;
    case GpuSignal::kPcieWidthMax:
      return nvml::kDeviceGetMaxPcieLinkWidthSymbol;
    case GpuSignal::kEccUncorrected:
      return nvml::kDeviceGetTotalEccErrorsSymbol;
    case GpuSignal::kRemapPending:
    case GpuSignal::kRemapFailure:
      return nvml::kDeviceGetRemappedRowsSymbol;
    case GpuSignal::kPcieReplay:
      return nvml::kDeviceGetPcieReplayCounterSymbol;
    case GpuSignal::kComputeProcesses:
      return nvml::kDeviceGetComputeRunningProcessesSymbol;
    default:
      return nvml::kDeviceGetFieldValuesSymbol;
  }
}

// Whether the driver has the entry point of a non-field signal.
bool HasEntryPoint(const nvml::Functions& fn, GpuSignal s) {
  switch (s) {
    case GpuSignal::kClockEventReasons:
      return fn.device_get_clocks_event_reasons != nullptr;
    case GpuSignal::kSmClock:
      return fn.device_get_clock_info != nullptr;
    case GpuSignal::kSmClockMax:
      return fn.device_get_max_clock_info != nullptr;
    case GpuSignal::kTemperature:
      return fn.device_get_temperature != nullptr;
    case GpuSignal::kPower:
      return fn.device_get_power_usage != nullptr;
    case GpuSignal::kPowerLimit:
      return fn.device_get_enforced_power_limit != nullptr;
    case GpuSignal::kUtilization:
      return fn.device_get_utilization_rates != nullptr;
    case GpuSignal::kPcieGen:
      return fn.device_get_curr_pcie_link_generation != nullptr;
    case GpuSignal::kPcieGenMax:
      return fn.device_get_max_pcie_link_generation != nullptr;
    case GpuSignal::kPcieWidth:
      return fn.device_get_curr_pcie_link_width != nullptr;
    case GpuSignal::kPcieWidthMax:
      return fn.device_get_max_pcie_link_width != nullptr;
    case GpuSignal::kEccUncorrected:
      return fn.device_get_total_ecc_errors != nullptr;
    case GpuSignal::kRemapPending:
    case GpuSignal::kRemapFailure:
      return fn.device_get_remapped_rows != nullptr;
    case GpuSignal::kPcieReplay:
      return fn.device_get_pcie_replay_counter != nullptr;
    case GpuSignal::kComputeProcesses:
      return fn.device_get_compute_running_processes != nullptr;
    default:
      return false;
  }
}

// The NVML call behind a non-field signal, uncached.
Return Call(const nvml::Functions& fn, nvml::Device dev, GpuSignal s, uint64_t* value,
            std::vector<unsigned int>* pids) {
  unsigned int u = 0;
  Return r = nvml::kErrorNotSupported;
  switch (s) {
    case GpuSignal::kClockEventReasons: {
      unsigned long long bits = 0;
      r = fn.device_get_clocks_event_reasons(dev, &bits);
      *value = bits;
      return r;
    }
    case GpuSignal::kSmClock:
      r = fn.device_get_clock_info(dev, nvml::kClockSm, &u);
      break;
    case GpuSignal::kSmClockMax:
      r = fn.device_get_max_clock_info(dev, nvml::kClockSm, &u);
      break;
    case GpuSignal::kTemperature:
      r = fn.device_get_temperature(dev, nvml::kTemperatureGpu, &u);
      break;
    case GpuSignal::kPower:
      r = fn.device_get_power_usage(dev, &u);
      break;
    case GpuSignal::kPowerLimit:
      r = fn.device_get_enforced_power_limit(dev, &u);
      break;
    case GpuSignal::kUtilization: {
      nvml::Utilization util{};
      r = fn.device_get_utilization_rates(dev, &util);
      u = util.gpu;
      break;
    }
    case GpuSignal::kPcieGen:
      r = fn.device_get_curr_pcie_link_generation(dev, &u);
      break;
    case GpuSignal::kPcieGenMax:
      r = fn.device_get_max_pcie_link_generation(dev, &u);
      break;
    case GpuSignal::kPcieWidth:
      r = fn.device_get_curr_pcie_link_width(dev, &u);
      break;
    case GpuSignal::kPcieWidthMax:
      r = fn.device_get_max_pcie_link_width(dev, &u);
      break;
    case GpuSignal::kEccUncorrected: {
      unsigned long long n = 0;
      r = fn.device_get_total_ecc_errors(dev, nvml::kMemoryErrorUncorrected, nvml::kVolatileEcc,
                                         &n);
      *value = n;
      return r;
    }
    case GpuSignal::kRemapPending:
    case GpuSignal::kRemapFailure: {
      unsigned int corrected = 0, uncorrected = 0, pending = 0, failure = 0;
      r = fn.device_get_remapped_rows(dev, &corrected, &uncorrected, &pending, &failure);
      u = (s == GpuSignal::kRemapPending ? pending : failure) != 0 ? 1 : 0;
      break;
    }
    case GpuSignal::kPcieReplay:
      r = fn.device_get_pcie_replay_counter(dev, &u);
      break;
    case GpuSignal::kComputeProcesses: {
      // Room for kMaxProcesses, and slack in case a newer driver writes a longer entry.
      struct {
        nvml::ProcessInfo infos[kMaxProcesses];
        char slack[1024];
      } buf;
      unsigned int count = kMaxProcesses;
      r = fn.device_get_compute_running_processes(dev, &count, buf.infos);
      if (r == nvml::kErrorInsufficientSize) {  // more than kMaxProcesses: count them only
        *value = count;
        if (pids != nullptr) pids->clear();
        return nvml::kSuccess;
      }
      if (r == nvml::kSuccess) {
        count = std::min(count, kMaxProcesses);
        if (pids != nullptr) {
          pids->clear();
          for (unsigned int i = 0; i < count; ++i) pids->push_back(buf.infos[i].pid);
          std::sort(pids->begin(), pids->end());
        }
        u = count;
      }
      break;
    }
    default:
      break;
  }
  *value = u;
  return r;
}

}  // namespace

const std::vector<GpuSignalSpec>& GpuSignalSpecs() {
  static const std::vector<GpuSignalSpec>* specs = new std::vector<GpuSignalSpec>{
      {GpuSignal::kClockEventReasons, "clock_event_reasons", G, Unit::kEnum, 0, false},
      {GpuSignal::kSmClock, "sm_clock_mhz", G, Unit::kMegahertz, 0, false},
      {GpuSignal::kSmClockMax, "sm_clock_max_mhz", G, Unit::kMegahertz, 0, false},
      {GpuSignal::kTemperature, "temperature_c", G, Unit::kCelsius, 0, false},
      {GpuSignal::kPower, "power_mw", G, Unit::kMilliwatts, 0, false},
      {GpuSignal::kPowerLimit, "power_limit_mw", G, Unit::kMilliwatts, 0, false},
      {GpuSignal::kUtilization, "utilization_gpu_percent", G, Unit::kPercent, 0, false},
      {GpuSignal::kPcieGen, "pcie_link_gen", G, Unit::kCount, 0, false},
      {GpuSignal::kPcieGenMax, "pcie_link_gen_max", G, Unit::kCount, 0, false},
      {GpuSignal::kPcieWidth, "pcie_link_width", G, Unit::kCount, 0, false},
      {GpuSignal::kPcieWidthMax, "pcie_link_width_max", G, Unit::kCount, 0, false},
      {GpuSignal::kThrottlePowerCap, "throttle_power_cap_ns", C, Unit::kNanoseconds, 64, true},
      {GpuSignal::kThrottleSwThermal, "throttle_sw_thermal_ns", C, Unit::kNanoseconds, 64, true},
      {GpuSignal::kThrottleHwThermal, "throttle_hw_thermal_ns", C, Unit::kNanoseconds, 64, true},
      {GpuSignal::kThrottleHwPowerBrake, "throttle_hw_power_brake_ns", C, Unit::kNanoseconds, 64,
       true},
      {GpuSignal::kEccUncorrected, "ecc_uncorrected_volatile", C, Unit::kCount, 64, true},
      {GpuSignal::kRemapPending, "remap_pending", G, Unit::kCount, 0, true},
      {GpuSignal::kRemapFailure, "remap_failure", G, Unit::kCount, 0, true},
      {GpuSignal::kPcieReplay, "pcie_replay", C, Unit::kCount, 32, true},
      {GpuSignal::kComputeProcesses, "compute_processes", G, Unit::kCount, 0, true},
      {GpuSignal::kXidEvents, "xid_events", C, Unit::kCount, 64, false},
      {GpuSignal::kLastXid, "last_xid", G, Unit::kEnum, 0, false},
  };
  return *specs;
}

const GpuSignalSpec& SpecOf(GpuSignal s) { return GpuSignalSpecs()[static_cast<size_t>(s)]; }

unsigned int DriverBranch(const std::string& version) {
  // The first number of three or more ("580.159.04"), else the second ("13.580.159.04").
  std::vector<unsigned long> parts;
  const char* p = version.c_str();
  while (*p != '\0') {
    char* end = nullptr;
    unsigned long v = std::strtoul(p, &end, 10);
    if (end == p) return 0;
    parts.push_back(v);
    if (*end == '\0') break;
    if (*end != '.') return 0;
    p = end + 1;
  }
  if (parts.size() >= 4) return static_cast<unsigned int>(parts[1]);
  if (parts.size() >= 2) return static_cast<unsigned int>(parts[0]);
  return 0;
}

GpuSignals GpuSignals::Plan(const nvml::NvmlLibrary& lib, nvml::Device dev, unsigned int index,
                            bool new_throttle_ids, bool xid, CycleErrors& errors) {
  const nvml::Functions& fn = lib.fn();
  GpuSignals g;
  g.dev_ = dev;
  g.index_ = index;
  const std::string where = absl::StrCat("nvml GPU ", index, ": ");
  for (const GpuSignalSpec& spec : GpuSignalSpecs()) {
    const GpuSignal s = spec.signal;
    if (IsThrottle(s) || s == GpuSignal::kXidEvents || s == GpuSignal::kLastXid) continue;
    if (!HasEntryPoint(fn, s)) continue;
    uint64_t value = 0;
    const Return r = Call(fn, dev, s, &value, nullptr);
    if (r == nvml::kErrorNotSupported || r == nvml::kErrorFunctionNotFound) continue;
    if (r != nvml::kSuccess) {  // kept: it may answer later; said once here
      errors.Add(lib.ToStatus(r, absl::StrCat(where, SymbolOf(fn, s))));
    }
    if (s == GpuSignal::kSmClockMax) g.sm_clock_max_ = value;  // ~1.5 ms a call: once
    if (s == GpuSignal::kPcieGenMax) g.pcie_gen_max_ = value;
    if (s == GpuSignal::kPcieWidthMax) g.pcie_width_max_ = value;
    if ((s == GpuSignal::kSmClockMax || s == GpuSignal::kPcieGenMax ||
         s == GpuSignal::kPcieWidthMax) &&
        r != nvml::kSuccess) {
      continue;  // a maximum that did not answer at discovery is left out until the next one
    }
    g.signals_.push_back(s);
  }
  // Throttle-time counters: one probe batch; a field answering NOT_SUPPORTED is left out.
  if (fn.device_get_field_values != nullptr) {
    const GpuSignal kinds[] = {GpuSignal::kThrottlePowerCap, GpuSignal::kThrottleSwThermal,
                               GpuSignal::kThrottleHwThermal, GpuSignal::kThrottleHwPowerBrake};
    const unsigned int ids[] = {
        nvml::kFieldThrottlePowerCap,
        new_throttle_ids ? nvml::kFieldThrottleSwThermalNew : nvml::kFieldThrottleSwThermalOld,
        new_throttle_ids ? nvml::kFieldThrottleHwThermalNew : nvml::kFieldThrottleHwThermalOld,
        new_throttle_ids ? nvml::kFieldThrottleHwPowerBrakeNew
                         : nvml::kFieldThrottleHwPowerBrakeOld};
    nvml::FieldValue batch[4] = {};
    for (int i = 0; i < 4; ++i) {
      batch[i].field_id = ids[i];
      batch[i].nvml_return = nvml::kErrorUnknown;
    }
    const Return r = fn.device_get_field_values(dev, 4, batch);
    for (int i = 0; i < 4; ++i) {
      const Return fr = r == nvml::kSuccess ? batch[i].nvml_return : r;
      if (fr == nvml::kErrorNotSupported || fr == nvml::kErrorInvalidArgument) continue;
      g.throttle_fields_.push_back(ids[i]);
      g.throttle_signals_.push_back(kinds[i]);
    }
  }
  // Series order: the spec order.
  std::vector<GpuSignal> ordered;
  for (const GpuSignalSpec& spec : GpuSignalSpecs()) {
    const GpuSignal s = spec.signal;
    const bool present = std::find(g.signals_.begin(), g.signals_.end(), s) != g.signals_.end() ||
                         std::find(g.throttle_signals_.begin(), g.throttle_signals_.end(), s) !=
                             g.throttle_signals_.end() ||
                         (xid && (s == GpuSignal::kXidEvents || s == GpuSignal::kLastXid));
    if (present) ordered.push_back(s);
  }
  g.signals_ = std::move(ordered);
  return g;
}

void GpuSignals::AddDefs(std::vector<SeriesDef>& defs) const {
  for (GpuSignal s : signals_) {
    const GpuSignalSpec& spec = SpecOf(s);
    SeriesDef def;
    def.source = "gpu";
    def.device = absl::StrCat(index_);
    def.counter = spec.counter;
    def.kind = spec.kind;
    def.width = spec.kind == SeriesKind::kCounter ? spec.width : 0;
    def.unit = spec.unit;
    defs.push_back(std::move(def));
  }
}

Return GpuSignals::ReadOne(const nvml::NvmlLibrary& lib, GpuSignal s, uint64_t* value) {
  switch (s) {
    case GpuSignal::kSmClockMax:
      *value = sm_clock_max_;
      return nvml::kSuccess;
    case GpuSignal::kPcieGenMax:
      *value = pcie_gen_max_;
      return nvml::kSuccess;
    case GpuSignal::kPcieWidthMax:
      *value = pcie_width_max_;
      return nvml::kSuccess;
    default:
      return Call(lib.fn(), dev_, s, value, s == GpuSignal::kComputeProcesses ? &pids_ : nullptr);
  }
}

void GpuSignals::ReadSlow(const nvml::NvmlLibrary& lib, CycleErrors& errors) {
  const nvml::Functions& fn = lib.fn();
  const std::string where = absl::StrCat("nvml GPU ", index_, ": ");
  auto fail = [&](GpuSignal s, Return r, const char* what) {
    Value& v = slow_values_[static_cast<size_t>(s)];
    if (r == nvml::kErrorNotSupported) {
      v = Value{};
      return;
    }
    v = Value{0, ValueStatus::kError};
    errors.Add(lib.ToStatus(r, absl::StrCat(where, what)));
  };
  if (!throttle_fields_.empty()) {
    std::vector<nvml::FieldValue> batch(throttle_fields_.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i].field_id = throttle_fields_[i];
      batch[i].nvml_return = nvml::kErrorUnknown;
    }
    const Return r = fn.device_get_field_values(dev_, static_cast<int>(batch.size()), batch.data());
    for (size_t i = 0; i < batch.size(); ++i) {
      const Return fr = r == nvml::kSuccess ? batch[i].nvml_return : r;
      const std::string what =
          absl::StrCat(nvml::kDeviceGetFieldValuesSymbol, "(field ", throttle_fields_[i], ")");
      if (fr != nvml::kSuccess) {
        fail(throttle_signals_[i], fr, what.c_str());
        continue;
      }
      absl::StatusOr<uint64_t> value = nvml::FieldValueToUint64(batch[i]);
      if (!value.ok()) {
        slow_values_[static_cast<size_t>(throttle_signals_[i])] = Value{0, ValueStatus::kError};
        errors.Add(absl::DataLossError(absl::StrCat(where, value.status().message())));
        continue;
      }
      slow_values_[static_cast<size_t>(throttle_signals_[i])] = Value{*value, ValueStatus::kOk};
    }
  }
  // (remap_pending and remap_failure each make the one call that answers both: every
  // slow_interval, ~15 µs.)
  for (GpuSignal s : signals_) {
    if (!SpecOf(s).slow || IsThrottle(s)) continue;
    uint64_t value = 0;
    const Return r = ReadOne(lib, s, &value);
    if (r != nvml::kSuccess) {
      fail(s, r, SymbolOf(fn, s));
      continue;
    }
    slow_values_[static_cast<size_t>(s)] = Value{value, ValueStatus::kOk};
  }
}

void GpuSignals::Read(const nvml::NvmlLibrary& lib, bool slow, const XidTally& xid, Value* values,
                      CycleErrors& errors) {
  const nvml::Functions& fn = lib.fn();
  if (slow) ReadSlow(lib, errors);
  for (size_t i = 0; i < signals_.size(); ++i) {
    const GpuSignal s = signals_[i];
    Value& v = values[i];
    if (s == GpuSignal::kXidEvents) {
      v = Value{xid.count, ValueStatus::kOk};
      continue;
    }
    if (s == GpuSignal::kLastXid) {
      v = xid.count > 0 ? Value{xid.last, ValueStatus::kOk} : Value{};
      continue;
    }
    if (SpecOf(s).slow) {
      v = slow_values_[static_cast<size_t>(s)];
      // Between slow reads a good reading is carried over for /metrics, never re-uploaded; a
      // failed one is not counted again.
      if (!slow) {
        v.status = v.status == ValueStatus::kOk ? ValueStatus::kStale : ValueStatus::kUnavailable;
      }
      continue;
    }
    uint64_t value = 0;
    const Return r = ReadOne(lib, s, &value);
    if (r == nvml::kSuccess) {
      v = Value{value, ValueStatus::kOk};
    } else if (r == nvml::kErrorNotSupported) {
      v = Value{};
    } else {
      v = Value{0, ValueStatus::kError};
      errors.Add(lib.ToStatus(r, absl::StrCat("nvml GPU ", index_, ": ", SymbolOf(fn, s))));
    }
  }
}

}  // namespace ringside::collectors
