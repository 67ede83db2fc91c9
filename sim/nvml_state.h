// A simulated node's GPUs as the fake NVML library (tests/fake_nvml, built for the simulator as
// sim/nvml/libnvidia-ml.so.1) sees them: the config file named by $RINGSIDE_FAKE_NVML_CONFIG,
// rewritten atomically when an NVLink's error counters move.
#ifndef RINGSIDE_SIM_NVML_STATE_H_
#define RINGSIDE_SIM_NVML_STATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ringside::sim {

class NvmlState {
 public:
  NvmlState(std::string path, int node, int gpus, int links);
  // Adds errors to one NVLink (replay and CRC flit counters).
  void AddErrors(int gpu, int link, uint64_t replay, uint64_t crc_flit);
  // GPU signals (collectors/nvml/gpu_signals.h; docs/simulator.md): a GPU starts healthy and busy
  // (clock event reasons 0, SM clock 1980 of 1980 MHz, 45 °C, 450 of 700 W, 95 % utilisation,
  // PCIe gen 5 x16, every throttle-time counter still, XID events supported).
  // Hardware thermal slowdown from `now` (reasons 0x48: HW slowdown + HW thermal, SM clock at
  // half, 92 °C, the HW thermal counter, field 270, ticking 1 s per s) or back to normal.
  void SetThermalSlowdown(int gpu, bool on, absl::Time now);
  // The software power cap from `now` (reason 0x4, SM clock 1620 MHz, 695 W, field 74 ticking):
  // what every GPU under full load shows, so it must blame no one by itself.
  void SetPowerCap(int gpu, bool on, absl::Time now);
  // An XID on the GPU, delivered once through the fake's event set.
  void AddXid(int gpu, uint64_t xid);
  // Writes the file when something changed since the last write (always the first time).
  absl::Status Write();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int node_, gpus_, links_;
  std::map<std::pair<int, int>, std::pair<uint64_t, uint64_t>> errors_;
  // A throttle-time counter: ns accumulated before `since`, ticking 1 s/s from `since` when on.
  struct Ticking {
    bool on = false;
    double base_ns = 0;
    absl::Time since;
    bool Set(bool now_on, absl::Time now);  // true when it changed
  };
  struct Gpu {
    Ticking thermal, power;
    std::vector<uint64_t> xids;
  };
  std::map<int, Gpu> gpu_;
  bool dirty_ = true;
};

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_NVML_STATE_H_
