// link_degraded: error rates against the UFM PDR, NVSentinel and DCGM thresholds (link_detector.h).
#include <algorithm>
#include <cmath>
#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/link_detector.h"
#include "analysis/link_detector_internal.h"

namespace ringside::analysis {

using namespace link_internal;  // NOLINT: this file's own helpers

namespace {

// The per-second rate of a step that counted `d` over `interval` to `t`, over at least `min_span`
// (LinkOptions::rate_min_interval): `recent` holds the series' counting steps of the last
// `min_span` (this one last), and steps known since `known_since` counted 0 between them. A step
// that began before t - min_span counts whole (when within it the increments came is unknown).
template <typename Counted>
double SpanRate(const std::deque<Counted>* recent, absl::Time known_since, absl::Time t,
                absl::Duration interval, double d, absl::Duration min_span) {
  if (interval >= min_span) return d / absl::ToDoubleSeconds(interval);
  const absl::Time target = t - min_span;
  double counts = 0;
  if (recent == nullptr) return d / absl::ToDoubleSeconds(interval);  // (a guard: never empty here)
  for (auto it = recent->rbegin(); it != recent->rend(); ++it) {
    if (it->end <= target) break;  // the steps after it counted 0 from before target
    counts += it->count;
    if (it->start <= target) return counts / absl::ToDoubleSeconds(t - it->start);
  }
  if (counts <= 0) counts = d;  // (this step is always in `recent`; a guard)
  const absl::Time from = std::max(target, known_since);
  return counts / absl::ToDoubleSeconds(t - from);
}

}  // namespace

// --- link_degraded ----------------------------------------------------------------------------

void LinkDetector::Breach(Link& l, absl::Time t, Severity sev, const std::string& rule,
                          double value, double limit, std::vector<Finding>& out) {
  l.last_breach = std::max<absl::Time>(l.last_breach, t);
  Link::DegradedNote& note = l.Degraded();
  note.evidence[rule] = value;
  note.evidence[rule + "_limit"] = limit;
  const bool open = !l.degraded_open;
  const bool worse = l.degraded_open && sev > l.degraded_severity;
  const bool new_rule = l.degraded_open && note.rule.find(rule) == std::string::npos;
  if (!open && !worse && !new_rule) return;
  if (open) {
    l.degraded_open = true;
    Attend(l);
    note.rule = rule;
    l.degraded_severity = sev;
  } else {
    if (worse) l.degraded_severity = sev;
    if (new_rule) absl::StrAppend(&note.rule, ",", rule);
  }
  Finding f = Make(l, IncidentKind::kLinkDegraded, t, true);
  f.severity = l.degraded_severity;
  f.evidence = note.evidence;
  f.summary = absl::StrFormat("%s on %s is degraded: %s = %g (limit %g)", l.id.Describe(), l.node,
                              rule, value, limit);
  out.push_back(std::move(f));
}

void LinkDetector::ObserveError(Link& l, const CounterStep& step, int code,
                                std::vector<Finding>& out) {
  Link::ErrSeries* es = nullptr;
  for (Link::ErrSeries& e : l.errs) {
    if (e.code == code) es = &e;
  }
  if (es == nullptr) {
    l.errs.emplace_back();
    es = &l.errs.back();
    es->code = static_cast<Code>(code);
  }
  absl::Duration window;
  switch (code) {
    case kSymbolError:
    case kPcsSymbol:
      window = options_.symbol_window;
      break;
    case kLinkErrorRecovery:
      window = absl::Minutes(1);
      break;
    default:
      window = options_.nvlink_window;
      break;
  }
  const absl::Time t = step.time;
  if (step.kind == DeltaKind::kSaturated) {
    es->stuck = step.delta == 0;
    if (es->stuck && l.degraded_open) {
      l.last_breach = std::max<absl::Time>(l.last_breach, t);  // blind: cannot show the link clean
      l.Degraded().evidence[absl::StrCat(ErrorName(code), "_saturated")] = 1;
    }
  } else {
    es->stuck = false;
  }
  const bool counts =
      DeltaUsable(step.kind) || (step.kind == DeltaKind::kSaturated && step.delta > 0);
  double d = counts ? static_cast<double>(step.delta) : 0;
  if (d > 0) {
    es->total += step.delta;
    double in_window = d;
    if (step.interval > window && step.interval > absl::ZeroDuration()) {
      in_window = d * absl::FDivDuration(window, step.interval);
    }
    es->hits.push_back(Link::Hit{t, in_window});
    es->sum += in_window;
  }
  while (!es->hits.empty() && es->hits.front().time <= t - window) {
    es->sum -= es->hits.front().count;
    es->hits.pop_front();
  }
  if (es->hits.empty()) es->sum = 0;
  const uint32_t bit = uint32_t{1} << code;
  l.err_present |= bit;
  if (es->stuck || !es->hits.empty()) {
    l.err_attention |= bit;
  } else {
    l.err_attention &= ~bit;
  }
  // The timeline of the rates over at least rate_min_interval (LinkOptions): steps known without
  // a gap since known_since, and the ones that counted lately.
  const absl::Time start = t - step.interval;
  const bool usable = DeltaUsable(step.kind) && step.interval > absl::ZeroDuration();
  if (!usable) {
    es->known_since = absl::InfiniteFuture();  // what happened before this step is unknown
    es->recent.clear();
  } else {
    if (es->known_since == absl::InfiniteFuture()) es->known_since = start;
    if (d > 0) es->recent.push_back(Link::Counted{start, t, d});
    while (!es->recent.empty() && es->recent.front().end <= t - options_.rate_min_interval) {
      es->recent.pop_front();
    }
  }
  if (d <= 0) return;
  const double step_rate = usable ? SpanRate(es->recent.get(), es->known_since, t, step.interval, d,
                                             options_.rate_min_interval)
                                  : StepRate(step);
  const std::string name(ErrorName(code));
  switch (code) {
    case kSymbolError:
    case kPcsSymbol: {
      // The rate first: a finding the window's count emits on this step then shows this step's
      // rate, not the one of the last step that breached it.
      if (step_rate > options_.symbol_burst_per_s) {
        Breach(l, t, Severity::kWarning, name + "_per_s", step_rate, options_.symbol_burst_per_s,
               out);
      }
      const double hours = absl::ToDoubleHours(options_.symbol_window);
      const double limit = options_.symbol_errors_per_hour * hours;
      if (es->sum > limit) {
        Breach(l, t, Severity::kCritical, name + "_in_window", es->sum, limit, out);
      }
      if (options_.ufm_ber > 0 && l.rate_bits_per_s > 0) {
        const double ber_limit =
            l.rate_bits_per_s * absl::ToDoubleSeconds(options_.symbol_window) * options_.ufm_ber;
        if (es->sum > ber_limit) {
          Breach(l, t, Severity::kCritical, name + "_ber_window", es->sum, ber_limit, out);
        }
      }
      break;
    }
    case kLinkErrorRecovery:
      if (es->sum > options_.link_error_recovery_per_min) {
        Breach(l, t, Severity::kWarning, name + "_per_min", es->sum,
               options_.link_error_recovery_per_min, out);
      }
      break;
    case kPortRcvErrors:
      if (step_rate > options_.port_rcv_errors_per_s) {
        Breach(l, t, Severity::kWarning, name + "_per_s", step_rate, options_.port_rcv_errors_per_s,
               out);
      }
      break;
    case kLocalLinkIntegrity:
      if (options_.local_link_integrity_any) {
        Breach(l, t, Severity::kCritical, name, d, 0, out);
      }
      break;
    case kNvReplay:
    case kNvRecovery:
      if (options_.nvlink_replay_recovery_any) {
        Breach(l, t, Severity::kCritical, name + "_in_window", es->sum, 0, out);
      }
      break;
    case kNvCrcFlit:
    case kNvCrcData: {
      const double rate = es->sum / absl::ToDoubleSeconds(options_.nvlink_window);
      if (rate >= options_.nvlink_crc_per_s) {
        Breach(l, t, Severity::kCritical, name + "_per_s", rate, options_.nvlink_crc_per_s, out);
      } else if (l.degraded_open) {
        l.Degraded().evidence[name + "_in_window"] = es->sum;
      }
      break;
    }
    default:  // NVLink5 error counters
      if (options_.nvlink5_errors_any) {
        Breach(l, t, Severity::kCritical, name + "_in_window", es->sum, 0, out);
      }
      break;
  }
}

void LinkDetector::ObserveBer(Link& l, absl::Time t, double ber, std::vector<Finding>& out) {
  if (options_.nvlink_effective_ber > 0 && ber > options_.nvlink_effective_ber) {
    Breach(l, t, Severity::kCritical, "effective_ber", ber, options_.nvlink_effective_ber, out);
  }
}

void LinkDetector::CheckClean(Link& l, absl::Time now, std::vector<Finding>& out) {
  if (!l.degraded_open || now - l.last_breach < options_.clean_window) return;
  l.degraded_open = false;
  Finding f = Make(l, IncidentKind::kLinkDegraded, now, false);
  f.severity = l.degraded_severity;
  if (l.degraded != nullptr) f.evidence = l.degraded->evidence;
  f.evidence["clean_s"] = absl::ToDoubleSeconds(now - l.last_breach);
  f.summary = absl::StrCat(l.id.Describe(), " on ", l.node, " has been clean for ",
                           absl::FormatDuration(options_.clean_window));
  out.push_back(std::move(f));
  l.degraded.reset();
}

}  // namespace ringside::analysis
