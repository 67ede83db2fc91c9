// Inputs of the agent bench's NVLink and ethtool phase (issue #3): the fake NVML's configuration
// for a DGX-class node's GPUs, and `ethtool -S` dumps of PFC-enabled mlx5 ports for the tree's
// RoCE netdevs.
#ifndef RINGSIDE_BENCH_GPU_NIC_INPUTS_H_
#define RINGSIDE_BENCH_GPU_NIC_INPUTS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringside::bench {

// Writes the config file the fake libnvidia-ml.so.1 reads ($RINGSIDE_FAKE_NVML_CONFIG; grammar in
// tests/fake_nvml/fake_nvml.cc): `gpus` Hopper GPUs (H100, the PCI functions of a DGX H100) with
// `links` NVLinks each, every link up, the four pre-Blackwell DL counters non-zero.
absl::Status WriteFakeNvmlConfig(const std::string& path, int gpus, int links);

// The netdevs of the tree's RoCE functions: class/infiniband/<dev>/device/net/<if> of every RDMA
// device with an Ethernet port, sorted. Empty when there are none.
std::vector<std::string> RoceNetdevs(const std::string& sysfs_root);

// The driver statistics of one mlx5 port.
struct EthtoolDump {
  std::vector<std::string> names;
  std::vector<uint64_t> values;  // parallel to names
  size_t from_capture = 0;       // of which read from the real capture
};

// The stats of a real mlx5 `ethtool -S` capture (`capture`, any layout the collector's parser
// takes) plus what a PFC-enabled port adds (ib-roce-counters.md §5.2): rx/tx_prio<p>_pause,
// rx/tx_prio<p>_pause_duration and rx_prio<p>_pause_transition for p = 0..7, after the per-priority
// traffic counters, and tx_pause_storm_warning_events / tx_pause_storm_error_events. Names the
// capture already has are not added twice. DataLoss when the capture has lines the parser does not
// understand or no stats.
absl::StatusOr<EthtoolDump> Mlx5PfcDump(const std::string& capture);

// Writes `dump` as `ethtool -S` prints it into `dir` (created), one file per interface.
absl::Status WriteEthtoolDumps(const std::string& dir, const std::vector<std::string>& interfaces,
                               const EthtoolDump& dump);

}  // namespace ringside::bench

#endif  // RINGSIDE_BENCH_GPU_NIC_INPUTS_H_
