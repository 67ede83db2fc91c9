// Links: link_down, link_flapping and link_degraded, per port (InfiniBand or RoCE RDMA port,
// netdev) and per NVLink. Driven by the inputs' own times; Advance(now) applies time-based
// resolutions.
//
// link_down — a port or NVLink that was up goes down: at once from an event (netlink, verbs), else
// at the first sample whose state says down (infiniband_port/state < 4 ACTIVE, phys_state Sleep,
// Polling or Disabled, netdev/operstate down or lowerlayerdown, nvlink/link_state 0; the state
// series of one link combine: any down is down). A port first seen down is
// not raised (an uncabled port; NVSentinel suppresses these too). Resolves when the link is up. A
// whole down→up cycle between two samples, seen only by a counter (Δlink_downed,
// Δcarrier_down_count, Δlink_down_events_phy, Δcarrier_changes / 2), is raised and resolved at
// once: one isolated flap is a link_down, not flapping. While link_flapping is open, new downs do
// not raise link_down.
//
// link_flapping — at least `flap_cycles` down→up cycles within `flap_window` on one link; raised at
// the sample or event that completes the second cycle. Resolves after `flap_quiet` without a
// transition. Every observation of a down — an event, a state sample, a counter step — is matched
// against the downs already recorded (a counter step's interval, a state sample's interval since
// the previous sample, an event's time ± `event_slack`), so one cycle seen as an event, a state
// change and three counters counts once; a counter that counts more downs than were seen adds the
// difference (cycles shorter than the sampling interval).
//
// link_degraded — error rates against published thresholds (reference/detection-rules.md §2,
// reference/nvml-nvlink.md §10), each a LinkOptions field below. Resolves when no rule has been
// breached for `clean_window`. Reset and invalid steps count nothing (a new baseline: when the
// reset happened is unknown); a saturated step counts its lower bound, and a counter stuck at its
// maximum keeps an open finding open (it can no longer show the link clean) but opens nothing.
#ifndef RINGSIDE_ANALYSIS_LINK_DETECTOR_H_
#define RINGSIDE_ANALYSIS_LINK_DETECTOR_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/fabric_inputs.h"
#include "analysis/last_port.h"
#include "analysis/fabric_views.h"
#include "analysis/finding.h"

namespace ringside::analysis {

struct LinkOptions {
  // --- link_flapping (DESIGN.md; ByteRobust waits for a second alert within 5 min, §2.3) ---
  int flap_cycles = 2;                             // down→up cycles ...
  absl::Duration flap_window = absl::Minutes(10);  // ... within this window
  absl::Duration flap_quiet = absl::Minutes(10);   // resolved after this without a transition
  absl::Duration event_slack = absl::Seconds(2);   // an event matches an interval this close
  // A state series not sampled for this long no longer counts toward the link's state, and a
  // counter-only down waiting for a state sample to confirm it is taken as a completed cycle.
  absl::Duration state_stale_after = absl::Minutes(2);

  // --- link_degraded, InfiniBand / RoCE (reference/detection-rules.md §2.1, §2.2) ---
  // symbol_error (and ethtool rx_pcs_symbol_err_phy): more than this many per hour, counted over
  // `symbol_window` → critical. NVSentinel "symbol_error_fatal" (> 120/hour, the IBTA 1e-12 BER
  // bound); the window is UFM PDR's short BER window (12 min).
  double symbol_errors_per_hour = 120;
  absl::Duration symbol_window = absl::Minutes(12);
  // symbol_error faster than this over one step → warning (NVSentinel non-fatal, > 10/s).
  double symbol_burst_per_s = 10;
  // The per-second rates of symbol_error and port_rcv_errors (the two rules above and below that
  // say "over one step", and the evidence an engineer reads) are taken over at least this long:
  // a step shorter than it — an early sample the agent took because an error counter moved, a
  // few milliseconds after its last — is joined with the steps before it (a counter that did not
  // move in between counts 0 there). Over a few milliseconds a rate is the size of one increment
  // divided by an interval that is not the one it accumulated over (12 errors every 250 ms read
  // 37 ms after the last sample is 324/s, for 48/s).
  absl::Duration rate_min_interval = absl::Seconds(1);
  // UFM PDR BER test: symbol errors over `symbol_window` above rate × window × ber (2.88 for NDR at
  // 1e-14) → critical. 0 = off (default): raw errors are normal on PAM4 links (NVSentinel), and at
  // NDR the bound is 3 errors in 12 minutes. Needs infiniband_port/rate samples.
  double ufm_ber = 0;
  // link_error_recovery: more than this many per minute → warning (NVSentinel, "micro-flapping").
  double link_error_recovery_per_min = 5;
  // port_rcv_errors faster than this over one step → warning (NVSentinel non-fatal, > 10/s).
  double port_rcv_errors_per_s = 10;
  // local_link_integrity_errors: any increment → critical (NVSentinel fatal, delta > 0).
  bool local_link_integrity_any = true;

  // --- link_degraded, NVLink (DCGM 4.6 health watch, reference/nvml-nvlink.md §10) ---
  absl::Duration nvlink_window = absl::Seconds(60);  // DCGM's default health window
  bool nvlink_replay_recovery_any = true;  // replay_errors, recovery_errors: Δ ≥ 1 → critical
  // crc_flit_errors, crc_data_errors at ≥ this rate → critical ("CRC errors only matter at rates
  // of 100+ per second"). DCGM warns below it; ringside raises nothing there (single CRC errors are
  // normal) and keeps the count as evidence of any open finding.
  double nvlink_crc_per_s = 100;
  // NVLink5 recovery_events, recovery_failed_events, symbol_errors, effective_errors: Δ ≥ 1 →
  // critical (DCGM FAIL, code 71).
  bool nvlink5_errors_any = true;
  // nvlink effective_ber (packed NVML form or decoded) worse than this → critical (DCGM, code 119).
  double nvlink_effective_ber = 1e-12;

