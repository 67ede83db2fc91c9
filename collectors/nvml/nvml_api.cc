#include "collectors/nvml/nvml_api.h"

#include <dlfcn.h>

#include <cmath>

#include "absl/strings/str_cat.h"

namespace ringside::collectors::nvml {
namespace {

// dlsym into a typed function pointer. Null when the library lacks the symbol.
template <typename Fn>
Fn Resolve(void* handle, const char* symbol) {
  return reinterpret_cast<Fn>(dlsym(handle, symbol));
}

}  // namespace

std::string ReturnName(Return r) {
  switch (r) {
    case kSuccess:
      return "NVML_SUCCESS";
    case kErrorUninitialized:
      return "NVML_ERROR_UNINITIALIZED";
    case kErrorInvalidArgument:
      return "NVML_ERROR_INVALID_ARGUMENT";
    case kErrorNotSupported:
      return "NVML_ERROR_NOT_SUPPORTED";
    case kErrorNoPermission:
      return "NVML_ERROR_NO_PERMISSION";
    case kErrorNotFound:
      return "NVML_ERROR_NOT_FOUND";
    case kErrorInsufficientSize:
      return "NVML_ERROR_INSUFFICIENT_SIZE";
    case kErrorDriverNotLoaded:
      return "NVML_ERROR_DRIVER_NOT_LOADED";
    case kErrorTimeout:
      return "NVML_ERROR_TIMEOUT";
    case kErrorLibraryNotFound:
      return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case kErrorFunctionNotFound:
      return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case kErrorGpuIsLost:
      return "NVML_ERROR_GPU_IS_LOST";
    case kErrorResetRequired:
      return "NVML_ERROR_RESET_REQUIRED";
    case kErrorLibRmVersionMismatch:
      return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case kErrorDeprecated:
      return "NVML_ERROR_DEPRECATED";
    case kErrorNotReady:
      return "NVML_ERROR_NOT_READY";
    case kErrorUnknown:
      return "NVML_ERROR_UNKNOWN";
  }
  return absl::StrCat("NVML_ERROR_", r);
}

absl::StatusCode StatusCodeFor(Return r) {
  switch (r) {
    case kSuccess:
      return absl::StatusCode::kOk;
    case kErrorInvalidArgument:
      return absl::StatusCode::kInvalidArgument;
    case kErrorNotSupported:
    case kErrorFunctionNotFound:
    case kErrorDeprecated:
      return absl::StatusCode::kUnimplemented;
    case kErrorNoPermission:
      return absl::StatusCode::kPermissionDenied;
    case kErrorNotFound:
    case kErrorLibraryNotFound:
      return absl::StatusCode::kNotFound;
    case kErrorInsufficientSize:
      return absl::StatusCode::kResourceExhausted;
    case kErrorTimeout:
      return absl::StatusCode::kDeadlineExceeded;
    case kErrorGpuIsLost:
    case kErrorNotReady:
      return absl::StatusCode::kUnavailable;
    case kErrorUninitialized:
    case kErrorDriverNotLoaded:
    case kErrorResetRequired:
    case kErrorLibRmVersionMismatch:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kUnknown;
  }
}

absl::StatusOr<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& library) {
  dlerror();
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError(
        absl::StrCat("NVML library ", library,
                     " cannot be loaded (no NVIDIA driver?): ", why ? why : "dlopen failed"));
  }
  Functions fn;
  struct Required {
    void** slot;
    const char* symbol;
  };
  // Function pointers and void* share a representation on every platform dlsym works on.
  const Required required[] = {
      {reinterpret_cast<void**>(&fn.init), kInitSymbol},
      {reinterpret_cast<void**>(&fn.shutdown), kShutdownSymbol},
      {reinterpret_cast<void**>(&fn.error_string), kErrorStringSymbol},
      {reinterpret_cast<void**>(&fn.device_get_count), kDeviceGetCountSymbol},
      {reinterpret_cast<void**>(&fn.device_get_handle_by_index), kDeviceGetHandleByIndexSymbol},
      {reinterpret_cast<void**>(&fn.device_get_uuid), kDeviceGetUuidSymbol},
      {reinterpret_cast<void**>(&fn.device_get_nvlink_state), kDeviceGetNvLinkStateSymbol},
      {reinterpret_cast<void**>(&fn.device_get_nvlink_error_counter),
       kDeviceGetNvLinkErrorCounterSymbol},
  };
  for (const Required& r : required) {
    *r.slot = dlsym(handle, r.symbol);
    if (*r.slot == nullptr) {
      dlclose(handle);
      return absl::UnimplementedError(absl::StrCat("NVML library ", library,
                                                   " lacks the required symbol ", r.symbol,
                                                   " (driver older than the API the agent uses)"));
    }
  }
  fn.system_get_driver_version =
      Resolve<SystemGetDriverVersionFn>(handle, kSystemGetDriverVersionSymbol);
  fn.device_get_name = Resolve<DeviceGetNameFn>(handle, kDeviceGetNameSymbol);
  fn.device_get_pci_info = Resolve<DeviceGetPciInfoFn>(handle, kDeviceGetPciInfoSymbol);
  fn.device_get_architecture =
      Resolve<DeviceGetArchitectureFn>(handle, kDeviceGetArchitectureSymbol);
  fn.device_get_field_values = Resolve<DeviceGetFieldValuesFn>(handle, kDeviceGetFieldValuesSymbol);
  fn.system_get_nvml_version = Resolve<SystemGetNvmlVersionFn>(handle, kSystemGetNvmlVersionSymbol);
  fn.device_get_clocks_event_reasons =
      Resolve<DeviceGetClocksEventReasonsFn>(handle, kDeviceGetClocksEventReasonsSymbol);
  fn.clocks_event_reasons_symbol = kDeviceGetClocksEventReasonsSymbol;
  if (fn.device_get_clocks_event_reasons == nullptr) {  // a driver before the 12.2 generation
    fn.device_get_clocks_event_reasons =
        Resolve<DeviceGetClocksEventReasonsFn>(handle, kDeviceGetClocksThrottleReasonsSymbol);
    fn.clocks_event_reasons_symbol = fn.device_get_clocks_event_reasons != nullptr
                                         ? kDeviceGetClocksThrottleReasonsSymbol
                                         : nullptr;
  }
  fn.device_get_clock_info = Resolve<DeviceGetClockFn>(handle, kDeviceGetClockInfoSymbol);
  fn.device_get_max_clock_info = Resolve<DeviceGetClockFn>(handle, kDeviceGetMaxClockInfoSymbol);
  fn.device_get_temperature = Resolve<DeviceGetTemperatureFn>(handle, kDeviceGetTemperatureSymbol);
  fn.device_get_power_usage = Resolve<DeviceGetUintFn>(handle, kDeviceGetPowerUsageSymbol);
  fn.device_get_enforced_power_limit =
      Resolve<DeviceGetUintFn>(handle, kDeviceGetEnforcedPowerLimitSymbol);
  fn.device_get_total_ecc_errors =
      Resolve<DeviceGetTotalEccErrorsFn>(handle, kDeviceGetTotalEccErrorsSymbol);
  fn.device_get_remapped_rows =
      Resolve<DeviceGetRemappedRowsFn>(handle, kDeviceGetRemappedRowsSymbol);
  fn.device_get_curr_pcie_link_generation =
      Resolve<DeviceGetUintFn>(handle, kDeviceGetCurrPcieLinkGenerationSymbol);
  fn.device_get_max_pcie_link_generation =
      Resolve<DeviceGetUintFn>(handle, kDeviceGetMaxPcieLinkGenerationSymbol);
  fn.device_get_curr_pcie_link_width =
      Resolve<DeviceGetUintFn>(handle, kDeviceGetCurrPcieLinkWidthSymbol);
  fn.device_get_max_pcie_link_width =
      Resolve<DeviceGetUintFn>(handle, kDeviceGetMaxPcieLinkWidthSymbol);
  fn.device_get_pcie_replay_counter =
      Resolve<DeviceGetUintFn>(handle, kDeviceGetPcieReplayCounterSymbol);
  fn.device_get_utilization_rates =
      Resolve<DeviceGetUtilizationRatesFn>(handle, kDeviceGetUtilizationRatesSymbol);
  fn.device_get_compute_running_processes =
      Resolve<DeviceGetComputeRunningProcessesFn>(handle, kDeviceGetComputeRunningProcessesSymbol);
  fn.event_set_create = Resolve<EventSetCreateFn>(handle, kEventSetCreateSymbol);
  fn.device_register_events = Resolve<DeviceRegisterEventsFn>(handle, kDeviceRegisterEventsSymbol);
  fn.event_set_wait = Resolve<EventSetWaitFn>(handle, kEventSetWaitSymbol);
  fn.event_set_free = Resolve<EventSetFreeFn>(handle, kEventSetFreeSymbol);
  if (fn.event_set_create == nullptr || fn.device_register_events == nullptr ||
      fn.event_set_wait == nullptr || fn.event_set_free == nullptr) {
    fn.event_set_create = nullptr;
    fn.device_register_events = nullptr;
    fn.event_set_wait = nullptr;
    fn.event_set_free = nullptr;
  }

  const Return init = fn.init();
  if (init != kSuccess) {
    const char* text = fn.error_string(init);
    absl::Status status(StatusCodeFor(init),
                        absl::StrCat("NVML library ", library, ": ", kInitSymbol,
                                     " failed: ", ReturnName(init), " (", text ? text : "", ")"));
    dlclose(handle);
    return status;
  }
  return std::unique_ptr<NvmlLibrary>(new NvmlLibrary(handle, library, fn));
}

