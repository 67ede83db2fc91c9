// Names the simulator gives its nodes and rails, shared by the cluster, the scenarios and scoring:
// node-01 … node-NN; rail k of a node is the RoCE function mlx5_<k> with netdev ens<k+1>f0np0
// (one rail per GPU, rail-optimised).
#ifndef RINGSIDE_SIM_SIM_NAMES_H_
#define RINGSIDE_SIM_SIM_NAMES_H_

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace ringside::sim {

inline std::string SimNodeName(int index, int nodes) {
  const int width = nodes >= 1000 ? 4 : nodes >= 100 ? 3 : 2;
  return absl::StrFormat("node-%0*d", width, index + 1);
}
inline std::string RailDevice(int rail) { return absl::StrCat("mlx5_", rail); }
inline std::string RailNetdev(int rail) { return absl::StrCat("ens", rail + 1, "f0np0"); }
inline bool ParseRail(absl::string_view device, int* rail) {
  if (!absl::ConsumePrefix(&device, "mlx5_")) return false;
  return absl::SimpleAtoi(device, rail) && *rail >= 0;
}

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_SIM_NAMES_H_
