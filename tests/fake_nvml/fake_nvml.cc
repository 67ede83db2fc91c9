// A fake libnvidia-ml.so.1 for the tests. It exports the entry points ringside declares in
// collectors/nvml/nvml_types.h, with the same types, so the collector loads it through its real
// dlopen path. No NVIDIA code: the behaviour is what the reference describes, driven by a config.
//
// $RINGSIDE_FAKE_NVML_CONFIG names a text file, read again on every call, so a test changes the
// GPUs between cycles by rewriting it. One directive per line, '#' starts a comment:
//
//   fail <function> <CODE>                 (before any gpu) that function always returns CODE
//   driver_version <text>
//   gpu                                    starts the next GPU (index 0, 1, ...)
//   name <text...> | uuid <text> | pci_bus_id <text> | arch <n>
//   links <n>                              NVLinks on the device
//   link_count_field <yes|no>              does field 91 answer (default yes)
//   down <link>...                         links whose state is DISABLED
//   down_return <CODE>                     what counter reads of a down link return (NOT_SUPPORTED)
//   counter <replay|recovery|crc_flit|crc_data|ecc_data> <link|*> <value>   DL counters (0 unset)
//   field <id> <link|*> <value> [ull|ul|ui|us|sll|si|d]   a per-link field that answers
//   field_fail <id> <link|*> <CODE>        a per-link field entry that fails
//   fail <function> <CODE> [<link>]        this GPU's calls of <function> (on <link>) return CODE
//
// GPU signals (collectors/nvml/gpu_signals.h; each answers NOT_SUPPORTED until configured):
//   nvml_version <text>                    (before any gpu) nvmlSystemGetNVMLVersion
//   clocks_event_reasons <bits|->          e.g. 0x40 (HW thermal slowdown); '-': NOT_SUPPORTED
//   signal <name> <value|->                sm_clock, sm_clock_max, temperature, power,
//                                          power_limit, utilization, pcie_gen, pcie_gen_max,
//                                          pcie_width, pcie_width_max, pcie_replay,
//                                          ecc_uncorrected, remap_pending, remap_failure
//   processes <pid>...                     compute processes (none listed: supported, empty)
//   gpu_field <id> <value> [<rate> [<since>]]  a device-scope field (throttle-time counters 74,
//                                          269-271 or 251-253) that grows by <rate> per second
//                                          since the fake was loaded, or since <since> (Unix
//                                          seconds, wall clock)
//   gpu_field_fail <id> <CODE>
//   xid_events yes|no                      XID registration supported (default no)
//   xid <n>...                             XIDs, in order: each is delivered once by
//                                          nvmlEventSetWait_v2 after registration; those
//                                          already listed when the GPU registers are lost, as
//                                          NVML loses events from before registration
//
// CODE is a name (NOT_SUPPORTED, UNKNOWN, GPU_IS_LOST, ...) or a number. A field that is not
// configured answers NOT_SUPPORTED. A bad config line aborts the process, so a typo fails a test.
//
// $RINGSIDE_FAKE_NVML_JOURNAL, if set, names a file to which every call appends its function name.
//
// $RINGSIDE_FAKE_NVML_STATIC=1 makes the fake read the config once, at the first call, and answer
// every later call from memory (bench/agent_bench.cc: without it each call costs a read and parse
// of the config file, ~40 µs, which would swamp what the collector itself costs).
//
// Build variants: FAKE_NVML_OMIT_NVLINK_ERROR_COUNTER leaves out a required entry point,
// FAKE_NVML_OMIT_FIELD_VALUES the optional field-values API, FAKE_NVML_OLD_DRIVER what a driver
// before the 12.2 generation lacks: nvmlDeviceGetCurrentClocksEventReasons (the older
// ...ThrottleReasons name answers), nvmlDeviceGetComputeRunningProcesses_v3 and
// nvmlEventSetWait_v2.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectors/nvml/nvml_types.h"
#include "tests/fake_nvml/fake_nvml_config.h"

