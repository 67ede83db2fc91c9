#include "sim/sysfs_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringside::sim {
namespace {

absl::Status Errno(absl::string_view op, const std::string& path) {
  return absl::InternalError(absl::StrCat(op, " ", path, ": ", std::strerror(errno)));
}

std::string Pci(const std::string& pci) { return "devices/pci0000:00/" + pci; }

}  // namespace

const std::vector<std::string>& Mlx5PmaCounterNames() {
  static const std::vector<std::string>* names = new std::vector<std::string>{
      "VL15_dropped",
      "excessive_buffer_overrun_errors",
      "link_downed",
      "link_error_recovery",
      "local_link_integrity_errors",
      "multicast_rcv_packets",
      "multicast_xmit_packets",
      "port_rcv_constraint_errors",
      "port_rcv_data",
      "port_rcv_errors",
      "port_rcv_packets",
      "port_rcv_remote_physical_errors",
      "port_rcv_switch_relay_errors",
      "port_xmit_constraint_errors",
      "port_xmit_data",
      "port_xmit_discards",
      "port_xmit_packets",
      "port_xmit_wait",
      "symbol_error",
      "unicast_rcv_packets",
      "unicast_xmit_packets",
  };
  return *names;
}

std::vector<std::string> Mlx5HwCounterNames(bool congestion) {
  std::vector<std::string> names = {
      "duplicate_request",          "implied_nak_seq_err",      "lifespan",
      "local_ack_timeout_err",      "out_of_buffer",            "out_of_sequence",
      "packet_seq_err",             "req_cqe_error",            "req_cqe_flush_error",
      "req_remote_access_errors",   "req_remote_invalid_request", "resp_cqe_error",
      "resp_cqe_flush_error",       "resp_local_length_error",  "resp_remote_access_errors",
      "rnr_nak_retry_err",          "roce_adp_retrans",         "roce_adp_retrans_to",
      "roce_slow_restart",          "roce_slow_restart_cnps",   "roce_slow_restart_trans",
      "rx_atomic_requests",         "rx_dct_connect",           "rx_icrc_encapsulated",
      "rx_read_requests",           "rx_write_requests",
  };
  if (congestion) {
    for (const char* c :
         {"np_cnp_sent", "np_ecn_marked_roce_packets", "rp_cnp_handled", "rp_cnp_ignored"}) {
      names.push_back(c);
    }
  }
  return names;
}

const std::vector<std::string>& NetdevStatisticNames() {
  static const std::vector<std::string>* names = new std::vector<std::string>{
      "collisions",        "multicast",         "rx_bytes",          "rx_compressed",
      "rx_crc_errors",     "rx_dropped",        "rx_errors",         "rx_fifo_errors",
      "rx_frame_errors",   "rx_length_errors",  "rx_missed_errors",  "rx_nohandler",
      "rx_over_errors",    "rx_packets",        "tx_aborted_errors", "tx_bytes",
      "tx_carrier_errors", "tx_compressed",     "tx_dropped",        "tx_errors",
      "tx_fifo_errors",    "tx_heartbeat_errors", "tx_packets",      "tx_window_errors",
  };
  return *names;
}

