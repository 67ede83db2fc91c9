// Advances one simulated node's sysfs tree as traffic and faults would: data and packet counters
// grow with traffic and noise, error counters tick rarely (at rates scaled to the elapsed time, so
// the step length does not change them), and scheduled faults (a link flap or a link down,
// symbol-error bursts, ECN marking, PFC pause storms, a driver reload that zeroes every counter)
// change the same files the kernel would.
#ifndef RINGSIDE_SIM_NODE_ANIMATOR_H_
#define RINGSIDE_SIM_NODE_ANIMATOR_H_

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "sim/sysfs_tree.h"

namespace ringside::sim {

struct AnimatedPort {
  std::string device;
  int port = 1;
  bool roce = false;
  std::string netdev;            // RoCE only
  double gbytes_per_second = 20;  // mean traffic each way
  // Out-of-sequence packets (a lossy path): rate and starting value of the 32-bit Q counter, so a
  // port can be started near 2^32 to show a wrap.
  double out_of_sequence_per_second = 0;
  uint32_t out_of_sequence_start = 0;
};

struct AnimatorOptions {
  double noise = 0.05;           // relative noise of traffic
  bool background_noise = true;  // rare single symbol errors, short pause bursts, ECN blips
};

// A fault on one port over [start, start + duration) of simulation time.
struct PortFault {
  // kPauseStorm: the port sends PFC pauses on priority 3 nearly all the time (the origin);
  // kPaused: the port is paused by its peer on priority 3 (a victim of a storm elsewhere).
  // kDown: down for the whole window. kCounterReset: at `start` every counter of the port
  // restarts from 0 (a driver reload; `duration` is ignored).
  enum class Kind { kFlap, kSymbolErrors, kEcnCongestion, kPauseStorm, kPaused, kDown,
                    kCounterReset };
  Kind kind;
  std::string device;
  int port = 1;
  absl::Duration start;
  absl::Duration duration;
};

class NodeAnimator {
 public:
  // `ethtool_dir` (optional): where `ethtool -S` dumps of the RoCE netdevs are written, for the
  // agent's --ethtool-source=dir:PATH.
  NodeAnimator(SysfsTreeWriter* tree, std::vector<AnimatedPort> ports, uint64_t seed,
               std::string ethtool_dir = "", AnimatorOptions options = {});
  void AddFault(PortFault fault) { faults_.push_back(std::move(fault)); }
  // Advances the tree to simulation time `t` (monotonic, from 0).
  absl::Status Step(absl::Duration t);

 private:
  struct Counters {
    uint64_t xmit_words = 0, rcv_words = 0, xmit_pkts = 0, rcv_pkts = 0;
    uint64_t symbol_errors = 0, link_downed = 0, link_error_recovery = 0;
    uint64_t ecn_marked = 0, cnp_sent = 0, cnp_handled = 0;
    uint32_t out_of_sequence = 0;
    uint64_t netdev_rx_bytes = 0, netdev_tx_bytes = 0;
    uint32_t carrier_changes = 0;
    uint64_t tx_pause = 0, tx_pause_us = 0, rx_pause = 0, rx_pause_us = 0, rx_transitions = 0;
    uint64_t storm_warnings = 0, link_down_events = 0, rx_discards_phy = 0;
    bool down = false;
    int resets_applied = 0;
  };
  bool Active(const PortFault& f, absl::Duration t, const AnimatedPort& p) const;

  absl::Status WriteEthtoolDump(const AnimatedPort& p, const Counters& c);

  SysfsTreeWriter* tree_;
  std::string ethtool_dir_;
  AnimatorOptions options_;
  std::vector<AnimatedPort> ports_;
  std::vector<PortFault> faults_;
  std::vector<Counters> state_;
  std::mt19937_64 rng_;
  absl::Duration last_ = absl::ZeroDuration();
};

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_NODE_ANIMATOR_H_
