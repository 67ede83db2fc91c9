// One spelling of a PCI address for every component that names a GPU by its bus id.
//
// CUDA (`cudaDeviceGetPCIBusId`) writes "0000:19:00.0", NVML (`nvmlPciInfo_t.busId`) writes
// "00000000:19:00.0" (an 8-hex-digit domain, upper case), and Linux sysfs names the device
// /sys/bus/pci/devices/0000:19:00.0. NormalizePciBusId turns any of them into the sysfs form:
// lower case, the domain as at least 4 hex digits, bus and device 2, the function 1
// ("domain:bus:device.function"). A bus id without a domain ("19:00.0") gets domain 0.
// Anything else (empty, malformed) gives "".
#ifndef RINGSIDE_ANALYSIS_PCI_BUS_ID_H_
#define RINGSIDE_ANALYSIS_PCI_BUS_ID_H_

#include <string>

#include "absl/strings/string_view.h"

namespace ringside::analysis {

std::string NormalizePciBusId(absl::string_view bus_id);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_PCI_BUS_ID_H_
