#include "sim/node_build.h"

#include "absl/strings/str_format.h"
#include "sim/sim_names.h"

namespace ringside::sim {

bool IsPortFault(FaultKind k) {
  return k == FaultKind::kLinkFlap || k == FaultKind::kLinkDown || k == FaultKind::kLinkDegraded ||
         k == FaultKind::kPauseStorm || k == FaultKind::kCongestion;
}

std::vector<PortFault> PortFaultsOfNode(const Scenario& s, int i) {
  std::vector<PortFault> out;
  const int leaf = i / s.nodes_per_leaf;
  for (const FaultSpec& f : s.faults) {
    if (f.kind == FaultKind::kCounterReset && f.node == i) {
      for (int k = 0; k < s.gpus; ++k) {
        out.push_back({PortFault::Kind::kCounterReset, RailDevice(k), 1, f.start, f.duration});
      }
      continue;
    }
    if (!IsPortFault(f.kind)) continue;
    if (f.node == i) {
      PortFault::Kind k = PortFault::Kind::kFlap;
      switch (f.kind) {
        case FaultKind::kLinkFlap:
          k = PortFault::Kind::kFlap;
          break;
        case FaultKind::kLinkDown:
          k = PortFault::Kind::kDown;
          break;
        case FaultKind::kLinkDegraded:
          k = PortFault::Kind::kSymbolErrors;
          break;
        case FaultKind::kPauseStorm:
          k = PortFault::Kind::kPauseStorm;
          break;
        case FaultKind::kCongestion:
          k = PortFault::Kind::kEcnCongestion;
          break;
        default:
          break;
      }
      out.push_back({k, f.device, 1, f.start, f.duration});
    } else if (f.kind == FaultKind::kPauseStorm && f.node / s.nodes_per_leaf == leaf) {
      out.push_back(
          {PortFault::Kind::kPaused, f.device, 1, f.start + absl::Seconds(1), f.duration});
    }
  }
  return out;
}

absl::StatusOr<std::vector<AnimatedPort>> BuildNodeTree(const Scenario& s, int i,
                                                        SysfsTreeWriter* tree) {
  std::vector<AnimatedPort> ports;
  for (int k = 0; k < s.gpus; ++k) {
    HcaSpec h;
    h.name = RailDevice(k);
    h.pci = absl::StrFormat("0000:%02x:00.0", 0x17 + k * 0x10);
    h.node_guid = absl::StrFormat("b83f:d203:%04x:%04x", i, k);
    h.link_layer = "Ethernet";
    h.rate = "400 Gb/sec (4X NDR)";
    h.netdev = RailNetdev(k);
    if (absl::Status st = tree->AddHca(h); !st.ok()) return st;
    AnimatedPort p;
    p.device = h.name;
    p.roce = true;
    p.netdev = h.netdev;
    p.gbytes_per_second = s.gbytes_per_second;
    ports.push_back(p);
  }
  return ports;
}

}  // namespace ringside::sim