  // Resolution of link_degraded: no rule breached for this long (UFM PDR waits 5 minutes,
  // DEISOLATE_CONSIDER_TIME, before it considers returning a port to service).
  absl::Duration clean_window = absl::Minutes(5);

  // A link with no input at all for this long: its open findings resolve (it is no longer
  // observed — an agent gone, a device removed), with evidence stale = 1.
  absl::Duration stale_after = absl::Minutes(30);
};

class LinkDetector {
 public:
  explicit LinkDetector(LinkOptions options = {}, const PortDirectory* ports = nullptr);
  ~LinkDetector();

  // Inputs; each appends the findings it causes (opened, updated, resolved) to `out`. Series the
  // detector does not use are ignored cheaply.
  void ObserveCounter(const CounterStep& step, std::vector<Finding>& out);
  void ObserveState(const StateSample& sample, std::vector<Finding>& out);
  void ObserveEvent(const LinkEvent& event, std::vector<Finding>& out);
  // Time-based resolutions (flapping quiet, clean degraded links, stale links) and pending
  // counter-only downs. Each call visits the links with something open or pending (kept in a set
  // as it happens); every link, for staleness, only once per sweep_interval() — a pass over
  // every link's record each second cost 8 % of an aggregator's CPU at 4,096 nodes
  // (docs/scale.md), and staleness is measured in minutes.
  void Advance(absl::Time now, std::vector<Finding>& out);
  // clamp(stale_after / 30, 1 s, 10 s): how late a stale link may resolve.
  absl::Duration sweep_interval() const;

  // After a restart: takes over an open incident of a kind this detector raises (as a finding
  // rebuilt from the stored incident), so that it resolves when its condition clears and is not
  // raised twice. Returns false for other kinds.
  bool Restore(const Finding& open);

  // Whether a counter or state series is one this detector reads.
  static bool Uses(absl::string_view source, absl::string_view counter);
  // What this detector reads in a series, for CounterStep::prepared / StateSample::prepared
  // (-1: not used).
  static int32_t Prepare(absl::string_view source, absl::string_view counter);

  size_t links() const { return links_.size(); }
  // Every link seen so far, as of `now` (the flapping window ends at `now`). Unordered.
  std::vector<LinkView> Views(absl::Time now) const;
  // Shows `fn` every link seen so far, as of `now`, without copying it (LinkRef's views are valid
  // during the call only). Unordered.
  void VisitLinks(absl::Time now, absl::FunctionRef<void(const LinkRef&)> fn) const;
  // The view of a link VisitLinks showed (LinkRef::record), while the detector is unchanged since.
  LinkView ViewOf(const void* record, absl::Time now) const;

 private:
  struct Link;
  struct Down;
  Link& GetLink(absl::string_view node, absl::string_view source, absl::string_view device,
                absl::string_view port, uint64_t token = 0, RecordHint* hint = nullptr);
  Link& FindOrAddLink(absl::string_view node, absl::string_view source, absl::string_view device,
                      absl::string_view port);
  void Transition(Link& l, LinkState to, absl::Time lo, absl::Time hi, uint16_t witness,
                  absl::Time at, const char* how, std::vector<Finding>& out);
  void ObserveDowns(Link& l, uint32_t n, absl::Time lo, absl::Time hi, uint16_t witness,
                    absl::Time now, std::vector<Finding>& out);
  void Confirm(Link& l, absl::Time t, std::vector<Finding>& out);
  void CompleteCycles(Link& l, absl::Time now, std::vector<Finding>& out);
  void CheckQuiet(Link& l, absl::Time now, std::vector<Finding>& out);
  void ObserveError(Link& l, const CounterStep& step, int code, std::vector<Finding>& out);
  void ObserveBer(Link& l, absl::Time t, double ber, std::vector<Finding>& out);
  void Breach(Link& l, absl::Time t, Severity sev, const std::string& rule, double value,
              double limit, std::vector<Finding>& out);
  void CheckClean(Link& l, absl::Time now, std::vector<Finding>& out);
  Finding Make(const Link& l, IncidentKind kind, absl::Time at, bool active) const;
  int CompletedInWindow(const Link& l, absl::Time now) const;
  LinkRef RefOf(const Link& l, absl::Time now) const;  // fabric_views.cc
  // `l` has a pending down or an open flapping/degraded incident: Advance must visit it.
  void Attend(Link& l) { attention_.insert(&l); }
  static bool NeedsAttention(const Link& l);
  // Advance's work on one link; false when it went stale and was erased.
  bool AdvanceLink(Link& l, absl::Time now, bool sweep, std::vector<Finding>& out);

  LinkOptions options_;
  const PortDirectory* ports_;
  // By node \0 PortId::Key(), viewing the record's own copy (Link::key): one string a link.
  absl::flat_hash_map<absl::string_view, std::unique_ptr<Link>> links_;
  std::string key_;                                                // scratch
  LastPort<Link> last_;
  absl::flat_hash_set<Link*> attention_;  // see Advance
  absl::Time next_sweep_ = absl::InfinitePast();
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_LINK_DETECTOR_H_