namespace nv = ringside::collectors::nvml;
using ringside::fake_nvml::Config;
using ringside::fake_nvml::FailRule;
using ringside::fake_nvml::FakeGpu;
using ringside::fake_nvml::kAll;
using ringside::fake_nvml::kMaxGpus;
using ringside::fake_nvml::LoadConfig;

// Only the NVML entry points are exported (the target builds with hidden visibility).
#define FAKE_NVML_EXPORT __attribute__((visibility("default")))

namespace {

struct DeviceSlot {
  int unused;
};
DeviceSlot g_slots[kMaxGpus];
std::mutex g_mu;
int g_init_count = 0;  // guarded by g_mu
// XID delivery state, guarded by g_mu: which GPUs are registered, how many of their configured
// XIDs were delivered (or lost before registration).
bool g_xid_registered[kMaxGpus] = {};
size_t g_xid_delivered[kMaxGpus] = {};
const std::chrono::steady_clock::time_point g_loaded = std::chrono::steady_clock::now();

void Journal(const char* function) {
  const char* path = std::getenv("RINGSIDE_FAKE_NVML_JOURNAL");
  if (path == nullptr) return;
  if (FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s\n", function);
    std::fclose(f);
  }
}

// The config for the current call (g_mu held): read again on every call, so that a test changes
// the GPUs between cycles by rewriting the file; read once with $RINGSIDE_FAKE_NVML_STATIC=1.
bool g_frozen = false;  // guarded by g_mu: the config was read once ($RINGSIDE_FAKE_NVML_STATIC)

Config& CurrentConfig() {
  static Config* cfg = new Config();  // never destroyed: calls may come from static destructors
  if (!g_frozen) {
    *cfg = LoadConfig();
    const char* fixed = std::getenv("RINGSIDE_FAKE_NVML_STATIC");
    g_frozen = fixed != nullptr && std::strcmp(fixed, "1") == 0;
  }
  return *cfg;
}

// One entry-point call: holds the lock, journals, reads the config, applies `fail` rules.
class Call {
 public:
  explicit Call(const char* function) : lock_(g_mu), function_(function), cfg_(CurrentConfig()) {
    Journal(function);
  }
  Config& cfg() { return cfg_; }

  // A configured failure of this function (for `gpu` and `link`), else kSuccess.
  nv::Return Injected(const FakeGpu* gpu = nullptr, long link = kAll) const {
    for (const FailRule& f : cfg_.fails) {
      if (f.function == function_) return f.code;
    }
    if (gpu != nullptr) {
      for (const FailRule& f : gpu->fails) {
        if (f.function == function_ && (f.link == kAll || link == kAll || f.link == link)) {
          return f.code;
        }
      }
    }
    return nv::kSuccess;
  }

  // The GPU behind a handle, with the checks every device call makes.
  nv::Return Gpu(nv::Device device, FakeGpu** gpu) {
    if (g_init_count == 0) return nv::kErrorUninitialized;
    auto* slot = reinterpret_cast<DeviceSlot*>(device);
    if (slot < g_slots || slot >= g_slots + kMaxGpus) return nv::kErrorInvalidArgument;
    size_t index = static_cast<size_t>(slot - g_slots);
    if (index >= cfg_.gpus.size()) return nv::kErrorGpuIsLost;
    *gpu = &cfg_.gpus[index];
    return nv::kSuccess;
  }

