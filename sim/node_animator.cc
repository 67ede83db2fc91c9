#include "sim/node_animator.h"

#include <algorithm>
#include <cmath>

namespace ringside::sim {

NodeAnimator::NodeAnimator(SysfsTreeWriter* tree, std::vector<AnimatedPort> ports, uint64_t seed)
    : tree_(tree), ports_(std::move(ports)), state_(ports_.size()), rng_(seed) {
  for (size_t i = 0; i < ports_.size(); ++i) {
    state_[i].out_of_sequence = ports_[i].out_of_sequence_start;
  }
}

bool NodeAnimator::Active(const PortFault& f, absl::Duration t, const AnimatedPort& p) const {
  return f.device == p.device && f.port == p.port && t >= f.start && t < f.start + f.duration;
}

absl::Status NodeAnimator::Step(absl::Duration t) {
  const double dt = std::max(0.0, absl::ToDoubleSeconds(t - last_));
  last_ = t;
  std::normal_distribution<double> noise(1.0, 0.05);
  std::uniform_real_distribution<double> u(0, 1);
  for (size_t i = 0; i < ports_.size(); ++i) {
    const AnimatedPort& p = ports_[i];
    Counters& c = state_[i];
    bool flapping = false, symbols = false, ecn = false;
    for (const PortFault& f : faults_) {
      if (!Active(f, t, p)) continue;
      flapping |= f.kind == PortFault::Kind::kFlap;
      symbols |= f.kind == PortFault::Kind::kSymbolErrors;
      ecn |= f.kind == PortFault::Kind::kEcnCongestion;
    }
    // A flap: down for the first part of each 10 s cycle of the fault window.
    const bool down = flapping && std::fmod(absl::ToDoubleSeconds(t), 10.0) < 3.0;
    if (down != c.down) {
      c.down = down;
      ++c.carrier_changes;
      if (down) c.link_downed = std::min<uint64_t>(c.link_downed + 1, 255);  // 8-bit, saturates
      absl::Status s = down ? tree_->SetPortState(p.device, p.port, 1, 2)
                            : tree_->SetPortState(p.device, p.port, 4, 5);
      if (!s.ok()) return s;
      if (absl::Status s2 = tree_->SetIbCounter(p.device, p.port, "link_downed", c.link_downed);
          !s2.ok()) {
        return s2;
      }
      if (p.roce) {
        tree_->SetNetdevAttr(p.netdev, "operstate", down ? "down\n" : "up\n").IgnoreError();
        tree_->SetNetdevAttr(p.netdev, "carrier_changes", std::to_string(c.carrier_changes) + "\n")
            .IgnoreError();
      }
    }
    if (!down) {
      const double bytes = p.gbytes_per_second * 1e9 * dt * noise(rng_);
      c.xmit_words += static_cast<uint64_t>(bytes / 4);
      c.rcv_words += static_cast<uint64_t>(bytes / 4 * noise(rng_));
      c.xmit_pkts += static_cast<uint64_t>(bytes / 4096);
      c.rcv_pkts += static_cast<uint64_t>(bytes / 4096);
      c.netdev_rx_bytes += static_cast<uint64_t>(bytes);
      c.netdev_tx_bytes += static_cast<uint64_t>(bytes);
      // uint32_t arithmetic wraps at 2^32, as the mlx5 Q counter does.
      c.out_of_sequence += static_cast<uint32_t>(p.out_of_sequence_per_second * dt);
    }
    if (symbols) c.symbol_errors = std::min<uint64_t>(c.symbol_errors + 40 * dt, 65535);
    else if (u(rng_) < 0.01) c.symbol_errors = std::min<uint64_t>(c.symbol_errors + 1, 65535);
    if (ecn && p.roce) {
      c.ecn_marked += static_cast<uint64_t>(200000 * dt * noise(rng_));
      c.cnp_sent += static_cast<uint64_t>(20000 * dt);
      c.cnp_handled += static_cast<uint64_t>(18000 * dt);
    }
    const std::pair<const char*, uint64_t> pma[] = {
        {"port_xmit_data", c.xmit_words},   {"port_rcv_data", c.rcv_words},
        {"port_xmit_packets", c.xmit_pkts}, {"port_rcv_packets", c.rcv_pkts},
        {"unicast_xmit_packets", c.xmit_pkts}, {"unicast_rcv_packets", c.rcv_pkts},
        {"symbol_error", c.symbol_errors},
    };
    for (const auto& [name, v] : pma) {
      if (absl::Status s = tree_->SetIbCounter(p.device, p.port, name, v); !s.ok()) return s;
    }
    if (absl::Status s = tree_->SetHwCounter(p.device, p.port, "out_of_sequence", c.out_of_sequence);
        !s.ok()) {
      return s;
    }
    if (p.roce) {
      tree_->SetHwCounter(p.device, p.port, "np_ecn_marked_roce_packets", c.ecn_marked).IgnoreError();
      tree_->SetHwCounter(p.device, p.port, "np_cnp_sent", c.cnp_sent).IgnoreError();
      tree_->SetHwCounter(p.device, p.port, "rp_cnp_handled", c.cnp_handled).IgnoreError();
      tree_->SetNetdevStat(p.netdev, "rx_bytes", c.netdev_rx_bytes).IgnoreError();
      tree_->SetNetdevStat(p.netdev, "tx_bytes", c.netdev_tx_bytes).IgnoreError();
    }
  }
  return absl::OkStatus();
}

}  // namespace ringside::sim
