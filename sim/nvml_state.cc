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

bool NvmlState::Ticking::Set(bool now_on, absl::Time now) {
  if (now_on == on) return false;
  if (on) base_ns += absl::ToDoubleSeconds(now - since) * 1e9;
  on = now_on;
  since = now;
  return true;
}

void NvmlState::SetThermalSlowdown(int gpu, bool on, absl::Time now) {
  if (gpu_[gpu].thermal.Set(on, now)) dirty_ = true;
}

void NvmlState::SetPowerCap(int gpu, bool on, absl::Time now) {
  if (gpu_[gpu].power.Set(on, now)) dirty_ = true;
}

void NvmlState::AddXid(int gpu, uint64_t xid) {
  gpu_[gpu].xids.push_back(xid);
  dirty_ = true;
}

namespace {

// "gpu_field <id> <base>" or, ticking, "gpu_field <id> <base> 1000000000 <since>".
std::string TickingField(int id, double base_ns, bool on, absl::Time since) {
  if (!on) return absl::StrFormat("gpu_field %d %.0f\n", id, base_ns);
  return absl::StrFormat("gpu_field %d %.0f 1000000000 %.6f\n", id, base_ns,
                         absl::ToDoubleSeconds(since - absl::UnixEpoch()));
}

}  // namespace

absl::Status NvmlState::Write() {
  if (!dirty_) return absl::OkStatus();
  std::string text = "driver_version 580.159.04\nnvml_version 13.580.159.04\n";
  for (int g = 0; g < gpus_; ++g) {
    absl::StrAppend(&text, "gpu\nname NVIDIA H100 80GB HBM3\n",
                    absl::StrFormat("uuid GPU-%08x-5151-4a4a-8b8b-%012x\n", node_, g),
                    absl::StrFormat("pci_bus_id 00000000:%02X:00.0\n", 0x18 + 0x10 * g),
                    "arch 9\nlinks ", links_, "\n");
    const Gpu& st = gpu_[g];
    const bool hot = st.thermal.on, capped = st.power.on;
    absl::StrAppend(&text, "clocks_event_reasons ",
                    hot      ? "0x48"
                    : capped ? "0x4"
                             : "0x0",
                    "\n", "signal sm_clock ",
                    hot      ? 990
                    : capped ? 1620
                             : 1980,
                    "\nsignal sm_clock_max 1980\n", "signal temperature ", hot ? 92 : 45,
                    "\nsignal power ", capped ? 695000 : 450000,
                    "\nsignal power_limit 700000\nsignal utilization 95\n",
                    "signal pcie_gen 5\nsignal pcie_gen_max 5\nsignal pcie_width 16\n",
                    "signal pcie_width_max 16\nsignal pcie_replay 0\nsignal ecc_uncorrected 0\n",
                    "signal remap_pending 0\nsignal remap_failure 0\n");
    absl::StrAppend(&text, TickingField(74, st.power.base_ns, capped, st.power.since),
                    "gpu_field 269 0\n",
                    TickingField(270, st.thermal.base_ns, hot, st.thermal.since),
                    "gpu_field 271 0\nxid_events yes\nprocesses\n");
    if (!st.xids.empty()) {
      absl::StrAppend(&text, "xid");
      for (uint64_t x : st.xids) absl::StrAppend(&text, " ", x);
      absl::StrAppend(&text, "\n");
    }
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
