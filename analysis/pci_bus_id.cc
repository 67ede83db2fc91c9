#include "analysis/pci_bus_id.h"

#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ringside::analysis {
namespace {

// Hex digits only, 1..max_digits of them.
bool ParseHex(absl::string_view s, size_t max_digits, uint64_t* out) {
  if (s.empty() || s.size() > max_digits) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (!absl::ascii_isxdigit(c)) return false;
    const char l = absl::ascii_tolower(c);
    v = v * 16 + static_cast<uint64_t>(l <= '9' ? l - '0' : l - 'a' + 10);
  }
  *out = v;
  return true;
}

}  // namespace

std::string NormalizePciBusId(absl::string_view bus_id) {
  bus_id = absl::StripAsciiWhitespace(bus_id);
  // NVML pads busId with NULs in a fixed buffer; a caller may pass the whole buffer.
  if (size_t nul = bus_id.find('\0'); nul != absl::string_view::npos) bus_id = bus_id.substr(0, nul);
  std::vector<absl::string_view> parts = absl::StrSplit(bus_id, ':');
  if (parts.size() == 2) parts.insert(parts.begin(), "0");
  if (parts.size() != 3) return "";
  const size_t dot = parts[2].find('.');
  if (dot == absl::string_view::npos) return "";
  uint64_t domain = 0, bus = 0, device = 0, function = 0;
  if (!ParseHex(parts[0], 8, &domain) || !ParseHex(parts[1], 2, &bus) ||
      !ParseHex(parts[2].substr(0, dot), 2, &device) ||
      !ParseHex(parts[2].substr(dot + 1), 1, &function) || device > 0x1f || function > 7) {
    return "";
  }
  return absl::StrFormat("%04x:%02x:%02x.%x", domain, bus, device, function);
}

}  // namespace ringside::analysis