 private:
  std::lock_guard<std::mutex> lock_;
  const char* function_;
  Config& cfg_;
};

nv::Return CopyString(const std::string& s, char* out, unsigned int length) {
  if (out == nullptr) return nv::kErrorInvalidArgument;
  if (s.size() + 1 > length) return nv::kErrorInsufficientSize;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return nv::kSuccess;
}

[[maybe_unused]] long long NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

extern "C" {

FAKE_NVML_EXPORT nv::Return nvmlInit_v2() {
  Call call(nv::kInitSymbol);
  if (nv::Return r = call.Injected(); r != nv::kSuccess) return r;
  ++g_init_count;
  return nv::kSuccess;
}

FAKE_NVML_EXPORT nv::Return nvmlShutdown() {
  Call call(nv::kShutdownSymbol);
  if (g_init_count == 0) return nv::kErrorUninitialized;
  --g_init_count;
  return nv::kSuccess;
}

FAKE_NVML_EXPORT const char* nvmlErrorString(nv::Return r) {
  switch (r) {
    case nv::kSuccess:
      return "fake: Success";
    case nv::kErrorNotSupported:
      return "fake: Not Supported";
    case nv::kErrorGpuIsLost:
      return "fake: GPU is lost";
    case nv::kErrorDriverNotLoaded:
      return "fake: Driver Not Loaded";
    case nv::kErrorUnknown:
      return "fake: Unknown Error";
    default:
      return "fake: some error";
  }
}

FAKE_NVML_EXPORT nv::Return nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  Call call(nv::kSystemGetDriverVersionSymbol);
  if (g_init_count == 0) return nv::kErrorUninitialized;
  if (nv::Return r = call.Injected(); r != nv::kSuccess) return r;
  return CopyString(call.cfg().driver_version, version, length);
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetCount_v2(unsigned int* count) {
  Call call(nv::kDeviceGetCountSymbol);
  if (g_init_count == 0) return nv::kErrorUninitialized;
  if (nv::Return r = call.Injected(); r != nv::kSuccess) return r;
  if (count == nullptr) return nv::kErrorInvalidArgument;
  *count = static_cast<unsigned int>(call.cfg().gpus.size());
  return nv::kSuccess;
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetHandleByIndex_v2(unsigned int index, nv::Device* device) {
  Call call(nv::kDeviceGetHandleByIndexSymbol);
  if (g_init_count == 0) return nv::kErrorUninitialized;
  if (index >= call.cfg().gpus.size() || device == nullptr) return nv::kErrorInvalidArgument;
  if (nv::Return r = call.Injected(&call.cfg().gpus[index]); r != nv::kSuccess) return r;
  *device = reinterpret_cast<nv::Device>(&g_slots[index]);
  return nv::kSuccess;
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetUUID(nv::Device device, char* uuid, unsigned int length) {
  Call call(nv::kDeviceGetUuidSymbol);
  FakeGpu* gpu = nullptr;
  if (nv::Return r = call.Gpu(device, &gpu); r != nv::kSuccess) return r;
  if (nv::Return r = call.Injected(gpu); r != nv::kSuccess) return r;
  return CopyString(gpu->uuid, uuid, length);
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetName(nv::Device device, char* name, unsigned int length) {
  Call call(nv::kDeviceGetNameSymbol);
  FakeGpu* gpu = nullptr;
  if (nv::Return r = call.Gpu(device, &gpu); r != nv::kSuccess) return r;
  if (nv::Return r = call.Injected(gpu); r != nv::kSuccess) return r;
  return CopyString(gpu->name, name, length);
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetPciInfo_v3(nv::Device device, nv::PciInfo* pci) {
  Call call(nv::kDeviceGetPciInfoSymbol);
  FakeGpu* gpu = nullptr;
  if (nv::Return r = call.Gpu(device, &gpu); r != nv::kSuccess) return r;
  if (nv::Return r = call.Injected(gpu); r != nv::kSuccess) return r;
  if (pci == nullptr) return nv::kErrorInvalidArgument;
  std::memset(pci, 0, sizeof(*pci));
  std::snprintf(pci->bus_id, sizeof(pci->bus_id), "%s", gpu->pci_bus_id.c_str());
  std::snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "%s", gpu->pci_bus_id.c_str());
  return nv::kSuccess;
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetArchitecture(nv::Device device, nv::Architecture* arch) {
  Call call(nv::kDeviceGetArchitectureSymbol);
  FakeGpu* gpu = nullptr;
  if (nv::Return r = call.Gpu(device, &gpu); r != nv::kSuccess) return r;
  if (nv::Return r = call.Injected(gpu); r != nv::kSuccess) return r;
  if (arch == nullptr) return nv::kErrorInvalidArgument;
  *arch = gpu->arch;
  return nv::kSuccess;
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetNvLinkState(nv::Device device, unsigned int link,
                                                     nv::EnableState* active) {
  Call call(nv::kDeviceGetNvLinkStateSymbol);
  FakeGpu* gpu = nullptr;
  if (nv::Return r = call.Gpu(device, &gpu); r != nv::kSuccess) return r;
  if (link >= gpu->links || active == nullptr) return nv::kErrorInvalidArgument;
  if (nv::Return r = call.Injected(gpu, link); r != nv::kSuccess) return r;
  *active = gpu->IsDown(link) ? nv::kFeatureDisabled : nv::kFeatureEnabled;
  return nv::kSuccess;
}

#ifndef FAKE_NVML_OMIT_NVLINK_ERROR_COUNTER
FAKE_NVML_EXPORT nv::Return nvmlDeviceGetNvLinkErrorCounter(nv::Device device, unsigned int link,
                                                            nv::NvLinkErrorCounter counter,
                                                            unsigned long long* value) {
  Call call(nv::kDeviceGetNvLinkErrorCounterSymbol);
  FakeGpu* gpu = nullptr;
  if (nv::Return r = call.Gpu(device, &gpu); r != nv::kSuccess) return r;
  if (link >= gpu->links || counter < 0 || counter > nv::kDlEccData || value == nullptr) {
    return nv::kErrorInvalidArgument;
  }
  if (nv::Return r = call.Injected(gpu, link); r != nv::kSuccess) return r;
  if (gpu->IsDown(link) && gpu->down_return != nv::kSuccess) return gpu->down_return;
  auto it = gpu->counters.find({static_cast<long>(link), counter});
  if (it == gpu->counters.end()) it = gpu->counters.find({kAll, counter});
  *value = it == gpu->counters.end() ? 0 : it->second;
  return nv::kSuccess;
}
#endif

#ifndef FAKE_NVML_OMIT_FIELD_VALUES
FAKE_NVML_EXPORT nv::Return nvmlDeviceGetFieldValues(nv::Device device, int count,
                                                     nv::FieldValue* values) {
  Call call(nv::kDeviceGetFieldValuesSymbol);
  FakeGpu* gpu = nullptr;
  if (nv::Return r = call.Gpu(device, &gpu); r != nv::kSuccess) return r;
  if (count <= 0 || values == nullptr) return nv::kErrorInvalidArgument;
  if (nv::Return r = call.Injected(gpu); r != nv::kSuccess) return r;
  const long long now = NowMicros();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - g_loaded).count();
  for (int i = 0; i < count; ++i) {
    nv::FieldValue& v = values[i];
    v.timestamp = now;
    v.latency_usec = 0;
    if (auto d = gpu->device_fields.find(v.field_id); d != gpu->device_fields.end()) {
      v.nvml_return = d->second.entry.ret;
      v.value_type = d->second.entry.type;
      v.value = d->second.entry.value;
      if (v.nvml_return == nv::kSuccess && v.value_type == nv::kValueUnsignedLongLong) {
        double seconds = elapsed;
        if (d->second.since_unix > 0) {
          seconds = static_cast<double>(now) / 1e6 - d->second.since_unix;
          if (seconds < 0) seconds = 0;
        }
        v.value.ull += static_cast<unsigned long long>(d->second.rate_per_second * seconds);
      }
      continue;
    }
    if (v.field_id == nv::kFieldNvLinkLinkCount) {
      v.nvml_return = gpu->link_count_field ? nv::kSuccess : nv::kErrorNotSupported;
      v.value_type = nv::kValueUnsignedInt;
      v.value.ui = gpu->links;
      continue;
    }
    if (v.scope_id >= gpu->links) {
      v.nvml_return = nv::kErrorInvalidArgument;
      continue;
    }
    auto it = gpu->fields.find({v.field_id, static_cast<long>(v.scope_id)});
    if (it == gpu->fields.end()) it = gpu->fields.find({v.field_id, kAll});
    if (it == gpu->fields.end()) {
      v.nvml_return = nv::kErrorNotSupported;
      continue;
    }
    if (it->second.ret == nv::kSuccess && gpu->IsDown(v.scope_id) &&
        gpu->down_return != nv::kSuccess) {
      v.nvml_return = gpu->down_return;
      continue;
    }
    v.nvml_return = it->second.ret;
    v.value_type = it->second.type;
    v.value = it->second.value;
  }
  return nv::kSuccess;
}
#endif

}  // extern "C"

// --- GPU signals ---------------------------------------------------------------------------

namespace {

// A device call answering one configured value (-1: NOT_SUPPORTED).
template <typename T>
nv::Return Answer(const char* function, nv::Device device, long long FakeGpu::*member, T* out) {
  Call call(function);
  FakeGpu* gpu = nullptr;
  if (nv::Return r = call.Gpu(device, &gpu); r != nv::kSuccess) return r;
  if (nv::Return r = call.Injected(gpu); r != nv::kSuccess) return r;
  if (out == nullptr) return nv::kErrorInvalidArgument;
  if (gpu->*member < 0) return nv::kErrorNotSupported;
  *out = static_cast<T>(gpu->*member);
  return nv::kSuccess;
}

struct EventSetSlot {
  int unused;
} g_event_set;

}  // namespace

extern "C" {

FAKE_NVML_EXPORT nv::Return nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  Call call(nv::kSystemGetNvmlVersionSymbol);
  if (g_init_count == 0) return nv::kErrorUninitialized;
  if (nv::Return r = call.Injected(); r != nv::kSuccess) return r;
  if (call.cfg().nvml_version.empty()) return nv::kErrorNotSupported;
  return CopyString(call.cfg().nvml_version, version, length);
}

#ifndef FAKE_NVML_OLD_DRIVER
FAKE_NVML_EXPORT nv::Return nvmlDeviceGetCurrentClocksEventReasons(nv::Device device,
                                                                   unsigned long long* reasons) {
  return Answer(nv::kDeviceGetClocksEventReasonsSymbol, device, &FakeGpu::clocks_event_reasons,
                reasons);
}
#endif

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetCurrentClocksThrottleReasons(nv::Device device,
                                                                      unsigned long long* reasons) {
  return Answer(nv::kDeviceGetClocksThrottleReasonsSymbol, device, &FakeGpu::clocks_event_reasons,
                reasons);
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetClockInfo(nv::Device device, int type, unsigned int* mhz) {
  if (type != nv::kClockSm) return nv::kErrorNotSupported;
  return Answer(nv::kDeviceGetClockInfoSymbol, device, &FakeGpu::sm_clock, mhz);
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetMaxClockInfo(nv::Device device, int type,
                                                      unsigned int* mhz) {
  if (type != nv::kClockSm) return nv::kErrorNotSupported;
  return Answer(nv::kDeviceGetMaxClockInfoSymbol, device, &FakeGpu::sm_clock_max, mhz);
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetTemperature(nv::Device device, int sensor,
                                                     unsigned int* celsius) {
  if (sensor != nv::kTemperatureGpu) return nv::kErrorNotSupported;
  return Answer(nv::kDeviceGetTemperatureSymbol, device, &FakeGpu::temperature, celsius);
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetPowerUsage(nv::Device device, unsigned int* mw) {
  return Answer(nv::kDeviceGetPowerUsageSymbol, device, &FakeGpu::power, mw);
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetEnforcedPowerLimit(nv::Device device, unsigned int* mw) {
  return Answer(nv::kDeviceGetEnforcedPowerLimitSymbol, device, &FakeGpu::power_limit, mw);
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetUtilizationRates(nv::Device device,
                                                          nv::Utilization* util) {
  if (util == nullptr) return nv::kErrorInvalidArgument;
  unsigned int gpu = 0;
  nv::Return r = Answer(nv::kDeviceGetUtilizationRatesSymbol, device, &FakeGpu::utilization, &gpu);
  if (r == nv::kSuccess) *util = nv::Utilization{gpu, 0};
  return r;
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetCurrPcieLinkGeneration(nv::Device device,
                                                                unsigned int* v) {
  return Answer(nv::kDeviceGetCurrPcieLinkGenerationSymbol, device, &FakeGpu::pcie_gen, v);
}
FAKE_NVML_EXPORT nv::Return nvmlDeviceGetMaxPcieLinkGeneration(nv::Device device, unsigned int* v) {
  return Answer(nv::kDeviceGetMaxPcieLinkGenerationSymbol, device, &FakeGpu::pcie_gen_max, v);
}
FAKE_NVML_EXPORT nv::Return nvmlDeviceGetCurrPcieLinkWidth(nv::Device device, unsigned int* v) {
  return Answer(nv::kDeviceGetCurrPcieLinkWidthSymbol, device, &FakeGpu::pcie_width, v);
}
FAKE_NVML_EXPORT nv::Return nvmlDeviceGetMaxPcieLinkWidth(nv::Device device, unsigned int* v) {
  return Answer(nv::kDeviceGetMaxPcieLinkWidthSymbol, device, &FakeGpu::pcie_width_max, v);
}
FAKE_NVML_EXPORT nv::Return nvmlDeviceGetPcieReplayCounter(nv::Device device, unsigned int* v) {
  return Answer(nv::kDeviceGetPcieReplayCounterSymbol, device, &FakeGpu::pcie_replay, v);
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetTotalEccErrors(nv::Device device, int error_type,
                                                        int counter_type,
                                                        unsigned long long* count) {
  if (error_type != nv::kMemoryErrorUncorrected || counter_type != nv::kVolatileEcc) {
    return nv::kErrorNotSupported;
  }
  return Answer(nv::kDeviceGetTotalEccErrorsSymbol, device, &FakeGpu::ecc_uncorrected, count);
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceGetRemappedRows(nv::Device device, unsigned int* corrected,
                                                      unsigned int* uncorrected,
                                                      unsigned int* pending,
                                                      unsigned int* failure) {
  Call call(nv::kDeviceGetRemappedRowsSymbol);
  FakeGpu* gpu = nullptr;
  if (nv::Return r = call.Gpu(device, &gpu); r != nv::kSuccess) return r;
  if (nv::Return r = call.Injected(gpu); r != nv::kSuccess) return r;
  if (!corrected || !uncorrected || !pending || !failure) return nv::kErrorInvalidArgument;
  if (gpu->remap_pending < 0 || gpu->remap_failure < 0) return nv::kErrorNotSupported;
  *corrected = 0;
  *uncorrected = 0;
  *pending = static_cast<unsigned int>(gpu->remap_pending);
  *failure = static_cast<unsigned int>(gpu->remap_failure);
  return nv::kSuccess;
}

#ifndef FAKE_NVML_OLD_DRIVER
FAKE_NVML_EXPORT nv::Return nvmlDeviceGetComputeRunningProcesses_v3(nv::Device device,
                                                                    unsigned int* count,
                                                                    nv::ProcessInfo* infos) {
  Call call(nv::kDeviceGetComputeRunningProcessesSymbol);
  FakeGpu* gpu = nullptr;
  if (nv::Return r = call.Gpu(device, &gpu); r != nv::kSuccess) return r;
  if (nv::Return r = call.Injected(gpu); r != nv::kSuccess) return r;
  if (count == nullptr) return nv::kErrorInvalidArgument;
  if (!gpu->processes_supported) return nv::kErrorNotSupported;
  const unsigned int n = static_cast<unsigned int>(gpu->processes.size());
  if (*count < n || (n > 0 && infos == nullptr)) {
    *count = n;
    return nv::kErrorInsufficientSize;
  }
  for (unsigned int i = 0; i < n; ++i) {
    infos[i] = nv::ProcessInfo{gpu->processes[i], 1ull << 30, 0xffffffffu, 0xffffffffu};
  }
  *count = n;
  return nv::kSuccess;
}
#endif

// --- XID events ------------------------------------------------------------------------------

FAKE_NVML_EXPORT nv::Return nvmlEventSetCreate(nv::EventSet* set) {
  Call call(nv::kEventSetCreateSymbol);
  if (g_init_count == 0) return nv::kErrorUninitialized;
  if (nv::Return r = call.Injected(); r != nv::kSuccess) return r;
  if (set == nullptr) return nv::kErrorInvalidArgument;
  *set = reinterpret_cast<nv::EventSet>(&g_event_set);
  return nv::kSuccess;
}

FAKE_NVML_EXPORT nv::Return nvmlEventSetFree(nv::EventSet set) {
  Call call(nv::kEventSetFreeSymbol);
  if (set != reinterpret_cast<nv::EventSet>(&g_event_set)) return nv::kErrorInvalidArgument;
  for (size_t i = 0; i < kMaxGpus; ++i) g_xid_registered[i] = false;
  return nv::kSuccess;
}

FAKE_NVML_EXPORT nv::Return nvmlDeviceRegisterEvents(nv::Device device, unsigned long long types,
                                                     nv::EventSet set) {
  Call call(nv::kDeviceRegisterEventsSymbol);
  FakeGpu* gpu = nullptr;
  if (nv::Return r = call.Gpu(device, &gpu); r != nv::kSuccess) return r;
  if (nv::Return r = call.Injected(gpu); r != nv::kSuccess) return r;
  if (set != reinterpret_cast<nv::EventSet>(&g_event_set)) return nv::kErrorInvalidArgument;
  if (!gpu->xid_supported || types != nv::kEventTypeXidCriticalError) {
    return nv::kErrorNotSupported;
  }
  const size_t index = static_cast<size_t>(reinterpret_cast<DeviceSlot*>(device) - g_slots);
  g_xid_registered[index] = true;
  g_xid_delivered[index] = gpu->xids.size();  // earlier XIDs are lost
  return nv::kSuccess;
}

#ifndef FAKE_NVML_OLD_DRIVER
FAKE_NVML_EXPORT nv::Return nvmlEventSetWait_v2(nv::EventSet set, nv::EventData* data,
                                                unsigned int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    bool frozen = false;
    {
      Call call(nv::kEventSetWaitSymbol);
      frozen = g_frozen;
      if (g_init_count == 0) return nv::kErrorUninitialized;
      if (nv::Return r = call.Injected(); r != nv::kSuccess) return r;
      if (set != reinterpret_cast<nv::EventSet>(&g_event_set) || data == nullptr) {
        return nv::kErrorInvalidArgument;
      }
      std::vector<FakeGpu>& gpus = call.cfg().gpus;
      for (size_t i = 0; i < gpus.size() && i < kMaxGpus; ++i) {
        if (!g_xid_registered[i] || g_xid_delivered[i] >= gpus[i].xids.size()) continue;
        *data =
            nv::EventData{reinterpret_cast<nv::Device>(&g_slots[i]), nv::kEventTypeXidCriticalError,
                          gpus[i].xids[g_xid_delivered[i]], 0xffffffffu, 0xffffffffu};
        ++g_xid_delivered[i];
        return nv::kSuccess;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) return nv::kErrorTimeout;
    // Without the lock. A config read once can queue nothing new: sleep out the timeout, as the
    // real call blocks (the agent bench measures the agent, not this loop).
    std::this_thread::sleep_until(frozen ? deadline
                                         : std::min(deadline, std::chrono::steady_clock::now() +
                                                                  std::chrono::milliseconds(20)));
  }
}
#endif

}  // extern "C"