NvmlLibrary::~NvmlLibrary() {
  fn_.shutdown();
  dlclose(handle_);
}

std::string NvmlLibrary::Describe(Return r) const {
  const char* text = fn_.error_string(r);
  return absl::StrCat(ReturnName(r), " (", text ? text : "", ")");
}

absl::Status NvmlLibrary::ToStatus(Return r, absl::string_view context) const {
  if (r == kSuccess) return absl::OkStatus();
  return absl::Status(StatusCodeFor(r), absl::StrCat(context, ": ", Describe(r)));
}

absl::StatusOr<uint64_t> FieldValueToUint64(const FieldValue& v) {
  auto negative = [&](long long x) -> absl::StatusOr<uint64_t> {
    if (x < 0) {
      return absl::OutOfRangeError(absl::StrCat("field ", v.field_id, ": negative value ", x));
    }
    return static_cast<uint64_t>(x);
  };
  switch (v.value_type) {
    case kValueUnsignedInt:
      return uint64_t{v.value.ui};
    case kValueUnsignedLong:
      return uint64_t{v.value.ul};
    case kValueUnsignedLongLong:
      return uint64_t{v.value.ull};
    case kValueUnsignedShort:
      return uint64_t{v.value.us};
    case kValueSignedLongLong:
      return negative(v.value.sll);
    case kValueSignedInt:
      return negative(v.value.si);
    case kValueDouble:
      if (!std::isfinite(v.value.d) || v.value.d < 0 || v.value.d >= 18446744073709551616.0) {
        return absl::OutOfRangeError(
            absl::StrCat("field ", v.field_id, ": value ", v.value.d, " is not a counter"));
      }
      return static_cast<uint64_t>(v.value.d);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("field ", v.field_id, ": unknown value type ", v.value_type));
}

}  // namespace ringside::collectors::nvml
