// Our own declarations of the slice of the NVML C ABI that the agent uses, written from the facts
// in shared/reference/nvml-nvlink.md (numeric values, LP64 layouts, versioned export names) and
// NVIDIA's public API reference for the two info calls the reference does not list
// (nvmlDeviceGetName, nvmlPciInfo_t). No NVIDIA header is included or copied.
//
// Header-only and free of Abseil: the fake libnvidia-ml.so.1 used by the tests implements the
// entry points with exactly these types.
#ifndef RINGSIDE_COLLECTORS_NVML_NVML_TYPES_H_
#define RINGSIDE_COLLECTORS_NVML_NVML_TYPES_H_

#include <cstddef>
#include <cstdint>

namespace ringside::collectors::nvml {

// nvmlReturn_t: a 4-byte enum.
using Return = int;
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorTimeout = 10;
inline constexpr Return kErrorLibraryNotFound = 12;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorResetRequired = 16;
inline constexpr Return kErrorLibRmVersionMismatch = 18;
inline constexpr Return kErrorDeprecated = 26;
inline constexpr Return kErrorNotReady = 27;
inline constexpr Return kErrorUnknown = 999;

// nvmlDevice_t: an opaque 8-byte handle.
struct DeviceOpaque;
using Device = DeviceOpaque*;

// nvmlEnableState_t (the answer of nvmlDeviceGetNvLinkState).
using EnableState = int;
inline constexpr EnableState kFeatureDisabled = 0;
inline constexpr EnableState kFeatureEnabled = 1;

// nvmlNvLinkErrorCounter_t: the per-link DL counters of the pre-Blackwell call.
using NvLinkErrorCounter = int;
inline constexpr NvLinkErrorCounter kDlReplay = 0;    // transmit replays
inline constexpr NvLinkErrorCounter kDlRecovery = 1;  // transmit recoveries
inline constexpr NvLinkErrorCounter kDlCrcFlit = 2;   // receive flow-control digit CRC errors
inline constexpr NvLinkErrorCounter kDlCrcData = 3;   // receive data CRC errors
inline constexpr NvLinkErrorCounter kDlEccData = 4;   // receive data ECC errors

// nvmlDeviceArchitecture_t: an unsigned int.
using Architecture = unsigned int;
inline constexpr Architecture kArchKepler = 2;
inline constexpr Architecture kArchMaxwell = 3;
inline constexpr Architecture kArchPascal = 4;
inline constexpr Architecture kArchVolta = 5;
inline constexpr Architecture kArchTuring = 6;
inline constexpr Architecture kArchAmpere = 7;
inline constexpr Architecture kArchAda = 8;
inline constexpr Architecture kArchHopper = 9;
inline constexpr Architecture kArchBlackwell = 10;
inline constexpr Architecture kArchRubin = 13;
inline constexpr Architecture kArchUnknown = 0xffffffffu;

// nvmlValueType_t: which member of Value a FieldValue carries.
using ValueType = int;
inline constexpr ValueType kValueDouble = 0;
inline constexpr ValueType kValueUnsignedInt = 1;
inline constexpr ValueType kValueUnsignedLong = 2;
inline constexpr ValueType kValueUnsignedLongLong = 3;
inline constexpr ValueType kValueSignedLongLong = 4;
inline constexpr ValueType kValueSignedInt = 5;
inline constexpr ValueType kValueUnsignedShort = 6;

// nvmlValue_t.
union Value {
  double d;
  unsigned int ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
  int si;
  unsigned short us;
};

// nvmlFieldValue_t: 40 bytes, 8-byte aligned on LP64.
struct FieldValue {
  unsigned int field_id;   // NVML_FI_* id, set by the caller
  unsigned int scope_id;   // the link index for NVLink fields
  long long timestamp;     // CPU time of the value, µs since 1970
  long long latency_usec;  // time NVML took to update the value
  ValueType value_type;
  Return nvml_return;  // status of this one entry; `value` is undefined unless kSuccess
  Value value;
};
static_assert(sizeof(FieldValue) == 40);
static_assert(offsetof(FieldValue, scope_id) == 4);
static_assert(offsetof(FieldValue, timestamp) == 8);
static_assert(offsetof(FieldValue, latency_usec) == 16);
static_assert(offsetof(FieldValue, value_type) == 24);
static_assert(offsetof(FieldValue, nvml_return) == 28);
static_assert(offsetof(FieldValue, value) == 32);

// nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v3 (public API reference: legacy bus id of 16
// chars, five unsigned ints, bus id of 32 chars).
struct PciInfo {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};
static_assert(sizeof(PciInfo) == 68);
static_assert(offsetof(PciInfo, bus_id) == 36);

// nvmlEventSet_t: an opaque 8-byte handle.
struct EventSetOpaque;
using EventSet = EventSetOpaque*;

// nvmlEventData_t on LP64 (shared/reference/nvml-nvlink.md §9): 32 bytes.
struct EventData {
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;  // the XID for an XID event (999: unknown XID)
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
static_assert(sizeof(EventData) == 32);
static_assert(offsetof(EventData, event_data) == 16);
static_assert(offsetof(EventData, gpu_instance_id) == 24);

// nvmlEventType*: the XID bit.
inline constexpr unsigned long long kEventTypeXidCriticalError = 0x8;

// nvmlClockType_t, nvmlTemperatureSensors_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t.
inline constexpr int kClockSm = 1;
inline constexpr int kTemperatureGpu = 0;
inline constexpr int kMemoryErrorUncorrected = 1;
inline constexpr int kVolatileEcc = 0;

// nvmlUtilization_t: {unsigned gpu; unsigned memory;} in percent over the last sample period.
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};
static_assert(sizeof(Utilization) == 8);

// nvmlProcessInfo_t as filled by nvmlDeviceGetComputeRunningProcesses_v3 (the v2 layout: pid,
// used GPU memory, MIG GPU and compute instance; 24 bytes on LP64).
struct ProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
static_assert(sizeof(ProcessInfo) == 24);
static_assert(offsetof(ProcessInfo, used_gpu_memory) == 8);

// nvmlClocksEventReasons bits (shared/reference/gpu-causes.md §1.1): a raw bitmask; bits this
// build does not name (0x200 BoardLimit, 0x400 Reliability in newer docs) are kept as they are.
inline constexpr unsigned long long kClocksEventGpuIdle = 0x1;
inline constexpr unsigned long long kClocksEventSwPowerCap = 0x4;
inline constexpr unsigned long long kClocksEventHwSlowdown = 0x8;
inline constexpr unsigned long long kClocksEventSwThermalSlowdown = 0x20;
inline constexpr unsigned long long kClocksEventHwThermalSlowdown = 0x40;
inline constexpr unsigned long long kClocksEventHwPowerBrakeSlowdown = 0x80;

// Throttle-time counter fields, all in ns, device scope (gpu-causes.md §1.2). The power-cap field
// (NVML_FI_DEV_PERF_POLICY_POWER) is 74 in every header; the SW thermal, HW thermal and HW power
// brake fields are 269, 270, 271 in the NVML 12.9+ headers (drivers of branch 575 and later) and
// 251, 252, 253 in the older header copies public bindings carry.
inline constexpr unsigned int kFieldThrottlePowerCap = 74;
inline constexpr unsigned int kFieldThrottleSwThermalNew = 269;
inline constexpr unsigned int kFieldThrottleHwThermalNew = 270;
inline constexpr unsigned int kFieldThrottleHwPowerBrakeNew = 271;
inline constexpr unsigned int kFieldThrottleSwThermalOld = 251;
inline constexpr unsigned int kFieldThrottleHwThermalOld = 252;
inline constexpr unsigned int kFieldThrottleHwPowerBrakeOld = 253;
// The first driver branch whose NVML numbers them 269-271.
inline constexpr unsigned int kThrottleFieldsNewFromBranch = 575;

// Field ids (NVML_FI_DEV_*). Per-link ones take the link index in scope_id.
inline constexpr unsigned int kFieldNvLinkLinkCount = 91;  // device scope: links on the device
inline constexpr unsigned int kFieldNvLinkRecoverySuccessfulEvents = 213;
inline constexpr unsigned int kFieldNvLinkRecoveryFailedEvents = 214;
inline constexpr unsigned int kFieldNvLinkRecoveryEvents = 215;
inline constexpr unsigned int kFieldNvLinkEffectiveErrors = 219;
inline constexpr unsigned int kFieldNvLinkEffectiveBer = 220;  // packed BER
inline constexpr unsigned int kFieldNvLinkSymbolErrors = 221;
inline constexpr unsigned int kFieldNvLinkSymbolBer = 222;  // packed BER

// Packed BER (fields 220, 222): BER = mantissa × 10^-exponent.
inline constexpr unsigned int kBerExponentShift = 0;
inline constexpr unsigned int kBerExponentMask = 0xff;
inline constexpr unsigned int kBerMantissaShift = 8;
inline constexpr unsigned int kBerMantissaMask = 0xf;

// Buffer sizes that are guaranteed large enough.
inline constexpr unsigned int kUuidBufferSize = 96;           // nvmlDeviceGetUUID
inline constexpr unsigned int kNameBufferSize = 96;           // nvmlDeviceGetName
inline constexpr unsigned int kDriverVersionBufferSize = 80;  // nvmlSystemGetDriverVersion
inline constexpr unsigned int kNvmlVersionBufferSize = 80;    // nvmlSystemGetNVMLVersion

// Entry points, by the name dlsym must see (the versioned export where one exists).
using InitFn = Return (*)();
using ShutdownFn = Return (*)();
using ErrorStringFn = const char* (*)(Return);
using SystemGetDriverVersionFn = Return (*)(char* version, unsigned int length);
using DeviceGetCountFn = Return (*)(unsigned int* count);
using DeviceGetHandleByIndexFn = Return (*)(unsigned int index, Device* device);
using DeviceGetUuidFn = Return (*)(Device device, char* uuid, unsigned int length);
using DeviceGetNameFn = Return (*)(Device device, char* name, unsigned int length);
using DeviceGetPciInfoFn = Return (*)(Device device, PciInfo* pci);
using DeviceGetArchitectureFn = Return (*)(Device device, Architecture* arch);
using DeviceGetNvLinkStateFn = Return (*)(Device device, unsigned int link, EnableState* active);
using DeviceGetNvLinkErrorCounterFn = Return (*)(Device device, unsigned int link,
                                                 NvLinkErrorCounter counter,
                                                 unsigned long long* value);
using DeviceGetFieldValuesFn = Return (*)(Device device, int count, FieldValue* values);
// GPU signals (gpu-causes.md §1).
using SystemGetNvmlVersionFn = Return (*)(char* version, unsigned int length);
using DeviceGetClocksEventReasonsFn = Return (*)(Device device, unsigned long long* reasons);
using DeviceGetClockFn = Return (*)(Device device, int clock_type, unsigned int* mhz);
using DeviceGetTemperatureFn = Return (*)(Device device, int sensor, unsigned int* celsius);
using DeviceGetUintFn = Return (*)(Device device, unsigned int* value);  // power, PCIe, limit
using DeviceGetTotalEccErrorsFn = Return (*)(Device device, int error_type, int counter_type,
                                             unsigned long long* count);
using DeviceGetRemappedRowsFn = Return (*)(Device device, unsigned int* corrected_rows,
                                           unsigned int* uncorrected_rows, unsigned int* is_pending,
                                           unsigned int* failure_occurred);
using DeviceGetUtilizationRatesFn = Return (*)(Device device, Utilization* utilization);
using DeviceGetComputeRunningProcessesFn = Return (*)(Device device, unsigned int* count,
                                                      ProcessInfo* infos);
// XID events.
using EventSetCreateFn = Return (*)(EventSet* set);
using DeviceRegisterEventsFn = Return (*)(Device device, unsigned long long event_types,
                                          EventSet set);
using EventSetWaitFn = Return (*)(EventSet set, EventData* data, unsigned int timeout_ms);
using EventSetFreeFn = Return (*)(EventSet set);

inline constexpr const char kInitSymbol[] = "nvmlInit_v2";
inline constexpr const char kShutdownSymbol[] = "nvmlShutdown";
inline constexpr const char kErrorStringSymbol[] = "nvmlErrorString";
inline constexpr const char kSystemGetDriverVersionSymbol[] = "nvmlSystemGetDriverVersion";
inline constexpr const char kDeviceGetCountSymbol[] = "nvmlDeviceGetCount_v2";
inline constexpr const char kDeviceGetHandleByIndexSymbol[] = "nvmlDeviceGetHandleByIndex_v2";
inline constexpr const char kDeviceGetUuidSymbol[] = "nvmlDeviceGetUUID";
inline constexpr const char kDeviceGetNameSymbol[] = "nvmlDeviceGetName";
inline constexpr const char kDeviceGetPciInfoSymbol[] = "nvmlDeviceGetPciInfo_v3";
inline constexpr const char kDeviceGetArchitectureSymbol[] = "nvmlDeviceGetArchitecture";
inline constexpr const char kDeviceGetNvLinkStateSymbol[] = "nvmlDeviceGetNvLinkState";
inline constexpr const char kDeviceGetNvLinkErrorCounterSymbol[] =
    "nvmlDeviceGetNvLinkErrorCounter";
inline constexpr const char kDeviceGetFieldValuesSymbol[] = "nvmlDeviceGetFieldValues";
inline constexpr const char kSystemGetNvmlVersionSymbol[] = "nvmlSystemGetNVMLVersion";
inline constexpr const char kDeviceGetClocksEventReasonsSymbol[] =
    "nvmlDeviceGetCurrentClocksEventReasons";  // 12.2 header on
inline constexpr const char kDeviceGetClocksThrottleReasonsSymbol[] =
    "nvmlDeviceGetCurrentClocksThrottleReasons";  // the older name, same signature
inline constexpr const char kDeviceGetClockInfoSymbol[] = "nvmlDeviceGetClockInfo";
inline constexpr const char kDeviceGetMaxClockInfoSymbol[] = "nvmlDeviceGetMaxClockInfo";
inline constexpr const char kDeviceGetTemperatureSymbol[] = "nvmlDeviceGetTemperature";
inline constexpr const char kDeviceGetPowerUsageSymbol[] = "nvmlDeviceGetPowerUsage";
inline constexpr const char kDeviceGetEnforcedPowerLimitSymbol[] =
    "nvmlDeviceGetEnforcedPowerLimit";
inline constexpr const char kDeviceGetTotalEccErrorsSymbol[] = "nvmlDeviceGetTotalEccErrors";
inline constexpr const char kDeviceGetRemappedRowsSymbol[] = "nvmlDeviceGetRemappedRows";
inline constexpr const char kDeviceGetCurrPcieLinkGenerationSymbol[] =
    "nvmlDeviceGetCurrPcieLinkGeneration";
inline constexpr const char kDeviceGetMaxPcieLinkGenerationSymbol[] =
    "nvmlDeviceGetMaxPcieLinkGeneration";
inline constexpr const char kDeviceGetCurrPcieLinkWidthSymbol[] = "nvmlDeviceGetCurrPcieLinkWidth";
inline constexpr const char kDeviceGetMaxPcieLinkWidthSymbol[] = "nvmlDeviceGetMaxPcieLinkWidth";
inline constexpr const char kDeviceGetPcieReplayCounterSymbol[] = "nvmlDeviceGetPcieReplayCounter";
inline constexpr const char kDeviceGetUtilizationRatesSymbol[] = "nvmlDeviceGetUtilizationRates";
inline constexpr const char kDeviceGetComputeRunningProcessesSymbol[] =
    "nvmlDeviceGetComputeRunningProcesses_v3";
inline constexpr const char kEventSetCreateSymbol[] = "nvmlEventSetCreate";
inline constexpr const char kDeviceRegisterEventsSymbol[] = "nvmlDeviceRegisterEvents";
inline constexpr const char kEventSetWaitSymbol[] = "nvmlEventSetWait_v2";
inline constexpr const char kEventSetFreeSymbol[] = "nvmlEventSetFree";

}  // namespace ringside::collectors::nvml

#endif  // RINGSIDE_COLLECTORS_NVML_NVML_TYPES_H_
