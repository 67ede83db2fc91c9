// A simulated node's GPUs as the fake NVML library (tests/fake_nvml, built for the simulator as
// sim/nvml/libnvidia-ml.so.1) sees them: the config file named by $RINGSIDE_FAKE_NVML_CONFIG,
// rewritten atomically when an NVLink's error counters move.
#ifndef RINGSIDE_SIM_NVML_STATE_H_
#define RINGSIDE_SIM_NVML_STATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace ringside::sim {

class NvmlState {
 public:
  NvmlState(std::string path, int node, int gpus, int links);
  // Adds errors to one NVLink (replay and CRC flit counters).
  void AddErrors(int gpu, int link, uint64_t replay, uint64_t crc_flit);
  // Writes the file when something changed since the last write (always the first time).
  absl::Status Write();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int node_, gpus_, links_;
  std::map<std::pair<int, int>, std::pair<uint64_t, uint64_t>> errors_;
  bool dirty_ = true;
};

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_NVML_STATE_H_
