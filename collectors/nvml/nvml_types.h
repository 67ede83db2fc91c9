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

}  // namespace ringside::collectors::nvml

#endif  // RINGSIDE_COLLECTORS_NVML_NVML_TYPES_H_
