#include "analysis/pause_storm_detector.h"

#include <algorithm>
#include <array>
#include <deque>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/compact_time.h"

namespace ringside::analysis {
namespace {

constexpr int kGlobal = 8;  // 802.3x global pause, shown as priority "global"

std::string PrioName(int prio) { return prio == kGlobal ? "global" : absl::StrCat(prio); }

enum class What { kNone, kDuration, kFrames, kStormWarning, kStormError };

struct Parsed {
  What what = What::kNone;
  bool tx = false;
  int prio = -1;
};

Parsed ParseCounter(absl::string_view source, absl::string_view c, int32_t step_prio) {
  Parsed p;
  if (source != "ethtool" || c.size() < 8 || !absl::StrContains(c, "pause")) return p;
  if (c == "tx_pause_storm_warning_events") return {What::kStormWarning, true, -1};
  if (c == "tx_pause_storm_error_events") return {What::kStormError, true, -1};
  const bool tx = absl::StartsWith(c, "tx_");
  if (!tx && !absl::StartsWith(c, "rx_")) return p;
  const absl::string_view prefix = tx ? "tx_prio" : "rx_prio";
  if (int prio = PrioOf(c, prefix, "_pause_duration"); prio >= 0) {
    return {What::kDuration, tx, step_prio >= 0 ? step_prio : prio};
  }
  if (int prio = PrioOf(c, prefix, "_pause"); prio >= 0) {
    return {What::kFrames, tx, step_prio >= 0 ? step_prio : prio};
  }
  if (c == (tx ? "tx_global_pause_duration" : "rx_global_pause_duration")) {
    return {What::kDuration, tx, kGlobal};
  }
  if (c == (tx ? "tx_global_pause" : "rx_global_pause")) return {What::kFrames, tx, kGlobal};
  return p;
}

// CounterStep::prepared: what | tx << 3 | (prio + 2) << 4 (prio is -1 for none, kGlobal, or 0..).
int32_t Encode(const Parsed& p) {
  if (p.what == What::kNone || p.prio < -1 || p.prio > 4095) return -1;  // -1: parse each time
  return static_cast<int32_t>(p.what) | (p.tx ? 8 : 0) | ((p.prio + 2) << 4);
}

Parsed Decode(int32_t v) {
  return {static_cast<What>(v & 7), (v & 8) != 0, (v >> 4) - 2};
}

constexpr absl::string_view kSpread = "spread/";
constexpr absl::string_view kInferred = "inferred_spread/";

}  // namespace

struct PauseStormDetector::Dir {
  // Times and durations in 8 bytes (compact_time.h) and the flags together: a port has a Dir
  // per priority and direction, and 12,500 nodes hold about a million (176 -> 88 bytes each).
  bool has_duration = false;
  bool active = false;  // at or above origin_min_fraction now
  bool paused = false;  // at or above spread_fraction now
  int run = 0;          // consecutive samples at or above storm_fraction
  double fraction = 0;  // of the latest sample
  CompactTime time = absl::InfinitePast();
  CompactTime run_start = absl::InfinitePast();
  CompactTime active_start = absl::InfinitePast();
  CompactTime last_pause = absl::InfinitePast();
  double frames_rate = 0;
  CompactTime frames_time = absl::InfinitePast();
  CompactTime frames_start = absl::InfinitePast();
  CompactDuration interval;  // of the latest duration sample
  CompactTime paused_start = absl::InfinitePast();
};
// One priority of a port. The aggregator's hint for a per-priority series names its Prio (the
// port through `port`), so that the Dir a step updates is prefetched with it.
struct PauseStormDetector::Prio {
  Port* port = nullptr;
  int prio = -1;
  Dir rx, tx;
  Storm* joined = nullptr;  // the storm of another node listing it as inferred spread
};

// What every step reads comes first (the aggregator prefetches the start of a record): the
// priorities' numbers sit inline, so finding a priority reads no Prio but the one wanted.
struct PauseStormDetector::Port {
  absl::Time last_input = absl::InfinitePast();
  absl::Time storm_event_time = absl::InfinitePast();
  int storms = 0;  // storms it belongs to (kept while > 0)
  static constexpr size_t kInlineIds = 12;
  std::array<int16_t, kInlineIds> prio_ids{};  // prios[i].prio, for the first kInlineIds
  std::deque<Prio> prios;  // a deque: hints point into it
  double warning_events = 0;
  double error_events = 0;
  std::string node;
  PortId id;
  std::string domain;
};

struct PauseStormDetector::Storm {
  std::string domain;
  int prio = -1;
  Port* origin = nullptr;
  std::map<std::string, std::string> entity;
  std::vector<Port*> members;  // origin first, then the ports reached
  std::map<std::string, double> spread;
  // "inferred_spread/<node>/<port>" = start offset from the origin's onset (s), for the ports of
  // `spread` inferred without a leaf.
  std::map<std::string, double> inferred;
  absl::Time onset = absl::InfinitePast();  // the origin's pausing started
  absl::Time opened;
  absl::Time last_pause;
  Severity severity = Severity::kWarning;
  int samples = 0;  // consecutive samples that met the rule when it opened
};

PauseStormDetector::PauseStormDetector(PauseStormOptions options, const Topology* topology,
                                       const PortDirectory* ports)
    : options_(options), topology_(topology), directory_(ports) {}

PauseStormDetector::~PauseStormDetector() = default;

bool PauseStormDetector::Uses(absl::string_view source, absl::string_view counter) {
  return ParseCounter(source, counter, -1).what != What::kNone;
}

int32_t PauseStormDetector::Prepare(absl::string_view source, absl::string_view counter,
                                    int32_t priority) {
  return Encode(ParseCounter(source, counter, priority));
}

std::string PauseStormDetector::DomainOf(const Port& p) const {
  if (topology_ != nullptr) {
    std::string leaf = topology_->LeafOf(p.node, p.id.device, p.id.port);
    if (leaf.empty()) {
      std::vector<std::string> leaves = topology_->LeavesOf(p.node);
      if (leaves.size() == 1) leaf = leaves.front();
    }
    if (!leaf.empty()) return absl::StrCat("leaf:", leaf);
  }
  return absl::StrCat("node:", p.node);
}

void PauseStormDetector::SetTopology(const Topology* topology) {
  topology_ = topology;
  by_domain_.clear();
  for (auto& [key, port] : ports_) {
    port->domain = DomainOf(*port);
    by_domain_[port->domain].push_back(port.get());
  }
}

PauseStormDetector::Port& PauseStormDetector::GetPort(const CounterStep& step) {
  if (Port* p = last_.Find(step.port_token, directory_)) return *p;
  key_.assign(step.node.data(), step.node.size());
  key_.push_back('\0');
  AppendPortKey(CanonicalPort(directory_, step.node, step.source, step.device, step.port), key_);
  auto it = ports_.find(key_);
  if (it != ports_.end()) {
    last_.Remember(step.port_token, directory_, it->second.get());
    return *it->second;
  }
  auto port = std::make_unique<Port>();
  port->node = std::string(step.node);
  port->id = ResolvePort(directory_, step.node, step.source, step.device, step.port);
  port->domain = DomainOf(*port);
  Port& ref = *port;
  by_domain_[ref.domain].push_back(&ref);
  ports_.emplace(key_, std::move(port));
  last_.Remember(step.port_token, directory_, &ref);
  return ref;
}

PauseStormDetector::Prio* PauseStormDetector::FindPrio(Port& p, int prio) const {
  if (prio >= 0) {
    const size_t inline_ids = std::min(p.prios.size(), Port::kInlineIds);
    for (size_t i = 0; i < inline_ids; ++i) {
      if (p.prio_ids[i] == prio) return &p.prios[i];
    }
    for (size_t i = inline_ids; i < p.prios.size(); ++i) {
      if (p.prios[i].prio == prio) return &p.prios[i];
    }
    return nullptr;
  }
  // Any priority: the one sending pauses the most.
  Prio* best = nullptr;
  for (Prio& x : p.prios) {
    if (best == nullptr || x.tx.fraction > best->tx.fraction) best = &x;
  }
  return best;
}

void PauseStormDetector::ObserveCounter(const CounterStep& step, std::vector<Finding>& out) {
  const Parsed what = step.prepared >= 0 ? Decode(step.prepared)
                                         : ParseCounter(step.source, step.counter, step.priority);
  if (what.what == What::kNone) return;
  if (step.hint != nullptr) step.hint->quiet = false;  // set below where a repeat changes nothing
  const bool per_prio = what.what == What::kDuration || what.what == What::kFrames;
  // A per-priority series' hint names its Prio; a storm-event series' hint its Port.
  const bool valid = last_.Valid(step.hint, directory_);
  Prio* hinted = per_prio && valid ? static_cast<Prio*>(step.hint->record) : nullptr;
  Port* hinted_port = !per_prio && valid ? static_cast<Port*>(step.hint->record) : nullptr;
  Port& port = hinted != nullptr        ? *hinted->port
               : hinted_port != nullptr ? *hinted_port
                                        : GetPort(step);
  port.last_input = std::max(port.last_input, step.time);
  const absl::Time t = step.time;
  if (!per_prio) {
    if (hinted_port == nullptr && step.hint != nullptr) last_.Store(step.hint, &port);
    if (!DeltaUsable(step.kind) || step.delta == 0 || !options_.storm_events) {
      // A repeat of a normal Δ 0 step would stop here too.
      if (step.hint != nullptr) {
        step.hint->quiet = step.kind == DeltaKind::kNormal && step.delta == 0;
      }
      return;
    }
    (what.what == What::kStormError ? port.error_events : port.warning_events) +=
        static_cast<double>(step.delta);
    port.storm_event_time = t;
    Prio* pp = FindPrio(port, -1);
    const int prio = pp != nullptr && pp->tx.fraction > 0 ? pp->prio : -1;
    if (pp != nullptr) pp->tx.last_pause = t;
    Evaluate(port, prio, t, out);
    return;
  }
  Prio* pp = hinted != nullptr ? hinted : FindPrio(port, what.prio);
  if (pp == nullptr) {
    if (port.prios.size() < Port::kInlineIds) {
      port.prio_ids[port.prios.size()] = static_cast<int16_t>(what.prio);
    }
    port.prios.emplace_back();
    pp = &port.prios.back();
    pp->port = &port;
    pp->prio = what.prio;
  }
  if (hinted == nullptr && step.hint != nullptr) last_.Store(step.hint, pp);
  Dir& d = what.tx ? pp->tx : pp->rx;
  const double interval_s = FastSeconds(step.interval);
  if (what.what == What::kFrames) {
    if (!DeltaUsable(step.kind) || interval_s <= 0) return;
    const double rate = static_cast<double>(step.delta) / interval_s;
    if (rate > 0 && d.frames_rate <= 0) d.frames_start = t - step.interval;
    if (rate <= 0) d.frames_start = absl::InfinitePast();
    d.frames_rate = rate;
    d.frames_time = t;
    if (rate > 0 && !d.has_duration) d.last_pause = t;
    if (!d.has_duration) Evaluate(port, pp->prio, t, out, pp);
    if (step.hint != nullptr && step.kind == DeltaKind::kNormal && step.delta == 0) {
      step.hint->quiet = Idle(port, *pp);
    }
    return;
  }
  d.has_duration = true;
  d.time = t;
  if (!DeltaUsable(step.kind) || interval_s <= 0) {
    // A reset or garbage: nothing is known about this sample. Start over.
    d.run = 0;
    d.active = false;
    d.paused = false;
    d.fraction = 0;
    return;
  }
  const double f = std::min(1.0, static_cast<double>(step.delta) / (interval_s * 1e6));
  d.fraction = f;
  d.interval = step.interval;
  if (f >= options_.spread_fraction) {
    if (!d.paused) d.paused_start = t - step.interval;
    d.paused = true;
  } else {
    d.paused = false;
  }
  if (f >= options_.storm_fraction) {
    if (d.run == 0) d.run_start = t - step.interval;
    ++d.run;
  } else {
    d.run = 0;
  }
  if (f >= options_.origin_min_fraction) {
    if (!d.active) d.active_start = t - step.interval;
    d.active = true;
  } else {
    d.active = false;
  }
  if (f >= options_.quiet_fraction) d.last_pause = t;
  Evaluate(port, pp->prio, t, out, pp);
  if (step.hint != nullptr && step.kind == DeltaKind::kNormal && step.delta == 0 &&
      options_.quiet_fraction > 0) {
    step.hint->quiet = Idle(port, *pp);
  }
}

// After a normal Δ 0 step of one of `port`'s series on priority `pp` (so its direction is at
// fraction 0, run 0, not active, or at 0 frames/s): whether another such step could change
// anything but the times the series was last seen. Not while the port is in a storm (its samples
// time the restoration) or a storm is open on its domain and priority (every step evaluates it),
// nor when the other direction's run could meet the storm rule.
bool PauseStormDetector::Idle(const Port& port, const Prio& pp) const {
  if (port.storms > 0 || std::max(pp.rx.run, pp.tx.run) >= options_.storm_samples) return false;
  // A storm event makes every step of the port at its time evaluate its priority.
  if (port.warning_events > 0 || port.error_events > 0) return false;
  return storms_.empty() || storms_.count(std::make_pair(port.domain, pp.prio)) == 0;
}

PauseStormDetector::Port* PauseStormDetector::PickOrigin(const std::string& domain, int prio,
                                                         absl::Time t) const {
  auto it = by_domain_.find(domain);
  if (it == by_domain_.end()) return nullptr;
  const absl::Time since = t - options_.recent;
  Port* best = nullptr;
  absl::Time best_onset = absl::InfiniteFuture();
  double best_fraction = -1;
  // Storm events name the sender outright: the earliest of them.
  for (Port* p : it->second) {
    if (p->storm_event_time >= since && p->storm_event_time < best_onset) {
      best = p;
      best_onset = p->storm_event_time;
    }
  }
  if (best != nullptr) return best;
  for (Port* p : it->second) {
    Prio* pp = FindPrio(*p, prio);
    if (pp == nullptr) continue;
    const Dir& tx = pp->tx;
    absl::Time onset;
    if (tx.has_duration) {
      if (!tx.active || tx.time < since) continue;
      onset = tx.active_start;
    } else {
      if (tx.frames_rate <= 0 || tx.frames_time < since) continue;
      onset = tx.frames_start;
    }
    if (onset < best_onset || (onset == best_onset && tx.fraction > best_fraction)) {
      best = p;
      best_onset = onset;
      best_fraction = tx.fraction;
    }
  }
  return best;
}

void PauseStormDetector::Spread(Storm& s, absl::Time t, bool& changed) {
  auto it = by_domain_.find(s.domain);
  if (it == by_domain_.end()) return;
  const absl::Time since = t - options_.recent;
  for (Port* p : it->second) {
    if (p == s.origin) continue;
    Prio* pp = FindPrio(*p, s.prio);
    if (pp == nullptr || pp->rx.time < since) continue;
    const std::string key = absl::StrCat(kSpread, p->node, "/", p->id.Describe());
    auto sp = s.spread.find(key);
    if (sp != s.spread.end()) {
      sp->second = std::max(sp->second, pp->rx.fraction);
      if (std::find(s.members.begin(), s.members.end(), p) == s.members.end()) {
        s.members.push_back(p);  // listed before a restart
        ++p->storms;
      }
      continue;
    }
    if (pp->rx.fraction < options_.spread_fraction) continue;
    s.spread[key] = pp->rx.fraction;
    s.members.push_back(p);
    ++p->storms;
    changed = true;
  }
}

Finding PauseStormDetector::Make(const Storm& s, absl::Time at, bool active) const {
  Finding f;
  f.kind = IncidentKind::kPauseStorm;
  f.entity = s.entity;
  f.at = at;
  f.active = active;
  f.severity = s.severity;
  std::vector<std::string> reached;
  for (const auto& [k, v] : s.spread) {
    f.evidence[k] = v;
    const std::string name = k.substr(kSpread.size());
    auto inf = s.inferred.find(absl::StrCat(kInferred, name));
    if (inf == s.inferred.end()) {
      reached.push_back(absl::StrFormat("%s (paused %.0f%%)", name, 100 * v));
    } else {
      reached.push_back(absl::StrFormat("%s (paused %.0f%%, from %+.0f s; inferred, no leaf)", name,
                                        100 * v, inf->second));
    }
  }
  for (const auto& [k, v] : s.inferred) f.evidence[k] = v;
  f.evidence["spread_ports"] = static_cast<double>(s.spread.size());
  if (!s.inferred.empty())
    f.evidence["inferred_spread_ports"] = static_cast<double>(s.inferred.size());
  f.evidence["consecutive_samples"] = s.samples;
  std::string from;
  if (s.origin != nullptr) {
    const Port& o = *s.origin;
    for (const Prio& x : o.prios) {
      if (x.prio != s.prio && s.prio >= 0) continue;
      f.evidence["origin_tx_pause_fraction"] = x.tx.fraction;
      f.evidence["origin_rx_pause_fraction"] = x.rx.fraction;
      if (x.tx.frames_rate > 0) f.evidence["origin_tx_pause_frames_per_s"] = x.tx.frames_rate;
      break;
    }
    f.evidence["storm_warning_events"] = o.warning_events;
    f.evidence["storm_error_events"] = o.error_events;
    from = absl::StrFormat("%s %s sends pauses (tx paused %.0f%%)", o.node, o.id.Describe(),
                           100 * f.evidence["origin_tx_pause_fraction"]);
  } else {
    std::string where = s.domain.substr(s.domain.find(':') + 1);
    if (absl::StartsWith(s.domain, "leaf:") && topology_ != nullptr) {
      where = topology_->LeafName(where);
    }
    from = absl::StrCat("origin not in view (", where, ")");
  }
  f.summary = absl::StrCat("PFC pause storm on priority ", PrioName(s.prio), ": ", from,
                           reached.empty() ? "" : "; reaching ", absl::StrJoin(reached, ", "));
  return f;
}

void PauseStormDetector::Evaluate(Port& port, int prio, absl::Time t, std::vector<Finding>& out,
                                  const Prio* known) {
  const bool event = port.storm_event_time == t;
  // The common case, no storm anywhere and this port not meeting the rule: decided without
  // building the (domain, priority) key.
  if (storms_.empty() && !event) {
    const Prio* pp = known != nullptr && known->prio == prio ? known
                     : prio >= 0 || !port.prios.empty() ? FindPrio(port, prio)
                                                        : nullptr;
    if ((pp == nullptr ? 0 : std::max(pp->rx.run, pp->tx.run)) < options_.storm_samples) return;
  }
  const auto key = std::make_pair(port.domain, prio);
  auto it = storms_.find(key);
  if (it == storms_.end()) {
    Prio* pp = prio >= 0 || !port.prios.empty() ? FindPrio(port, prio) : nullptr;
    if (pp != nullptr && prio >= 0 && pp->joined != nullptr && !event) {
      // The inferred spread of a storm on another node: its samples time that storm. (A storm
      // event of its own makes it a sender: its own storm, below.)
      Storm& j = *pp->joined;
      const std::string k = absl::StrCat(kSpread, port.node, "/", port.id.Describe());
      if (auto sp = j.spread.find(k); sp != j.spread.end()) {
        sp->second = std::max(sp->second, pp->rx.fraction);
      }
      CheckRestored(j, t, out);
      return;
    }
    if (pp != nullptr && prio >= 0 && !storms_.empty() && pp->rx.paused && Leafless(port) &&
        options_.infer_samples > 0) {
      if (Storm* s = InferStorm(port, *pp, t);
          s != nullptr && PickOrigin(port.domain, prio, t) == nullptr) {
        const bool listed =
            s->spread.count(absl::StrCat(kSpread, port.node, "/", port.id.Describe())) > 0;
        Join(*s, *pp);
        if (!listed) {  // new to the storm (not one listed before a restart)
          s->severity = Severity::kCritical;
          out.push_back(Make(*s, t, true));
        }
        return;
      }
    }
    const int run = pp == nullptr ? 0 : std::max(pp->rx.run, pp->tx.run);
    if (!event && run < options_.storm_samples) return;
    Port* origin = event ? &port : PickOrigin(port.domain, prio, t);
    if (origin == nullptr && pp != nullptr && prio >= 0 && pp->rx.paused && Leafless(port) &&
        options_.infer_samples > 0) {
      // Before naming no origin: a sender on another leafless node whose storm is not open yet.
      if (Port* sender = InferSender(port, *pp, t)) {
        Open(sender->domain, prio, sender, *sender, run, t, pp, out);
        return;
      }
    }
    Open(port.domain, prio, origin, port, run, t, nullptr, out);
    return;
  }
  Storm& s = *it->second;
  bool changed = false;
  Spread(s, t, changed);
  if (changed) {  // the storm reached another port
    s.severity = Severity::kCritical;
    out.push_back(Make(s, t, true));
  }
  CheckRestored(s, t, out);
}

void PauseStormDetector::Open(const std::string& domain, int prio, Port* origin, Port& trigger,
                              int run, absl::Time t, Prio* victim, std::vector<Finding>& out) {
  auto s = std::make_unique<Storm>();
  s->domain = domain;
  s->prio = prio;
  s->origin = origin;
  s->opened = t;
  s->last_pause = t;
  s->samples = run;
  if (s->origin != nullptr) {
    s->entity = s->origin->id.Entity(s->origin->node);
    s->members.push_back(s->origin);
    ++s->origin->storms;
    s->onset = Onset(*s->origin, prio);
  } else {
    const size_t colon = domain.find(':');
    s->entity[domain.substr(0, colon)] = domain.substr(colon + 1);
    s->entity["origin"] = "unknown";
  }
  if (prio >= 0) s->entity["priority"] = PrioName(prio);
  bool changed = false;
  Spread(*s, t, changed);
  if (s->origin == nullptr && s->members.empty()) {  // the port that met the rule, at least
    s->members.push_back(&trigger);
    ++trigger.storms;
  }
  if (victim != nullptr) Join(*s, *victim);
  Storm& ref = *s;
  storms_.emplace(std::make_pair(domain, prio), std::move(s));
  if (ref.origin != nullptr && prio >= 0 && options_.infer_samples > 0 && Leafless(*ref.origin)) {
    MergeUnknown(ref, t, out);
  }
  double top = 0;
  for (Port* m : ref.members) {
    if (Prio* mp = FindPrio(*m, prio)) top = std::max({top, mp->rx.fraction, mp->tx.fraction});
  }
  ref.severity =
      (top >= 0.9 || !ref.spread.empty() || (ref.origin != nullptr && ref.origin->error_events > 0))
          ? Severity::kCritical
          : Severity::kWarning;
  out.push_back(Make(ref, t, true));
}

bool PauseStormDetector::Leafless(const Port& p) const {
  return absl::StartsWith(p.domain, "node:");
}

bool PauseStormDetector::InWindow(const Prio& victim, absl::Time onset) const {
  if (onset == absl::InfinitePast() || victim.rx.paused_start == absl::InfinitePast()) return false;
  return absl::AbsDuration(victim.rx.paused_start - onset) <=
         options_.infer_samples * absl::Duration(victim.rx.interval);
}

bool PauseStormDetector::Sends(const Port& p, int prio, absl::Time t) const {
  const absl::Time since = t - options_.recent;
  if (p.storm_event_time >= since) return true;
  const Prio* pp = FindPrio(const_cast<Port&>(p), prio);
  if (pp == nullptr) return false;
  const Dir& tx = pp->tx;
  if (tx.has_duration) return tx.active && tx.time >= since;
  return tx.frames_rate > 0 && tx.frames_time >= since;
}

absl::Time PauseStormDetector::Onset(const Port& p, int prio) const {
  absl::Time onset = absl::InfiniteFuture();
  if (const Prio* pp = FindPrio(const_cast<Port&>(p), prio)) {
    const Dir& tx = pp->tx;
    if (tx.has_duration && tx.active) onset = tx.active_start;
    if (!tx.has_duration && tx.frames_rate > 0) onset = tx.frames_start;
  }
  if (p.storm_event_time != absl::InfinitePast()) onset = std::min(onset, p.storm_event_time);
  return onset == absl::InfiniteFuture() ? absl::InfinitePast() : onset;
}

PauseStormDetector::Storm* PauseStormDetector::InferStorm(const Port& victim, const Prio& vp,
                                                          absl::Time t) {
  const std::string inferred_key = absl::StrCat(kInferred, victim.node, "/", victim.id.Describe());
  Storm* best = nullptr;
  absl::Duration best_offset = absl::InfiniteDuration();
  for (auto& [key, s] : storms_) {
    if (key.second != vp.prio || s->origin == nullptr || key.first == victim.domain ||
        !absl::StartsWith(key.first, "node:")) {
      continue;
    }
    if (s->inferred.count(inferred_key)) return s.get();  // listed before a restart
    if (s->onset == absl::InfinitePast()) s->onset = Onset(*s->origin, vp.prio);  // restored
    if (!Sends(*s->origin, vp.prio, t) || !InWindow(vp, s->onset)) continue;
    const absl::Duration offset = absl::AbsDuration(vp.rx.paused_start - s->onset);
    if (offset < best_offset) {
      best = s.get();
      best_offset = offset;
    }
  }
  return best;
}

PauseStormDetector::Port* PauseStormDetector::InferSender(const Port& victim, const Prio& vp,
                                                          absl::Time t) const {
  Port* best = nullptr;
  absl::Time best_onset = absl::InfiniteFuture();
  for (const auto& [domain, ports] : by_domain_) {
    if (domain == victim.domain || !absl::StartsWith(domain, "node:")) continue;
    if (storms_.count(std::make_pair(domain, vp.prio))) continue;  // InferStorm's, or unknown
    Port* sender = PickOrigin(domain, vp.prio, t);
    if (sender == nullptr || !Sends(*sender, vp.prio, t)) continue;
    const absl::Time onset = Onset(*sender, vp.prio);
    if (!InWindow(vp, onset) || onset >= best_onset) continue;
    best = sender;
    best_onset = onset;
  }
  return best;
}

void PauseStormDetector::Join(Storm& s, Prio& vp) {
  Port& p = *vp.port;
  const std::string name = absl::StrCat(p.node, "/", p.id.Describe());
  double& fraction = s.spread[absl::StrCat(kSpread, name)];
  fraction = std::max(fraction, vp.rx.fraction);
  const std::string k = absl::StrCat(kInferred, name);
  if (!s.inferred.count(k)) {
    s.inferred[k] =
        s.onset == absl::InfinitePast() ? 0 : absl::ToDoubleSeconds(vp.rx.paused_start - s.onset);
  }
  if (std::find(s.members.begin(), s.members.end(), &p) == s.members.end()) {
    s.members.push_back(&p);
    ++p.storms;
  }
  vp.joined = &s;
}

void PauseStormDetector::MergeUnknown(Storm& s, absl::Time t, std::vector<Finding>& out) {
  for (auto it = storms_.begin(); it != storms_.end();) {
    Storm& u = *it->second;
    if (&u == &s || u.origin != nullptr || u.prio != s.prio || u.domain == s.domain ||
        !absl::StartsWith(u.domain, "node:")) {
      ++it;
      continue;
    }
    std::vector<Prio*> victims;
    bool all = !u.members.empty();
    for (Port* m : u.members) {
      Prio* mp = FindPrio(*m, u.prio);
      if (mp == nullptr || !InWindow(*mp, s.onset)) {
        all = false;
        break;
      }
      victims.push_back(mp);
    }
    if (!all) {
      ++it;
      continue;
    }
    Finding f = Make(u, t, false);
    f.evidence["merged"] = 1;
    const Port& o = *s.origin;
    f.summary =
        absl::StrCat("PFC pause storm on priority ", PrioName(u.prio), " on ",
                     u.domain.substr(u.domain.find(':') + 1), " is part of the storm sent by ",
                     o.node, " ", o.id.Describe(), " (inferred: it started within ",
                     options_.infer_samples, " samples of it); followed there");
    out.push_back(std::move(f));
    Close(u);
    it = storms_.erase(it);
    for (Prio* v : victims) Join(s, *v);
  }
}

void PauseStormDetector::Close(Storm& s) {
  for (Port* m : s.members) {
    --m->storms;
    if (Prio* mp = FindPrio(*m, s.prio); mp != nullptr && mp->joined == &s) mp->joined = nullptr;
  }
}

void PauseStormDetector::CheckRestored(Storm& s, absl::Time t, std::vector<Finding>& out) {
  absl::Time last_pause = absl::InfinitePast();
  absl::Time latest = absl::InfinitePast();
  for (Port* m : s.members) {
    Prio* pp = FindPrio(*m, s.prio);
    if (pp != nullptr) {
      last_pause = std::max<absl::Time>({last_pause, pp->rx.last_pause, pp->tx.last_pause});
      latest = std::max<absl::Time>(
          {latest, pp->rx.time, pp->tx.time, pp->rx.frames_time, pp->tx.frames_time});
    }
    last_pause = std::max(last_pause, m->storm_event_time);
  }
  s.last_pause = std::max(s.last_pause, last_pause);
  // Every member must have been sampled quiet for the restoration time.
  for (Port* m : s.members) {
    Prio* pp = FindPrio(*m, s.prio);
    if (pp == nullptr) continue;
    const absl::Time seen =
        std::max<absl::Time>({pp->rx.time, pp->tx.time, pp->rx.frames_time, pp->tx.frames_time});
    if (seen < t - options_.recent) continue;  // gone quiet by going away: others decide
    if (seen - s.last_pause < options_.restoration_time) return;
  }
  if (t - s.last_pause < options_.restoration_time) return;
  Finding f = Make(s, t, false);
  f.evidence["quiet_s"] = absl::ToDoubleSeconds(t - s.last_pause);
  f.summary =
      absl::StrCat("PFC pause storm on priority ", PrioName(s.prio), " is over: no pause for ",
                   absl::FormatDuration(options_.restoration_time));
  out.push_back(std::move(f));
  Close(s);
  storms_.erase(std::make_pair(s.domain, s.prio));
}

void PauseStormDetector::Advance(absl::Time now, std::vector<Finding>& out) {
  for (auto it = storms_.begin(); it != storms_.end();) {
    Storm& s = *it->second;
    absl::Time seen = absl::InfinitePast();
    for (Port* m : s.members) seen = std::max(seen, m->last_input);
    if (seen + options_.stale_after <= now) {
      Finding f = Make(s, now, false);
      f.evidence["stale"] = 1;
      out.push_back(std::move(f));
      Close(s);
      it = storms_.erase(it);
      continue;
    }
    ++it;
  }
  // Forgetting stale ports is a pass over every port's record: once per sweep interval
  // (clamp(stale_after / 30, 1 s, 10 s)), not every call; also when the clock went back.
  const absl::Duration interval =
      std::clamp(options_.stale_after / 30, absl::Seconds(1), absl::Seconds(10));
  if (now < next_sweep_ && next_sweep_ - now <= interval) return;
  next_sweep_ = now + interval;
  for (auto it = ports_.begin(); it != ports_.end();) {
    Port* p = it->second.get();
    if (p->storms <= 0 && p->last_input + options_.stale_after <= now) {
      std::vector<Port*>& v = by_domain_[p->domain];
      v.erase(std::remove(v.begin(), v.end(), p), v.end());
      last_.Clear();
      ports_.erase(it++);
      continue;
    }
    ++it;
  }
}

bool PauseStormDetector::Restore(const Finding& open) {
  if (open.kind != IncidentKind::kPauseStorm) return false;
  auto get = [&](const char* k) -> std::string {
    auto it = open.entity.find(k);
    return it == open.entity.end() ? std::string() : it->second;
  };
  int prio = -1;
  const std::string p = get("priority");
  if (p == "global") {
    prio = kGlobal;
  } else if (!p.empty() && !absl::SimpleAtoi(p, &prio)) {
    prio = -1;
  }
  auto s = std::make_unique<Storm>();
  s->prio = prio;
  s->entity = open.entity;
  s->opened = open.at;
  s->last_pause = open.at;
  s->severity = open.severity;
  for (const auto& [k, v] : open.evidence) {
    if (absl::StartsWith(k, kSpread)) s->spread[k] = v;
    if (absl::StartsWith(k, kInferred)) s->inferred[k] = v;
  }
  const std::string node = get("node");
  if (get("origin") == "unknown") {
    s->domain =
        get("leaf").empty() ? absl::StrCat("node:", node) : absl::StrCat("leaf:", get("leaf"));
  } else {
    if (node.empty()) return false;
    // The step's fields are views: the strings they name must outlive it (get() returns copies).
    const std::string rdma_device = get("device");
    const bool rdma = !rdma_device.empty();
    const std::string device = rdma ? rdma_device : get("netdev");
    const std::string port = rdma ? get("port") : std::string();
    CounterStep step;
    step.node = node;
    step.source = rdma ? "infiniband" : "ethtool";
    step.device = device;
    step.port = port;
    Port& origin = GetPort(step);
    origin.last_input = std::max(origin.last_input, open.at);
    s->origin = &origin;
    s->domain = origin.domain;
    s->members.push_back(&origin);
    ++origin.storms;
  }
  const auto key = std::make_pair(s->domain, prio);
  if (storms_.count(key)) return true;
  storms_.emplace(key, std::move(s));
  return true;
}

}  // namespace ringside::analysis
