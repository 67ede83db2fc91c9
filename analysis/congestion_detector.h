// Congestion: a sustained rate of ECN marks and congestion notifications on a port.
//
// Inputs (reference/ib-roce-counters.md §5.3, "Is ECN/DCQCN working?"): infiniband_hw
// np_ecn_marked_roce_packets and np_cnp_sent (the port receives CE-marked RoCE traffic and answers
// with CNPs: it is the notification point of a congested path), rp_cnp_handled (the port's own
// sends are being throttled by DCQCN: the reaction point), and ethtool rx_prio<N>_marked (packets
// the NIC marked for per-host congestion).
//
// Rule: any of them at or above `min_rate` per second for `sustain_samples` consecutive samples.
// Resolves when every one has stayed below `min_rate × resolve_ratio` for `clear_window`. The
// rates are per port; reset and invalid steps are skipped (they say nothing about the interval).
//
// There is no published absolute threshold (Minder, §1.4, compares ECN/CNP rates between peers):
// the default of 1,000 marked packets or CNPs a second is ringside's — about 0.01 % of a 400 Gb/s
// port's 4 KiB packets, far above the handful a second that transient incast leaves, and low enough
// to catch a path held congested. Tune it with CongestionOptions::min_rate.
#ifndef RINGSIDE_ANALYSIS_CONGESTION_DETECTOR_H_
#define RINGSIDE_ANALYSIS_CONGESTION_DETECTOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "analysis/fabric_inputs.h"
#include "analysis/last_port.h"
#include "analysis/finding.h"

namespace ringside::analysis {

struct CongestionOptions {
  double min_rate = 1000;                           // per second
  int sustain_samples = 3;                          // consecutive samples at or above it
  double resolve_ratio = 0.5;                       // hysteresis for the resolution
  absl::Duration clear_window = absl::Seconds(60);  // below min_rate × ratio this long
  absl::Duration stale_after = absl::Minutes(30);   // no samples this long: resolve (stale = 1)
};

class CongestionDetector {
 public:
  explicit CongestionDetector(CongestionOptions options = {}, const PortDirectory* ports = nullptr);
  ~CongestionDetector();

  void ObserveCounter(const CounterStep& step, std::vector<Finding>& out);
  // Resolves and forgets ports silent for stale_after, found once per sweep interval
  // (clamp(stale_after / 30, 1 s, 10 s)).
  void Advance(absl::Time now, std::vector<Finding>& out);
  bool Restore(const Finding& open);

  static bool Uses(absl::string_view source, absl::string_view counter);
  // What this detector reads in a series, for CounterStep::prepared (-1: not used).
  static int32_t Prepare(absl::string_view source, absl::string_view counter, int32_t priority);

  size_t ports() const { return ports_.size(); }

 private:
  struct Port;
  Finding Make(const Port& p, absl::Time at, bool active) const;

  CongestionOptions options_;
  const PortDirectory* directory_;
  absl::flat_hash_map<std::string, std::unique_ptr<Port>> ports_;
  std::string key_;
  LastPort<Port> last_;
  absl::Time next_sweep_ = absl::InfinitePast();  // of the stale ports (Advance)
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_CONGESTION_DETECTOR_H_