std::string IbStateText(int state) {
  static const char* kNames[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  return absl::StrCat(state, ": ", state >= 0 && state <= 5 ? kNames[state] : "UNKNOWN");
}

std::string IbPhysStateText(int phys) {
  static const char* kNames[] = {"<unknown>", "Sleep",  "Polling",           "Disabled",
                                 "PortConfigurationTraining", "LinkUp", "LinkErrorRecovery",
                                 "Phy Test"};
  return absl::StrCat(phys, ": ", phys >= 0 && phys <= 7 ? kNames[phys] : "<unknown>");
}

SysfsTreeWriter::SysfsTreeWriter(std::string sys_root) : root_(std::move(sys_root)) {
  std::error_code ec;
  std::filesystem::create_directories(root_, ec);
}

absl::Status SysfsTreeWriter::MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(root_ + "/" + path, ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", path, ": ", ec.message()));
  return absl::OkStatus();
}

absl::Status SysfsTreeWriter::Link(const std::string& target, const std::string& link) {
  std::filesystem::path l = std::filesystem::path(root_) / link;
  std::error_code ec;
  std::filesystem::create_directories(l.parent_path(), ec);
  std::filesystem::remove(l, ec);
  // Relative, as the kernel's class links are ("../../devices/...").
  std::filesystem::path rel =
      std::filesystem::relative(std::filesystem::path(root_) / target, l.parent_path(), ec);
  if (::symlink(rel.c_str(), l.c_str()) != 0) return Errno("symlink", l.string());
  return absl::OkStatus();
}

absl::Status SysfsTreeWriter::WriteFile(const std::string& path, absl::string_view content) {
  std::string full = root_ + "/" + path;
  int fd = ::open(full.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ENOENT) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(full).parent_path(), ec);
    fd = ::open(full.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  }
  if (fd < 0) return Errno("open", full);
  // In place, so a reader holding the file open sees the new value on its next read at 0.
  ssize_t n = ::pwrite(fd, content.data(), content.size(), 0);
  bool ok = n == static_cast<ssize_t>(content.size()) &&
            ::ftruncate(fd, static_cast<off_t>(content.size())) == 0;
  int err = errno;
  ::close(fd);
  if (!ok) {
    errno = err;
    return Errno("write", full);
  }
  return absl::OkStatus();
}

std::string SysfsTreeWriter::IbPortDir(absl::string_view dev, int port) const {
  return absl::StrCat("class/infiniband/", dev, "/ports/", port);
}

std::string SysfsTreeWriter::NetdevDir(absl::string_view netdev) const {
  return absl::StrCat("class/net/", netdev);
}

