#include "analysis/pci_bus_id.h"

#include "collectors/common/pci_bus_id.h"

namespace ringside::analysis {

// One parser for every component: the plugin's header-only one (plain C++, no allocation).
std::string NormalizePciBusId(absl::string_view bus_id) {
  char out[collectors::kPciBusIdSize];
  if (!collectors::NormalizePciBusId(bus_id.data(), bus_id.size(), out, sizeof(out))) return "";
  return out;
}

}  // namespace ringside::analysis
