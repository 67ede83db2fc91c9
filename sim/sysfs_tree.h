// Writes sysfs trees in the real kernel's format: class/infiniband/<dev> and class/net/<if> as
// symbolic links into devices/pci..., mlx5 ports with the 21 extended PMA counters and the
// driver's hw_counters, RoCE netdevs tied to their RDMA port through gid_attrs/ndevs. Used by the
// tests, the benchmarks and the simulator; values are updated in place (the agent keeps its
// descriptors open, as it does on a real /sys).
#ifndef RINGSIDE_SIM_SYSFS_TREE_H_
#define RINGSIDE_SIM_SYSFS_TREE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringside::sim {

struct HcaSpec {
  std::string name = "mlx5_0";
  std::string pci = "0000:17:00.0";
  std::string hca_type = "MT4129";
  std::string fw_ver = "28.39.1002";
  std::string board_id = "MT_0000000838";
  std::string node_guid = "b83f:d203:0012:3456";
  int ports = 1;
  std::string link_layer = "InfiniBand";  // "Ethernet" for RoCE
  std::string rate = "400 Gb/sec (4X NDR)";
  // RoCE: the netdev of this function, created under the PCI device and named in
  // gid_attrs/ndevs/0 of port 1.
  std::string netdev;
  bool hw_counters = true;
  bool congestion_counters = true;  // np_ecn_marked_roce_packets, np_cnp_sent, rp_cnp_*
  // The kernel driver bound to the PCI function (its `driver` link, which the RDMA device's
  // device/driver resolves to); empty for none. The device name does not tell it: rdma-core's udev
  // rules rename mlx5_0 to ibp<bus>s<slot>[f<fn>] (InfiniBand) or rocep<bus>s<slot>f<fn> (RoCE).
  std::string driver = "mlx5_core";
  // With the EXT_WIDTH PMA table's unicast_*/multicast_* files; false: the files of the 32-bit and
  // the EXT_WIDTH_NOIETF tables (core/sysfs.c get_counter_table), which look the same.
  bool pma_unicast = true;
  // The first value of every hw_counters file (lifespan aside). The files are 64-bit sums: with
  // per-QP counters bound, a 32-bit Q counter's file passes 2^32 - 1; tests start there.
  uint64_t hw_counter_start = 0;
};

struct NetdevSpec {
  std::string name = "eth0";
  std::string pci;  // empty: a virtual device (devices/virtual/net)
  int speed_mbps = 400000;
  int mtu = 4200;
  std::string operstate = "up";
};

// The names of the files in ports/<n>/counters/ of an mlx5 port (EXT_WIDTH set: 21 files).
const std::vector<std::string>& Mlx5PmaCounterNames();
// The names of the files in ports/<n>/hw_counters/ of a current mlx5 port (with congestion ones
// when asked; always with lifespan).
std::vector<std::string> Mlx5HwCounterNames(bool congestion);
// The names of the files in class/net/<if>/statistics/.
const std::vector<std::string>& NetdevStatisticNames();

class SysfsTreeWriter {
 public:
  // `sys_root` is the folder that stands for /sys; created if needed.
  explicit SysfsTreeWriter(std::string sys_root);

  absl::Status AddHca(const HcaSpec& spec);
  absl::Status AddNetdev(const NetdevSpec& spec);
  // Removes the class link and the device folder (hot unplug, driver unload).
  absl::Status RemoveHca(absl::string_view name);

  // In-place writes of one value, relative to the port or interface.
  absl::Status SetIbCounter(absl::string_view dev, int port, absl::string_view counter,
                            uint64_t value);
  absl::Status SetHwCounter(absl::string_view dev, int port, absl::string_view counter,
                            uint64_t value);
  // state: 1 DOWN .. 4 ACTIVE; phys: 2 Polling, 3 Disabled, 5 LinkUp, ...
  absl::Status SetPortState(absl::string_view dev, int port, int state, int phys_state);
  absl::Status SetNetdevStat(absl::string_view netdev, absl::string_view stat, uint64_t value);
  absl::Status SetNetdevAttr(absl::string_view netdev, absl::string_view attr,
                             absl::string_view content);

  // Writes `content` to root-relative `path` in place (pwrite at 0, then truncate), creating it.
  absl::Status WriteFile(const std::string& path, absl::string_view content);

  const std::string& root() const { return root_; }
  std::string IbPortDir(absl::string_view dev, int port) const;
  std::string NetdevDir(absl::string_view netdev) const;

 private:
  absl::Status MakeDirs(const std::string& path);
  absl::Status Link(const std::string& target, const std::string& link);

  std::string root_;
};

// "4: ACTIVE" style text for a state id.
std::string IbStateText(int state);
std::string IbPhysStateText(int phys_state);

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_SYSFS_TREE_H_
