// Loads libnvidia-ml.so.1 at run time (dlopen, never linked), resolves the entry points the agent
// uses, and keeps NVML initialised for its own lifetime: nvmlInit_v2 once on open, nvmlShutdown
// once on destruction.
#ifndef RINGSIDE_COLLECTORS_NVML_NVML_API_H_
#define RINGSIDE_COLLECTORS_NVML_NVML_API_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectors/nvml/nvml_types.h"

namespace ringside::collectors::nvml {

inline constexpr char kDefaultLibrary[] = "libnvidia-ml.so.1";

// The resolved entry points. The required ones are never null in an opened NvmlLibrary; an
// optional one is null when the installed driver predates it, and its feature is off.
struct Functions {
  // Required.
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  ErrorStringFn error_string = nullptr;
  DeviceGetCountFn device_get_count = nullptr;
  DeviceGetHandleByIndexFn device_get_handle_by_index = nullptr;
  DeviceGetUuidFn device_get_uuid = nullptr;
  DeviceGetNvLinkStateFn device_get_nvlink_state = nullptr;
  DeviceGetNvLinkErrorCounterFn device_get_nvlink_error_counter = nullptr;
  // Optional.
  SystemGetDriverVersionFn system_get_driver_version = nullptr;  // info label
  DeviceGetNameFn device_get_name = nullptr;                     // info label
  DeviceGetPciInfoFn device_get_pci_info = nullptr;              // info label
  DeviceGetArchitectureFn device_get_architecture = nullptr;     // counter-API choice, info
  DeviceGetFieldValuesFn device_get_field_values = nullptr;      // link count, NVLink5 counters
  // GPU signals (collectors/nvml/gpu_signals.h): each one absent on a driver without it, and
  // then its series is absent too.
  SystemGetNvmlVersionFn system_get_nvml_version = nullptr;
  // nvmlDeviceGetCurrentClocksEventReasons, else the older ...ThrottleReasons (same signature);
  // clocks_event_reasons_symbol says which.
  DeviceGetClocksEventReasonsFn device_get_clocks_event_reasons = nullptr;
  const char* clocks_event_reasons_symbol = nullptr;
  DeviceGetClockFn device_get_clock_info = nullptr;
  DeviceGetClockFn device_get_max_clock_info = nullptr;
  DeviceGetTemperatureFn device_get_temperature = nullptr;
  DeviceGetUintFn device_get_power_usage = nullptr;
  DeviceGetUintFn device_get_enforced_power_limit = nullptr;
  DeviceGetTotalEccErrorsFn device_get_total_ecc_errors = nullptr;
  DeviceGetRemappedRowsFn device_get_remapped_rows = nullptr;
  DeviceGetUintFn device_get_curr_pcie_link_generation = nullptr;
  DeviceGetUintFn device_get_max_pcie_link_generation = nullptr;
  DeviceGetUintFn device_get_curr_pcie_link_width = nullptr;
  DeviceGetUintFn device_get_max_pcie_link_width = nullptr;
  DeviceGetUintFn device_get_pcie_replay_counter = nullptr;
  DeviceGetUtilizationRatesFn device_get_utilization_rates = nullptr;
  DeviceGetComputeRunningProcessesFn device_get_compute_running_processes = nullptr;
  // XID events (collectors/nvml/xid_events.h): all four or none.
  EventSetCreateFn event_set_create = nullptr;
  DeviceRegisterEventsFn device_register_events = nullptr;
  EventSetWaitFn event_set_wait = nullptr;
  EventSetFreeFn event_set_free = nullptr;
};

class NvmlLibrary {
 public:
  // Opens `library` (a file name searched like the dynamic linker does, or a path), resolves the
  // entry points and calls nvmlInit_v2. Errors:
  //   NotFound: the library cannot be opened (no NVIDIA driver on this host);
  //   Unimplemented: a required entry point is missing (the message names it);
  //   the code mapped from nvmlInit_v2's return when initialisation fails.
  static absl::StatusOr<std::unique_ptr<NvmlLibrary>> Open(const std::string& library);

  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const Functions& fn() const { return fn_; }
  const std::string& library() const { return library_; }

  // "NVML_ERROR_NOT_SUPPORTED (<the library's own nvmlErrorString text>)".
  std::string Describe(Return r) const;
  // A status for a failed call, or OkStatus() for kSuccess.
  absl::Status ToStatus(Return r, absl::string_view context) const;

 private:
  NvmlLibrary(void* handle, std::string library, Functions fn)
      : handle_(handle), library_(std::move(library)), fn_(fn) {}

  void* handle_;
  std::string library_;
  Functions fn_;
};

// The symbolic name of a return code ("NVML_ERROR_GPU_IS_LOST"), or "NVML_ERROR_<n>".
std::string ReturnName(Return r);
// The canonical status code for a failed NVML call.
absl::StatusCode StatusCodeFor(Return r);

// A field value as an unsigned 64-bit number, whatever member of the union it arrived in.
// OutOfRange for a negative or non-finite value; InvalidArgument for an unknown value type.
absl::StatusOr<uint64_t> FieldValueToUint64(const FieldValue& v);

}  // namespace ringside::collectors::nvml

#endif  // RINGSIDE_COLLECTORS_NVML_NVML_API_H_
