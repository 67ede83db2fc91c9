// One spelling of a PCI address for every source: the Linux sysfs form "0000:19:00.0" (domain in
// at least four lowercase hex digits, bus and device in two, function in one), as the kernel
// names /sys/bus/pci/devices/<address>.
//
// NVML spells a GPU's address "00000000:19:00.0" (nvmlPciInfo_t.busId: an eight-digit domain,
// uppercase hex on current drivers); CUDA's cudaDeviceGetPCIBusId / cuDeviceGetPCIBusId
// "0000:19:00.0" (four digits, either case). Both normalise to "0000:19:00.0", which is how a
// rank (the NCCL plugin asks CUDA) meets its GPU (the agent asks NVML): the InfoRecord of source
// "gpu" carries it as label `pci_bus_id_sysfs`, CollectiveRecord.gpu_pci_bus_id carries it too.
//
// Header-only plain C++: no Abseil, no allocation, no exceptions (the NCCL plugin compiles it).
#ifndef RINGSIDE_COLLECTORS_COMMON_PCI_BUS_ID_H_
#define RINGSIDE_COLLECTORS_COMMON_PCI_BUS_ID_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace ringside::collectors {

// Longest normalised form: an eight-digit domain, "ffffffff:ff:1f.7" (16 characters), plus NUL.
inline constexpr size_t kPciBusIdSize = 17;

struct PciAddress {
  uint32_t domain = 0;
  uint8_t bus = 0;
  uint8_t device = 0;    // 0-0x1f
  uint8_t function = 0;  // 0-7
  bool operator==(const PciAddress&) const = default;
};

// Parses "[domain:]bus:device.function" in hex, either case, surrounding spaces ignored, stopping
// at a NUL or `len`: domain 1-8 digits (0 when absent), bus 1-2, device 1-2 (at most 0x1f),
// function 1 (at most 7). False for anything else.
inline bool ParsePciAddress(const char* in, size_t len, PciAddress* out) noexcept {
  if (in == nullptr || out == nullptr) return false;
  size_t i = 0;
  size_t end = 0;
  while (end < len && in[end] != '\0') ++end;
  while (i < end && in[i] == ' ') ++i;
  while (end > i && in[end - 1] == ' ') --end;
  uint64_t part[4] = {0, 0, 0, 0};
  int digits[4] = {0, 0, 0, 0};
  char sep[3] = {0, 0, 0};
  int n = 0;
  for (; i < end; ++i) {
    const char c = in[i];
    int v = -1;
    if (c >= '0' && c <= '9') v = c - '0';
    if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    if (v >= 0) {
      if (++digits[n] > 8) return false;
      part[n] = part[n] * 16 + static_cast<uint64_t>(v);
      continue;
    }
    if ((c != ':' && c != '.') || n == 3 || digits[n] == 0) return false;
    sep[n++] = c;
  }
  if (digits[n] == 0) return false;
  int first = 0;  // index of the bus group
  if (n == 3 && sep[0] == ':' && sep[1] == ':' && sep[2] == '.') {
    first = 1;
  } else if (!(n == 2 && sep[0] == ':' && sep[1] == '.')) {
    return false;
  }
  if (digits[first] > 2 || digits[first + 1] > 2 || digits[first + 2] > 1 ||
      part[first + 1] > 0x1f || part[first + 2] > 7) {
    return false;
  }
  out->domain = first == 1 ? static_cast<uint32_t>(part[0]) : 0;
  out->bus = static_cast<uint8_t>(part[first]);
  out->device = static_cast<uint8_t>(part[first + 1]);
  out->function = static_cast<uint8_t>(part[first + 2]);
  return true;
}

// The sysfs form of an address into out[out_size] (kPciBusIdSize is always enough). False (and
// "") when it does not fit.
inline bool FormatPciAddress(const PciAddress& a, char* out, size_t out_size) noexcept {
  if (out == nullptr || out_size == 0) return false;
  const int len =
      std::snprintf(out, out_size, "%04x:%02x:%02x.%x", a.domain, a.bus, a.device, a.function);
  if (len < 0 || static_cast<size_t>(len) >= out_size) {
    out[0] = '\0';
    return false;
  }
  return true;
}

// NVML's or CUDA's spelling → the sysfs form (Parse, then Format). False (and "") when `in` is
// not a PCI address.
inline bool NormalizePciBusId(const char* in, size_t in_len, char* out, size_t out_size) noexcept {
  if (out != nullptr && out_size > 0) out[0] = '\0';
  PciAddress a;
  return ParsePciAddress(in, in_len, &a) && FormatPciAddress(a, out, out_size);
}

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_COMMON_PCI_BUS_ID_H_
