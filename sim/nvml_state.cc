#include "sim/nvml_state.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringside::sim {

NvmlState::NvmlState(std::string path, int node, int gpus, int links)
    : path_(std::move(path)), node_(node), gpus_(gpus), links_(links) {}

void NvmlState::AddErrors(int gpu, int link, uint64_t replay, uint64_t crc_flit) {
  if (replay == 0 && crc_flit == 0) return;
  auto& e = errors_[{gpu, link}];
  e.first += replay;
  e.second += crc_flit;
  dirty_ = true;
}

absl::Status NvmlState::Write() {
  if (!dirty_) return absl::OkStatus();
  std::string text = "driver_version 550.54.15\n";
  for (int g = 0; g < gpus_; ++g) {
    absl::StrAppend(&text, "gpu\nname NVIDIA H100 80GB HBM3\n",
                    absl::StrFormat("uuid GPU-%08x-5151-4a4a-8b8b-%012x\n", node_, g),
                    absl::StrFormat("pci_bus_id 00000000:%02X:00.0\n", 0x18 + 0x10 * g),
                    "arch 9\nlinks ", links_, "\n");
    for (const auto& [key, e] : errors_) {
      if (key.first != g) continue;
      absl::StrAppend(&text, "counter replay ", key.second, " ", e.first, "\n");
      absl::StrAppend(&text, "counter crc_flit ", key.second, " ", e.second, "\n");
    }
  }
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) return absl::InternalError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    return absl::InternalError("cannot rename " + tmp);
  }
  dirty_ = false;
  return absl::OkStatus();
}

}  // namespace ringside::sim
