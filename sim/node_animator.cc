#include "sim/node_animator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace ringside::sim {

NodeAnimator::NodeAnimator(SysfsTreeWriter* tree, std::vector<AnimatedPort> ports, uint64_t seed,
                           std::string ethtool_dir, AnimatorOptions options)
    : tree_(tree),
      ethtool_dir_(std::move(ethtool_dir)),
      options_(options),
      ports_(std::move(ports)),
      state_(ports_.size()),
      rng_(seed) {
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
  std::normal_distribution<double> noise(1.0, options_.noise);
  std::uniform_real_distribution<double> u(0, 1);
  // Background noise, per port: about one single symbol error per 2 hours, a short pause burst
  // per minute, an ECN blip per 2 minutes (all below every detection rule).
  const bool bg = options_.background_noise;
  for (size_t i = 0; i < ports_.size(); ++i) {
    const AnimatedPort& p = ports_[i];
    Counters& c = state_[i];
    bool flapping = false, symbols = false, ecn = false, storm = false, paused = false,
         hard_down = false;
    int resets = 0;
    absl::Duration flap_start = absl::ZeroDuration();
    for (const PortFault& f : faults_) {
      if (f.kind == PortFault::Kind::kCounterReset) {
        resets += f.device == p.device && f.port == p.port && t >= f.start ? 1 : 0;
        continue;
      }
      if (!Active(f, t, p)) continue;
      if (f.kind == PortFault::Kind::kFlap && !flapping) flap_start = f.start;
      flapping |= f.kind == PortFault::Kind::kFlap;
      symbols |= f.kind == PortFault::Kind::kSymbolErrors;
      ecn |= f.kind == PortFault::Kind::kEcnCongestion;
      storm |= f.kind == PortFault::Kind::kPauseStorm;
      paused |= f.kind == PortFault::Kind::kPaused;
      hard_down |= f.kind == PortFault::Kind::kDown;
    }
    if (resets > c.resets_applied) {  // a driver reload: every counter starts again from 0
      const bool was_down = c.down;
      const int applied = resets;
      c = Counters{};
      c.down = was_down;
      c.resets_applied = applied;
      c.out_of_sequence = 0;
    }
    // A flap: down for the first part of each 10 s cycle of the fault window.
    // A flap goes down at the fault's start, 3 s of every 10 s from there.
    const bool down =
        hard_down || (flapping && std::fmod(absl::ToDoubleSeconds(t - flap_start), 10.0) < 3.0);
    if (down != c.down) {
      c.down = down;
      ++c.carrier_changes;
      if (down) c.link_downed = std::min<uint64_t>(c.link_downed + 1, 255);  // 8-bit, saturates
      if (down) ++c.link_down_events;
      absl::Status s = down ? tree_->SetPortState(p.device, p.port, 1, 2)
                            : tree_->SetPortState(p.device, p.port, 4, 5);
      if (!s.ok()) return s;
      if (absl::Status s2 = tree_->SetIbCounter(p.device, p.port, "link_downed", c.link_downed);
          !s2.ok()) {
        return s2;
      }
      if (p.roce) {
        tree_->SetNetdevAttr(p.netdev, "operstate", down ? "down\n" : "up\n").IgnoreError();
        tree_->SetNetdevAttr(p.netdev, "carrier", down ? "0\n" : "1\n").IgnoreError();
        tree_->SetNetdevAttr(p.netdev, "carrier_changes", std::to_string(c.carrier_changes) + "\n")
            .IgnoreError();
      }
    }
    if (!down) {
      const double bytes = std::max(0.0, p.gbytes_per_second * 1e9 * dt * noise(rng_));
      c.xmit_words += static_cast<uint64_t>(bytes / 4);
      c.rcv_words += static_cast<uint64_t>(std::max(0.0, bytes / 4 * noise(rng_)));
      c.xmit_pkts += static_cast<uint64_t>(bytes / 4096);
      c.rcv_pkts += static_cast<uint64_t>(bytes / 4096);
      c.netdev_rx_bytes += static_cast<uint64_t>(bytes);
      c.netdev_tx_bytes += static_cast<uint64_t>(bytes);
      // uint32_t arithmetic wraps at 2^32, as the mlx5 Q counter does.
      c.out_of_sequence += static_cast<uint32_t>(p.out_of_sequence_per_second * dt);
    }
    if (symbols) {
      c.symbol_errors = std::min<uint64_t>(c.symbol_errors + static_cast<uint64_t>(40 * dt), 65535);
    } else if (bg && u(rng_) < dt / 7200) {
      c.symbol_errors = std::min<uint64_t>(c.symbol_errors + 1, 65535);
    }
    if (ecn && p.roce) {
      c.ecn_marked += static_cast<uint64_t>(std::max(0.0, 200000 * dt * noise(rng_)));
      c.cnp_sent += static_cast<uint64_t>(20000 * dt);
      c.cnp_handled += static_cast<uint64_t>(18000 * dt);
    } else if (bg && p.roce && u(rng_) < dt / 120) {
      c.ecn_marked += 50;
      c.cnp_sent += 5;
    }
    // PFC on priority 3: a few short pauses in normal traffic; a storm pauses ~95 % of the time.
    const double us = dt * 1e6;
    if (storm) {
      c.tx_pause += static_cast<uint64_t>(50000 * dt);
      c.tx_pause_us += static_cast<uint64_t>(0.95 * us);
      c.rx_discards_phy += static_cast<uint64_t>(2000 * dt);
    } else if (bg && u(rng_) < dt / 60) {
      c.tx_pause += 3;
      c.tx_pause_us += 200;
    }
    if (paused) {
      c.rx_pause += static_cast<uint64_t>(50000 * dt);
      c.rx_pause_us += static_cast<uint64_t>(0.9 * us);
      c.rx_transitions += static_cast<uint64_t>(10 * dt);
    } else if (bg && u(rng_) < dt / 60) {
      c.rx_pause += 3;
      c.rx_pause_us += 200;
      ++c.rx_transitions;
    }
    if (p.roce && !ethtool_dir_.empty()) {
      if (absl::Status s = WriteEthtoolDump(p, c); !s.ok()) return s;
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

absl::Status NodeAnimator::WriteEthtoolDump(const AnimatedPort& p, const Counters& c) {
  std::string text = "NIC statistics:\n";
  auto line = [&](const std::string& name, uint64_t v) {
    absl::StrAppend(&text, "     ", name, ": ", v, "\n");
  };
  line("rx_bytes", c.netdev_rx_bytes);
  line("tx_bytes", c.netdev_tx_bytes);
  line("rx_discards_phy", c.rx_discards_phy);
  line("tx_discards_phy", 0);
  line("link_down_events_phy", c.link_down_events);
  for (int prio = 0; prio < 8; ++prio) {
    const bool three = prio == 3;  // PFC is on for the RoCE priority only, as usual
    if (!three) continue;
    line(absl::StrCat("rx_prio", prio, "_pause"), c.rx_pause);
    line(absl::StrCat("rx_prio", prio, "_pause_duration"), c.rx_pause_us);
    line(absl::StrCat("tx_prio", prio, "_pause"), c.tx_pause);
    line(absl::StrCat("tx_prio", prio, "_pause_duration"), c.tx_pause_us);
    line(absl::StrCat("rx_prio", prio, "_pause_transition"), c.rx_transitions);
  }
  line("tx_pause_storm_warning_events", c.storm_warnings);
  line("tx_pause_storm_error_events", 0);
  // Written beside and renamed into place: a reader never sees half a dump.
  const std::string final_path = ethtool_dir_ + "/" + p.netdev;
  const std::string tmp_path = ethtool_dir_ + "/." + p.netdev + ".tmp";
  {
    std::ofstream out(tmp_path, std::ios::trunc);
    out << text;
    if (!out) return absl::InternalError("cannot write " + tmp_path);
  }
  if (std::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    return absl::InternalError("cannot rename " + tmp_path);
  }
  return absl::OkStatus();
}

}  // namespace ringside::sim
