// PFC pause storms, and the port that started one.
//
// Inputs: ethtool per-priority pause counters of each port (rx_prio<p>_pause_duration and
// tx_prio<p>_pause_duration in µs, rx_prio<p>_pause and tx_prio<p>_pause frames; the global-pause
// equivalents as priority "global") and the mlx5 stall-prevention counters
// tx_pause_storm_warning_events / tx_pause_storm_error_events.
//
// Rule (DESIGN.md; reference/detection-rules.md §1): a port is in a storm on a priority when it is
// paused — Δpause_duration µs / Δwall µs, either direction — at least `storm_fraction` of the time
// for `storm_samples` consecutive samples, or at once when it counts a tx_pause_storm_* event.
// SONiC's watchdog asks for a queue paused ≥ 99 % of every poll for the whole detection time
// (200 ms); ringside samples every second or more, so it asks for half of each of three samples.
// Bursty pauses that do not hold for three samples raise nothing.
//
// Origin: pauses spread upstream, so the storm is named after the port that *sends* pauses, among
// the ports of its domain (the leaf switch from the topology, else the node) on the same priority:
// a port counting storm events first; else the port whose tx pausing (tx_prio<p>_pause_duration at
// least `origin_min_fraction` of the time, or tx pause frames rising on a port without a duration
// counter) started earliest ("localise the first port that started pausing", §1.4), ties going to
// the larger tx fraction. The ports it spreads to — paused (rx) at least `spread_fraction` on the
// same priority in the same domain — are listed in the evidence as "spread/<node>/<port>" = rx
// paused fraction, and the finding is updated when the storm reaches another port. When no port of
// the domain sends pauses the origin is outside ringside's view: the finding names the domain
// ({leaf or node, priority, origin=unknown}).
//
// Without a leaf (no topology, or a node the topology does not name) the domain is one node, and
// a storm's victims are on other nodes. A port of such a node, on a node with no sender of its own
// on the priority, is listed as the spread of a storm of another leafless node instead of opening
// its own origin=unknown storm when: it is paused (rx) at least `spread_fraction` on the storm's
// priority, its pausing started within `infer_samples` of its samples of the origin's (either
// way), and the origin still sends pauses. Its evidence says so: "spread/<node>/<port>" = rx
// paused fraction as above, plus "inferred_spread/<node>/<port>" = start offset from the origin
// (s). A port that meets the storm rule first, before the origin's storm opens, opens it when such
// a sender is in view. An unrelated storm is told apart by its priority, its start (beyond the
// window), the origin having stopped sending, or — with a topology — its leaf (inference never
// crosses into a leaf). A storm with inferred victims stays open while they still pause (as with
// topology-based spread), and an origin=unknown storm opened by a port before its origin was in
// view is merged when the origin's storm opens within the window: it resolves, its summary naming
// the storm it belongs to (evidence merged=1), and its ports become the origin's inferred spread.
//
// Restoration: no pause (below `quiet_fraction`, or no pause frames on a port without durations)
// on the origin and every port it spread to for `restoration_time` of their samples.
#ifndef RINGSIDE_ANALYSIS_PAUSE_STORM_DETECTOR_H_
#define RINGSIDE_ANALYSIS_PAUSE_STORM_DETECTOR_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "analysis/fabric_inputs.h"
#include "analysis/last_port.h"
#include "analysis/finding.h"
#include "analysis/topology.h"