absl::Status SysfsTreeWriter::AddHca(const HcaSpec& spec) {
  const std::string dev = absl::StrCat(Pci(spec.pci), "/infiniband/", spec.name);
  if (absl::Status s = MakeDirs(dev); !s.ok()) return s;
  if (absl::Status s = Link(dev, "class/infiniband/" + spec.name); !s.ok()) return s;
  for (const auto& [file, value] : {std::pair<const char*, const std::string&>{"hca_type", spec.hca_type},
                                    {"fw_ver", spec.fw_ver},
                                    {"board_id", spec.board_id},
                                    {"node_guid", spec.node_guid}}) {
    if (absl::Status s = WriteFile(absl::StrCat(dev, "/", file), value + "\n"); !s.ok()) return s;
  }
  // The device/ link of an IB device points at its PCI function.
  if (absl::Status s = Link(Pci(spec.pci), dev + "/device"); !s.ok()) return s;
  if (!spec.driver.empty()) {
    const std::string drv = "bus/pci/drivers/" + spec.driver;
    if (absl::Status s = MakeDirs(drv); !s.ok()) return s;
    if (absl::Status s = Link(drv, Pci(spec.pci) + "/driver"); !s.ok()) return s;
  }

  for (int port = 1; port <= spec.ports; ++port) {
    const std::string pd = absl::StrCat(dev, "/ports/", port);
    if (absl::Status s = WriteFile(pd + "/state", IbStateText(4) + "\n"); !s.ok()) return s;
    if (absl::Status s = WriteFile(pd + "/phys_state", IbPhysStateText(5) + "\n"); !s.ok()) {
      return s;
    }
    if (absl::Status s = WriteFile(pd + "/rate", spec.rate + "\n"); !s.ok()) return s;
    if (absl::Status s = WriteFile(pd + "/link_layer", spec.link_layer + "\n"); !s.ok()) return s;
    if (absl::Status s = WriteFile(pd + "/lid", "0x1\n"); !s.ok()) return s;
    for (const std::string& c : Mlx5PmaCounterNames()) {
      if (!spec.pma_unicast && (absl::StartsWith(c, "unicast_") || absl::StartsWith(c, "multicast_"))) {
        continue;
      }
      if (absl::Status s = WriteFile(absl::StrCat(pd, "/counters/", c), "0\n"); !s.ok()) return s;
    }
    if (spec.hw_counters) {
      for (const std::string& c : Mlx5HwCounterNames(spec.congestion_counters)) {
        if (absl::Status s = WriteFile(absl::StrCat(pd, "/hw_counters/", c),
                                       c == "lifespan"
                                           ? std::string("10\n")
                                           : absl::StrCat(spec.hw_counter_start, "\n"));
            !s.ok()) {
          return s;
        }
      }
    }
    if (!spec.netdev.empty() && port == 1) {
      if (absl::Status s = WriteFile(pd + "/gid_attrs/ndevs/0", spec.netdev + "\n"); !s.ok()) {
        return s;
      }
      if (absl::Status s = WriteFile(pd + "/gid_attrs/types/0", "RoCE v2\n"); !s.ok()) return s;
    }
  }
  if (!spec.netdev.empty()) {
    NetdevSpec nd;
    nd.name = spec.netdev;
    nd.pci = spec.pci;
    if (absl::Status s = AddNetdev(nd); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status SysfsTreeWriter::AddNetdev(const NetdevSpec& spec) {
  const std::string dir = spec.pci.empty() ? absl::StrCat("devices/virtual/net/", spec.name)
                                           : absl::StrCat(Pci(spec.pci), "/net/", spec.name);
  if (absl::Status s = MakeDirs(dir + "/statistics"); !s.ok()) return s;
  if (absl::Status s = Link(dir, "class/net/" + spec.name); !s.ok()) return s;
  for (const std::string& stat : NetdevStatisticNames()) {
    if (absl::Status s = WriteFile(absl::StrCat(dir, "/statistics/", stat), "0\n"); !s.ok()) {
      return s;
    }
  }
  const std::pair<const char*, std::string> attrs[] = {
      {"carrier_changes", "0"},      {"carrier_up_count", "0"},
      {"carrier_down_count", "0"},   {"operstate", spec.operstate},
      {"speed", absl::StrCat(spec.speed_mbps)}, {"mtu", absl::StrCat(spec.mtu)},
      {"dev_port", "0"},             {"carrier", spec.operstate == "up" ? "1" : "0"},
  };
  for (const auto& [file, value] : attrs) {
    if (absl::Status s = WriteFile(absl::StrCat(dir, "/", file), value + "\n"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status SysfsTreeWriter::RemoveHca(absl::string_view name) {
  std::filesystem::path link = std::filesystem::path(root_) / "class/infiniband" / std::string(name);
  std::error_code ec;
  std::filesystem::path target = std::filesystem::canonical(link, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("no HCA ", name));
  std::filesystem::remove(link, ec);
  std::filesystem::remove_all(target, ec);
  if (ec) return absl::InternalError(absl::StrCat("remove ", target.string(), ": ", ec.message()));
  return absl::OkStatus();
}

absl::Status SysfsTreeWriter::SetIbCounter(absl::string_view dev, int port,
                                           absl::string_view counter, uint64_t value) {
  return WriteFile(absl::StrCat(IbPortDir(dev, port), "/counters/", counter),
                   absl::StrCat(value, "\n"));
}

absl::Status SysfsTreeWriter::SetHwCounter(absl::string_view dev, int port,
                                           absl::string_view counter, uint64_t value) {
  return WriteFile(absl::StrCat(IbPortDir(dev, port), "/hw_counters/", counter),
                   absl::StrCat(value, "\n"));
}

absl::Status SysfsTreeWriter::SetPortState(absl::string_view dev, int port, int state,
                                           int phys_state) {
  if (absl::Status s = WriteFile(IbPortDir(dev, port) + "/state", IbStateText(state) + "\n");
      !s.ok()) {
    return s;
  }
  return WriteFile(IbPortDir(dev, port) + "/phys_state", IbPhysStateText(phys_state) + "\n");
}

absl::Status SysfsTreeWriter::SetNetdevStat(absl::string_view netdev, absl::string_view stat,
                                            uint64_t value) {
  return WriteFile(absl::StrCat(NetdevDir(netdev), "/statistics/", stat),
                   absl::StrCat(value, "\n"));
}

absl::Status SysfsTreeWriter::SetNetdevAttr(absl::string_view netdev, absl::string_view attr,
                                            absl::string_view content) {
  return WriteFile(absl::StrCat(NetdevDir(netdev), "/", attr), content);
}

}  // namespace ringside::sim
