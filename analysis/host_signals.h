// The host evidence a straggler's cause is checked against: per node, the kernel's pressure stall
// information (source "host": cpu/memory/io_pressure_some_us and _full_us, µs counters of
// /proc/pressure/*), and per rank's cgroup its CPU-quota throttling (source "cgroup", device = the
// cgroup path as in /proc/self/cgroup's v2 line: nr_periods, nr_throttled, throttled_usec,
// usage_usec from cpu.stat). Kept as shares of time over a sliding window of the data's own time;
// no incidents of their own. Thread-compatible.
#ifndef RINGSIDE_ANALYSIS_HOST_SIGNALS_H_
#define RINGSIDE_ANALYSIS_HOST_SIGNALS_H_

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/fabric_inputs.h"

namespace ringside::analysis {

struct HostOptions {
  absl::Duration window = absl::Seconds(30);  // shares are over this much of the data's time
  double cpu_pressure_share = 0.2;       // "some" CPU stall share that is host evidence
  double memory_pressure_share = 0.1;    // "some" memory stall share that is host evidence
  double io_pressure_share = 0.3;        // "some" IO stall share that is host evidence
  double cgroup_throttled_share = 0.1;   // share of CFS periods throttled that is host evidence
};

// What was seen of one node and one cgroup over the window; -1 where nothing was seen.
struct HostEvidence {
  double cpu_some = -1, cpu_full = -1;
  double memory_some = -1, memory_full = -1;
  double io_some = -1, io_full = -1;
  double cgroup_throttled_periods = -1;  // nr_throttled / nr_periods
  double cgroup_throttled_s_per_s = -1;  // throttled_usec per second of wall time
  double cgroup_cpu_s_per_s = -1;        // usage_usec per second of wall time (CPUs in use)
};

class HostSignals {
 public:
  explicit HostSignals(HostOptions options = {}) : options_(options) {}

  static bool Uses(absl::string_view source, absl::string_view counter);
  void ObserveCounter(const CounterStep& step);
  // The window as of each series' latest sample; a series whose latest sample is older than
  // `not_before` counts as unseen.
  HostEvidence Of(absl::string_view node, absl::string_view cgroup,
                  absl::Time not_before = absl::InfinitePast()) const;
  // Forgets series not sampled since `before`.
  void Expire(absl::Time before);
  const HostOptions& options() const { return options_; }

 private:
  struct Window {
    std::deque<std::pair<absl::Time, std::pair<double, double>>> q;
    double on = 0, total = 0;
    absl::Time last = absl::InfinitePast();
    void Add(absl::Time t, double on_part, double total_part, absl::Duration window);
    double Share(absl::Time not_before) const {
      return q.empty() || last < not_before || total <= 0 ? -1 : on / total;
    }
  };
  HostOptions options_;
  // node \x1f counter → window; node \x1f cgroup \x1f counter → window.
  std::map<std::string, Window> windows_;
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_HOST_SIGNALS_H_
