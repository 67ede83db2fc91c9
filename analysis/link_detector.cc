#include "analysis/link_detector.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/link_detector_internal.h"

namespace ringside::analysis {

using namespace link_internal;  // NOLINT: this file's own helpers

LinkDetector::LinkDetector(LinkOptions options, const PortDirectory* ports)
    : options_(options), ports_(ports) {}

LinkDetector::~LinkDetector() = default;

bool LinkDetector::Uses(absl::string_view source, absl::string_view counter) {
  return Classify(source, counter) != kNone;
}

int32_t LinkDetector::Prepare(absl::string_view source, absl::string_view counter) {
  const Code code = Classify(source, counter);
  return code == kNone ? -1 : static_cast<int32_t>(code);
}

LinkDetector::Link& LinkDetector::GetLink(absl::string_view node, absl::string_view source,
                                          absl::string_view device, absl::string_view port,
                                          uint64_t token, RecordHint* hint) {
  if (Link* l = last_.Find(token, ports_, hint)) return *l;
  Link& found = FindOrAddLink(node, source, device, port);
  last_.Remember(token, ports_, &found, hint);
  return found;
}

LinkDetector::Link& LinkDetector::FindOrAddLink(absl::string_view node, absl::string_view source,
                                                absl::string_view device, absl::string_view port) {
  key_.assign(node.data(), node.size());
  key_.push_back('\0');
  AppendPortKey(CanonicalPort(ports_, node, source, device, port), key_);
  auto it = links_.find(key_);
  if (it != links_.end()) return *it->second;
  auto link = std::make_unique<Link>();
  link->key = key_;
  link->node = absl::string_view(link->key).substr(0, node.size());
  link->id = ResolvePort(ports_, node, source, device, port);
  Link& ref = *link;
  const absl::string_view key = link->key;
  links_.emplace(key, std::move(link));
  return ref;
}

Finding LinkDetector::Make(const Link& l, IncidentKind kind, absl::Time at, bool active) const {
  Finding f;
  f.kind = kind;
  f.entity = l.entity.Get(l.id, l.node);
  f.at = at;
  f.active = active;
  f.severity = Severity::kCritical;
  return f;
}

int LinkDetector::CompletedInWindow(const Link& l, absl::Time now) const {
  int n = 0;
  for (const Down& d : l.downs) {
    if (d.status == Down::kCompleted && d.at > now - options_.flap_window) ++n;
  }
  return n;
}

// --- link_down and link_flapping -------------------------------------------------------------

void LinkDetector::Transition(Link& l, LinkState to, absl::Time lo, absl::Time hi, uint16_t witness,
                              absl::Time at, const char* how, std::vector<Finding>& out) {
  if (to == LinkState::kUnknown || to == l.state) return;
  const LinkState from = l.state;
  l.state = to;
  l.state_time = std::max<absl::Time>(l.state_time, at);
  if (to == LinkState::kUp) {
    l.was_up = true;
    if (from != LinkState::kDown) return;
    for (Down& d : l.downs) {
      if (d.status == Down::kOpen || (d.status == Down::kPending && d.hi <= at)) {
        d.status = Down::kCompleted;
        d.up_at = at;
      }
    }
    l.last_transition = std::max<absl::Time>(l.last_transition, at);
    if (l.down_open) {
      l.down_open = false;
      Finding f = Make(l, IncidentKind::kLinkDown, at, false);
      f.summary = absl::StrCat(l.id.Describe(), " on ", l.node, " is up again (", how, ")");
      out.push_back(std::move(f));
    }
    CompleteCycles(l, at, out);
    return;
  }
  // Down.
  if (from == LinkState::kUnknown && !l.was_up) return;  // first seen down: an unused port
  Down* claimed = nullptr;
  for (auto it = l.downs.rbegin(); it != l.downs.rend(); ++it) {
    if (it->status == Down::kPending && !(it->witnesses & witness) && it->hi >= lo &&
        it->lo <= hi) {
      claimed = &*it;
      break;
    }
  }
  if (claimed == nullptr) {
    l.downs.push_back(Down{lo, hi, at, absl::InfinitePast(), 0, Down::kOpen});
    claimed = &l.downs.back();
    Attend(l);
  }
  claimed->witnesses |= witness;
  claimed->status = Down::kOpen;
  claimed->seen = true;
  if (witness & kWEvents) claimed->at = at;
  bool completed = false;
  for (Down& d : l.downs) {  // counter-only downs before this one were whole cycles
    if (&d != claimed && d.status == Down::kPending && d.hi <= hi) {
      d.status = Down::kCompleted;
      d.up_at = at;
      completed = true;
    }
  }
  l.last_transition = std::max<absl::Time>(l.last_transition, at);
  if (!l.down_open && !l.flapping_open) {
    l.down_open = true;
    claimed->reported = true;
    Finding f = Make(l, IncidentKind::kLinkDown, at, true);
    f.evidence["via_event"] = (witness & kWEvents) ? 1 : 0;
    f.evidence["cycles_in_window"] = CompletedInWindow(l, at);
    f.summary = absl::StrCat(l.id.Describe(), " on ", l.node, " went down (", how, ")");
    out.push_back(std::move(f));
  }
  if (completed) CompleteCycles(l, at, out);
}

void LinkDetector::ObserveDowns(Link& l, uint32_t n, absl::Time lo, absl::Time hi, uint16_t witness,
                                absl::Time now, std::vector<Finding>& out) {
  if (n == 0) return;
  uint32_t claimed = 0;
  for (Down& d : l.downs) {
    if (claimed == n) break;
    if ((d.witnesses & witness) || d.hi < lo || d.lo > hi) continue;
    d.witnesses |= witness;
    if (std::max<absl::Time>(d.lo, lo) <= std::min<absl::Time>(d.hi, hi)) {
      d.lo = std::max<absl::Time>(d.lo, lo);
      d.hi = std::min<absl::Time>(d.hi, hi);
    }
    ++claimed;
  }
  const uint32_t extra = n - claimed;
  if (extra == 0) return;
  // The state at the end of the interval is known (or there is no state to wait for): the downs
  // nobody else saw were whole cycles. Otherwise they wait for the next state sample.
  const bool confirmed = !l.has_state_source || l.sample_time >= hi || l.state_time >= hi;
  const uint32_t keep = std::min<uint32_t>(extra, kMaxDowns);
  l.flap_cycles_total += extra - keep;  // an absurd count: keep the records bounded
  for (uint32_t i = 0; i < keep; ++i) {
    Down d{
        lo, hi, hi, absl::InfinitePast(), witness, confirmed ? Down::kCompleted : Down::kPending};
    if (confirmed) d.up_at = hi;
    l.downs.push_back(d);
  }
  if (keep > 0) Attend(l);
  l.last_transition = std::max<absl::Time>(l.last_transition, hi);
  if (confirmed) CompleteCycles(l, now, out);
}

void LinkDetector::Confirm(Link& l, absl::Time t, std::vector<Finding>& out) {
  bool any = false;
  for (Down& d : l.downs) {
    if (d.status == Down::kPending && d.hi <= t && l.state != LinkState::kUnknown) {
      d.status = Down::kCompleted;
      d.up_at = t;
      any = true;
    }
  }
  if (any) CompleteCycles(l, t, out);
}

void LinkDetector::CompleteCycles(Link& l, absl::Time now, std::vector<Finding>& out) {
  // Forget what can no longer count.
  size_t forget = 0;
  while (forget < l.downs.size() && l.downs[forget].status == Down::kCompleted &&
         l.downs[forget].at <= now - options_.flap_window) {
    ++forget;
  }
  forget = std::max(forget, l.downs.size() > kMaxDowns ? l.downs.size() - kMaxDowns : 0);
  l.downs.erase(l.downs.begin(), l.downs.begin() + static_cast<std::ptrdiff_t>(forget));
  const int cycles = CompletedInWindow(l, now);
  if (!l.flapping_open && cycles >= options_.flap_cycles) {
    l.flapping_open = true;
    Attend(l);
    l.flapping_reported_cycles = cycles;
    int via_counters = 0, via_events = 0;
    for (Down& d : l.downs) {
      if (d.status != Down::kCompleted) continue;
      d.reported = true;
      if (d.witnesses & kWEvents) ++via_events;
      if ((d.witnesses & kWCounters) && !(d.witnesses & (kWEvents | kWState))) ++via_counters;
    }
    Finding f = Make(l, IncidentKind::kLinkFlapping, now, true);
    f.evidence["cycles_in_window"] = cycles;
    f.evidence["window_s"] = absl::ToDoubleSeconds(options_.flap_window);
    f.evidence["cycles_seen_by_events"] = via_events;
    f.evidence["cycles_seen_only_by_counters"] = via_counters;
    f.summary = absl::StrFormat("%s on %s went down and up %d times in %s", l.id.Describe(), l.node,
                                cycles, absl::FormatDuration(options_.flap_window));
    out.push_back(std::move(f));
    return;
  }
  if (l.flapping_open) {
    for (Down& d : l.downs) {
      if (d.status == Down::kCompleted) d.reported = true;
    }
    if (cycles >= 2 * l.flapping_reported_cycles) {  // worse: tell (doubling, not every cycle)
      l.flapping_reported_cycles = cycles;
      Finding f = Make(l, IncidentKind::kLinkFlapping, now, true);
      f.evidence["cycles_in_window"] = cycles;
      f.summary = absl::StrFormat("%s on %s went down and up %d times in %s", l.id.Describe(),
                                  l.node, cycles, absl::FormatDuration(options_.flap_window));
      out.push_back(std::move(f));
    }
    return;
  }
  // A cycle only a counter saw (shorter than the sampling interval): one isolated flap.
  for (Down& d : l.downs) {
    if (d.status != Down::kCompleted || d.seen || d.reported) continue;
    d.reported = true;
    if (l.down_open) continue;
    Finding f = Make(l, IncidentKind::kLinkDown, d.hi, true);
    f.evidence["cycles_between_samples"] = 1;
    f.summary = absl::StrCat(l.id.Describe(), " on ", l.node,
                             " went down and came back up between two samples");
    Finding r = f;
    r.active = false;
    r.at = std::max<absl::Time>(d.hi, d.up_at);
    out.push_back(std::move(f));
    out.push_back(std::move(r));
  }
}

void LinkDetector::CheckQuiet(Link& l, absl::Time now, std::vector<Finding>& out) {
  if (!l.flapping_open || now - l.last_transition < options_.flap_quiet) return;
  l.flapping_open = false;
  l.flapping_reported_cycles = 0;
  Finding f = Make(l, IncidentKind::kLinkFlapping, now, false);
  f.evidence["quiet_s"] = absl::ToDoubleSeconds(now - l.last_transition);
  f.summary = absl::StrCat(l.id.Describe(), " on ", l.node, " has not changed state for ",
                           absl::FormatDuration(options_.flap_quiet));
  out.push_back(std::move(f));
  if (l.state == LinkState::kDown && !l.down_open) {  // it stopped flapping down
    l.down_open = true;
    Finding d = Make(l, IncidentKind::kLinkDown, now, true);
    d.summary = absl::StrCat(l.id.Describe(), " on ", l.node, " stopped flapping and is down");
    out.push_back(std::move(d));
  }
}

// --- inputs -----------------------------------------------------------------------------------

void LinkDetector::ObserveCounter(const CounterStep& step, std::vector<Finding>& out) {
  const Code code =
      step.prepared >= 0 ? static_cast<Code>(step.prepared) : Classify(step.source, step.counter);
  if (code == kNone) return;
  Link& l = GetLink(step.node, step.source, step.device, step.port, step.port_token, step.hint);
  l.last_input = std::max<absl::Time>(l.last_input, step.time);
  const bool error = code >= kSymbolError && code <= kNv5Effective;
  // An error series seen before with nothing to look at (not stuck, no errors in its window): a
  // step that counts nothing changes nothing in ObserveError.
  const auto error_idle = [&] {
    const uint32_t bit = uint32_t{1} << code;
    return (l.err_present & bit) != 0 && (l.err_attention & bit) == 0;
  };
  const bool counts_nothing = step.kind == DeltaKind::kNormal && step.delta == 0;
  if (error) {
    if (!(counts_nothing && error_idle())) ObserveError(l, step, code, out);
  } else if ((DeltaUsable(step.kind) || step.kind == DeltaKind::kSaturated) && step.delta > 0) {
    // A saturated step's delta is a lower bound of real downs; a stuck counter adds none.
    const absl::Time lo = step.time - step.interval;
    switch (code) {
      case kLinkDowned:
        ObserveDowns(l, static_cast<uint32_t>(std::min<uint64_t>(step.delta, UINT32_MAX)), lo,
                     step.time, kWLinkDowned, step.time, out);
        break;
      case kCarrierDown:
        ObserveDowns(l, static_cast<uint32_t>(std::min<uint64_t>(step.delta, UINT32_MAX)), lo,
                     step.time, kWCarrierDown, step.time, out);
        break;
      case kLinkDownEventsPhy:
        ObserveDowns(l, static_cast<uint32_t>(std::min<uint64_t>(step.delta, UINT32_MAX)), lo,
                     step.time, kWLinkDownPhy, step.time, out);
        break;
      case kCarrierChanges: {
        // Changes count downs and ups: a down is two changes (the down and the up after it).
        if (l.carrier_residual == 0) l.carrier_residual_since = lo;
        l.carrier_residual += step.delta;
        const uint64_t downs = l.carrier_residual / 2;
        const absl::Time since = l.carrier_residual_since;
        l.carrier_residual %= 2;
        if (l.carrier_residual) l.carrier_residual_since = lo;
        ObserveDowns(l, static_cast<uint32_t>(std::min<uint64_t>(downs, UINT32_MAX)), since,
                     step.time, kWCarrierChanges, step.time, out);
        break;
      }
      default:
        break;
    }
  } else if (step.kind == DeltaKind::kReset) {
    l.carrier_residual = 0;
  }
  CheckQuiet(l, step.time, out);
  CheckClean(l, step.time, out);
  if (step.hint != nullptr) {
    // Another step like this one (normal, Δ 0) would only move last_input: nothing is open for
    // CheckQuiet / CheckClean to resolve, and an error series is idle (RecordHint::quiet).
    step.hint->quiet = counts_nothing && !l.flapping_open && !l.degraded_open &&
                       (!error || error_idle());
  }
}

void LinkDetector::ObserveState(const StateSample& s, std::vector<Finding>& out) {
  const Code code = s.prepared >= 0 ? static_cast<Code>(s.prepared) : Classify(s.source, s.counter);
  if (code == kNone) return;
  Link& l = GetLink(s.node, s.source, s.device, s.port, s.port_token, s.hint);
  l.last_input = std::max<absl::Time>(l.last_input, s.time);
  if (code == kIbRate) {
    l.rate_bits_per_s = s.value * 8;
    return;
  }
  if (code == kNvEffectiveBer) {
    ObserveBer(l, s.time, DecodeBer(s.value), out);
    CheckClean(l, s.time, out);
    return;
  }
  // A counter sent as a gauge tells nothing about the state.
  if (code != kIbState && code != kIbPhysState && code != kOperstate && code != kNvLinkState) return;
  l.has_state_source = true;
  const LinkState st = StateOf(code, s.value);
  bool found = false;
  for (size_t i = 0; i < l.n_series; ++i) {
    Link::Series& x = l.series[i];
    if (x.code == code) {
      if (s.time >= x.time) x = Link::Series{code, st, s.time};
      found = true;
      break;
    }
  }
  if (!found) l.series[l.n_series++] = Link::Series{code, st, s.time};  // one per state code
  if (s.time > l.sample_time) {
    l.prev_sample_time = l.sample_time;
    l.sample_time = s.time;
  }
  if (s.time >= l.state_time) {  // not older than what an event already told
    bool any_down = false, any_up = false;
    for (size_t i = 0; i < l.n_series; ++i) {
      const Link::Series& x = l.series[i];
      if (x.time + options_.state_stale_after < s.time) continue;
      any_down |= x.state == LinkState::kDown;
      any_up |= x.state == LinkState::kUp;
    }
    const LinkState combined = any_down ? LinkState::kDown
                               : any_up ? LinkState::kUp
                                        : LinkState::kUnknown;
    const absl::Time lo = l.prev_sample_time == absl::InfinitePast()
                              ? s.time - options_.state_stale_after
                              : absl::Time(l.prev_sample_time);
    Transition(l, combined, lo, s.time, kWState, s.time, "sample", out);
    Confirm(l, s.time, out);
  }
  CheckQuiet(l, s.time, out);
  CheckClean(l, s.time, out);
}

void LinkDetector::ObserveEvent(const LinkEvent& e, std::vector<Finding>& out) {
  if (e.to == LinkState::kUnknown) return;
  Link& l = GetLink(e.node, e.source, e.device, e.port);
  l.last_input = std::max<absl::Time>(l.last_input, e.time);
  l.has_state_source = true;
  const uint16_t witness = EventWitness(e.source);
  const absl::Time lo = e.time - options_.event_slack;
  const absl::Time hi = e.time + options_.event_slack;
  if (e.time < l.state_time) {
    // Older than the state a sample or event already gave: it can only tell when a down
    // happened, or add a down nobody else saw.
    if (e.to != LinkState::kDown) return;
    for (Down& d : l.downs) {
      if (!(d.witnesses & witness) && d.hi >= lo && d.lo <= hi) {
        d.witnesses |= witness;
        d.at = e.time;
        return;
      }
    }
    Down d{lo, hi, e.time, l.state_time, witness, Down::kCompleted};
    d.seen = true;  // an event: its own link_down time has passed, count it toward flapping only
    l.downs.push_back(d);
    Attend(l);
    std::sort(l.downs.begin(), l.downs.end(),
              [](const Down& a, const Down& b) { return absl::Time(a.at) < absl::Time(b.at); });
    l.last_transition = std::max<absl::Time>(l.last_transition, e.time);
    CompleteCycles(l, e.time, out);
    return;
  }
  if (e.from == LinkState::kUp) l.was_up = true;
  if (e.from == LinkState::kUp && l.state == LinkState::kUnknown) l.state = LinkState::kUp;
  Transition(l, e.to, lo, hi, witness, e.time,
             e.source == "netlink" ? "netlink event"
             : e.source == "verbs" ? "verbs event"
             : e.source == "sysfs" ? "port state poll"
                                   : "event",
             out);
  if (e.to == LinkState::kUp) Confirm(l, e.time, out);
  CheckQuiet(l, e.time, out);
}

// --- time, restore ----------------------------------------------------------------------------

absl::Duration LinkDetector::sweep_interval() const {
  return std::clamp(options_.stale_after / 30, absl::Seconds(1), absl::Seconds(10));
}

bool LinkDetector::NeedsAttention(const Link& l) {
  if (l.flapping_open || l.degraded_open) return true;
  for (const Down& d : l.downs) {
    if (d.status == Down::kPending) return true;
  }
  return false;
}

bool LinkDetector::AdvanceLink(Link& l, absl::Time now, bool sweep, std::vector<Finding>& out) {
  bool pending = false;
  for (Down& d : l.downs) {
    if (d.status == Down::kPending && d.hi + options_.state_stale_after <= now) {
      d.status = Down::kCompleted;  // no state sample came to place it: a whole cycle
      d.up_at = d.hi;
      pending = true;
    }
  }
  if (pending) CompleteCycles(l, now, out);
  CheckQuiet(l, now, out);
  CheckClean(l, now, out);
  if (sweep && l.last_input + options_.stale_after <= now) {
    auto stale = [&](IncidentKind kind) {
      Finding f = Make(l, kind, now, false);
      f.evidence["stale"] = 1;
      f.summary = absl::StrCat(l.id.Describe(), " on ", l.node, " has not been observed for ",
                               absl::FormatDuration(options_.stale_after));
      out.push_back(std::move(f));
    };
    if (l.down_open) stale(IncidentKind::kLinkDown);
    if (l.flapping_open) stale(IncidentKind::kLinkFlapping);
    if (l.degraded_open) stale(IncidentKind::kLinkDegraded);
    return false;
  }
  return true;
}

void LinkDetector::Advance(absl::Time now, std::vector<Finding>& out) {
  const absl::Duration interval = sweep_interval();
  // A sweep when due, and when the clock went back by more than an interval.
  if (now >= next_sweep_ || next_sweep_ - now > interval) {
    next_sweep_ = now + interval;
    for (auto it = links_.begin(); it != links_.end();) {
      Link& l = *it->second;
      if (!AdvanceLink(l, now, /*sweep=*/true, out)) {
        attention_.erase(&l);
        last_.Clear();
        links_.erase(it++);
        continue;
      }
      if (NeedsAttention(l)) {
        attention_.insert(&l);
      } else {
        attention_.erase(&l);
      }
      ++it;
    }
    return;
  }
  if (attention_.empty()) return;
  std::vector<Link*> visit(attention_.begin(), attention_.end());
  for (Link* l : visit) {
    AdvanceLink(*l, now, /*sweep=*/false, out);
    if (!NeedsAttention(*l)) attention_.erase(l);
  }
}

bool LinkDetector::Restore(const Finding& open) {
  if (open.kind != IncidentKind::kLinkDown && open.kind != IncidentKind::kLinkFlapping &&
      open.kind != IncidentKind::kLinkDegraded) {
    return false;
  }
  auto get = [&](const char* k) -> std::string {
    auto it = open.entity.find(k);
    return it == open.entity.end() ? std::string() : it->second;
  };
  const std::string node = get("node");
  if (node.empty()) return false;
  Link* l = nullptr;
  if (!get("gpu").empty()) {
    l = &GetLink(node, "nvlink", get("gpu"), get("link"));
  } else if (!get("device").empty()) {
    l = &GetLink(node, "infiniband", get("device"), get("port"));
  } else if (!get("netdev").empty()) {
    l = &GetLink(node, "netdev", get("netdev"), "");
  } else {
    return false;
  }
  l->last_input = std::max<absl::Time>(l->last_input, open.at);
  l->entity.Restore(open.entity);  // resolve under the very key the incident was opened with
  Attend(*l);
  switch (open.kind) {
    case IncidentKind::kLinkDown:
      l->was_up = true;
      l->state = LinkState::kDown;
      l->state_time = std::max<absl::Time>(l->state_time, open.at);
      l->down_open = true;
      break;
    case IncidentKind::kLinkFlapping:
      l->was_up = true;
      l->flapping_open = true;
      l->flapping_reported_cycles = std::max(options_.flap_cycles, 1);
      l->last_transition = std::max<absl::Time>(l->last_transition, open.at);
      break;
    default:
      l->degraded_open = true;
      l->degraded_severity = open.severity;
      l->last_breach = std::max<absl::Time>(l->last_breach, open.at);
      l->Degraded().evidence = open.evidence;
      l->Degraded().rule = "restored";
      break;
  }
  return true;
}

}  // namespace ringside::analysis