namespace ringside::analysis {

struct PauseStormOptions {
  // Paused at least this fraction of a sample's wall time (DESIGN.md: 50 %) ...
  double storm_fraction = 0.5;
  // ... for this many consecutive samples (DESIGN.md: 3).
  int storm_samples = 3;
  // Any Δtx_pause_storm_warning_events / Δtx_pause_storm_error_events is a storm (mlx5 stall
  // prevention, §1.3: the NIC paused past 80 ms..8 s).
  bool storm_events = true;
  // A port counts as sending pauses (an origin candidate) from this tx paused fraction.
  double origin_min_fraction = 0.1;
  // A port is listed as reached by the storm from this rx paused fraction.
  double spread_fraction = 0.25;
  // Without a leaf: a port paused on another node is inferred to be a storm's spread when its
  // pausing started within this many of its samples of the origin's (0: off, each node alone).
  int infer_samples = 3;
  // "No pause": below this fraction of a sample. SONiC restores a queue after no pause frame at
  // all, on a switch queue the watchdog has already silenced; a host NIC sees short pauses all
  // the time, so ringside counts a sample paused under 5 % (a tenth of the storm rule) as quiet.
  double quiet_fraction = 0.05;
  // Resolved after no pause for this long. SONiC restores after its restoration time, equal to the
  // detection time by default; ringside's detection time is three samples, so 30 s at the
  // 10 s scrape interval most sites use (and ten samples at the agent's 1 s default).
  absl::Duration restoration_time = absl::Seconds(30);
  // Port data older than this is not used to name an origin or a spread.
  absl::Duration recent = absl::Seconds(60);
  // A storm none of whose ports has been observed for this long resolves (stale = 1).
  absl::Duration stale_after = absl::Minutes(30);
};

class PauseStormDetector {
 public:
  // `topology` and `ports` may be null (then the domain of a port is its node, and netdevs are
  // named as such). Both must outlive the detector.
  PauseStormDetector(PauseStormOptions options = {}, const Topology* topology = nullptr,
                     const PortDirectory* ports = nullptr);
  ~PauseStormDetector();

  void ObserveCounter(const CounterStep& step, std::vector<Finding>& out);
  // Resolves storms whose ports all went silent (each call); forgets ports silent for stale_after
  // (once per sweep interval, clamp(stale_after / 30, 1 s, 10 s)).
  void Advance(absl::Time now, std::vector<Finding>& out);
  // Takes over an open pause_storm incident after a restart (see LinkDetector::Restore).
  bool Restore(const Finding& open);
  // Replaces the topology (a reloaded --topology file): domains are recomputed.
  void SetTopology(const Topology* topology);

  static bool Uses(absl::string_view source, absl::string_view counter);
  // What this detector reads in a series (its priority as declared), for CounterStep::prepared
  // (-1: not used).
  static int32_t Prepare(absl::string_view source, absl::string_view counter, int32_t priority);

  size_t ports() const { return ports_.size(); }
  size_t open_storms() const { return storms_.size(); }

 private:
  struct Dir;
  struct Prio;
  struct Port;
  struct Storm;
  Port& GetPort(const CounterStep& step);
  std::string DomainOf(const Port& p) const;
  // `known`: the port's Prio for `prio` when the caller has it.
  void Evaluate(Port& port, int prio, absl::Time t, std::vector<Finding>& out,
                const Prio* known = nullptr);
  Port* PickOrigin(const std::string& domain, int prio, absl::Time t) const;
  // Opens a storm on (domain, prio) named after `origin` (null: unknown, `trigger` the port that
  // met the rule), `victim` its inferred spread when not null; emits the finding.
  void Open(const std::string& domain, int prio, Port* origin, Port& trigger, int run, absl::Time t,
            Prio* victim, std::vector<Finding>& out);
  // Inference without a leaf (see the file comment).
  bool Leafless(const Port& p) const;
  bool InWindow(const Prio& victim, absl::Time onset) const;
  bool Sends(const Port& p, int prio, absl::Time t) const;
  absl::Time Onset(const Port& p, int prio) const;
  Storm* InferStorm(const Port& victim, const Prio& vp, absl::Time t);
  Port* InferSender(const Port& victim, const Prio& vp, absl::Time t) const;
  void Join(Storm& s, Prio& vp);
  void MergeUnknown(Storm& s, absl::Time t, std::vector<Finding>& out);
  void Close(Storm& s);
  void Spread(Storm& s, absl::Time t, bool& changed);
  void CheckRestored(Storm& s, absl::Time t, std::vector<Finding>& out);
  Finding Make(const Storm& s, absl::Time at, bool active) const;
  Prio* FindPrio(Port& p, int prio) const;
  bool Idle(const Port& port, const Prio& pp) const;

  PauseStormOptions options_;
  const Topology* topology_;
  const PortDirectory* directory_;
  absl::flat_hash_map<std::string, std::unique_ptr<Port>> ports_;  // node \0 PortId::Key()
  std::map<std::string, std::vector<Port*>> by_domain_;
  absl::Time next_sweep_ = absl::InfinitePast();  // of the stale ports (Advance)
  std::map<std::pair<std::string, int>, std::unique_ptr<Storm>> storms_;  // (domain, prio)
  std::string key_;
  LastPort<Port> last_;
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_PAUSE_STORM_DETECTOR_H_
