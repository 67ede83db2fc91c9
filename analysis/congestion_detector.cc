#include "analysis/congestion_detector.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/compact_time.h"

namespace ringside::analysis {
namespace {

// The counter's slot and display name; -1 when the detector does not use it.
int Slot(absl::string_view source, absl::string_view counter, int32_t priority, std::string* name) {
  if (source == "infiniband_hw") {
    if (counter == "np_ecn_marked_roce_packets") return 0;
    if (counter == "np_cnp_sent") return 1;
    if (counter == "rp_cnp_handled") return 2;
    return -1;
  }
  if (source == "ethtool") {
    const int p = priority >= 0 && PrioOf(counter, "rx_prio", "_marked") >= 0
                      ? priority
                      : PrioOf(counter, "rx_prio", "_marked");
    if (p < 0) return -1;
    if (name != nullptr) *name = absl::StrCat("rx_prio", p, "_marked");
    return 3 + std::min(p, 7);
  }
  return -1;
}

constexpr int kSlots = 11;
constexpr absl::string_view kHwNames[] = {"np_ecn_marked_roce_packets", "np_cnp_sent",
                                          "rp_cnp_handled"};

}  // namespace

// What every step reads comes first (the aggregator prefetches the start of a record). Times in
// 8 bytes (compact_time.h): a port holds kSlots counters, 48 -> 32 bytes each.
struct CongestionDetector::Port {
  bool open = false;
  CompactTime last_input = absl::InfinitePast();
  CompactTime last_high = absl::InfinitePast();
  double reported_peak = 0;
  struct Counter {
    double rate = 0;
    double peak = 0;
    CompactTime time = absl::InfinitePast();
    int run = 0;
    bool seen = false;
  };
  Counter counters[kSlots];
  std::string node;
  PortId id;
  RecordEntity entity;  // of `id`, or as restored
};

CongestionDetector::CongestionDetector(CongestionOptions options, const PortDirectory* ports)
    : options_(options), directory_(ports) {}

CongestionDetector::~CongestionDetector() = default;

bool CongestionDetector::Uses(absl::string_view source, absl::string_view counter) {
  return Slot(source, counter, -1, nullptr) >= 0;
}

int32_t CongestionDetector::Prepare(absl::string_view source, absl::string_view counter,
                                    int32_t priority) {
  return Slot(source, counter, priority, nullptr);
}

Finding CongestionDetector::Make(const Port& p, absl::Time at, bool active) const {
  Finding f;
  f.kind = IncidentKind::kCongestion;
  f.entity = p.entity.Get(p.id, p.node);
  f.at = at;
  f.active = active;
  f.severity = Severity::kWarning;
  double np = 0, rp = 0;
  for (int i = 0; i < kSlots; ++i) {
    const Port::Counter& c = p.counters[i];
    if (!c.seen) continue;
    const std::string name =
        i < 3 ? std::string(kHwNames[i]) : absl::StrCat("rx_prio", i - 3, "_marked");
    f.evidence[name + "_per_s"] = c.rate;
    f.evidence["peak_" + name + "_per_s"] = c.peak;
    (i == 2 ? rp : np) = std::max(i == 2 ? rp : np, c.rate);
  }
  f.evidence["threshold_per_s"] = options_.min_rate;
  const std::string where = absl::StrCat(p.id.Describe(), " on ", p.node);
  if (!active) {
    f.summary = absl::StrCat("congestion at ", where, " has cleared");
  } else if (np >= rp) {
    f.summary = absl::StrFormat(
        "%s receives congestion-marked traffic at %.0f/s (ECN/CNP; threshold %.0f/s): a congested "
        "path toward it",
        where, np, options_.min_rate);
  } else {
    f.summary =
        absl::StrFormat("%s is being throttled by DCQCN: %.0f CNPs/s handled (threshold %.0f/s)",
                        where, rp, options_.min_rate);
  }
  return f;
}

void CongestionDetector::ObserveCounter(const CounterStep& step, std::vector<Finding>& out) {
  const int slot = step.prepared >= 0 && step.prepared < kSlots
                       ? step.prepared
                       : Slot(step.source, step.counter, step.priority, nullptr);
  if (slot < 0) return;
  Port* found = last_.Find(step.port_token, directory_, step.hint);
  if (found == nullptr) {
    key_.assign(step.node.data(), step.node.size());
    key_.push_back('\0');
    AppendPortKey(CanonicalPort(directory_, step.node, step.source, step.device, step.port), key_);
    auto it = ports_.find(key_);
    if (it == ports_.end()) {
      auto p = std::make_unique<Port>();
      p->node = std::string(step.node);
      p->id = ResolvePort(directory_, step.node, step.source, step.device, step.port);
      it = ports_.emplace(key_, std::move(p)).first;
    }
    found = it->second.get();
    last_.Remember(step.port_token, directory_, found, step.hint);
  }
  Port& p = *found;
  if (step.hint != nullptr) {
    // Another normal Δ 0 step would set a rate and run already 0 and, the port not being open,
    // stop there (RecordHint::quiet).
    step.hint->quiet = step.kind == DeltaKind::kNormal && step.delta == 0 && !p.open &&
                       options_.min_rate * options_.resolve_ratio > 0 &&
                       options_.sustain_samples > 0 && step.interval > absl::ZeroDuration();
  }
  const absl::Time t = step.time;
  p.last_input = std::max<absl::Time>(p.last_input, t);
  Port::Counter& c = p.counters[slot];
  c.seen = true;
  c.time = t;
  if (!DeltaUsable(step.kind) || step.interval <= absl::ZeroDuration()) {
    c.run = 0;
    return;
  }
  c.rate = StepRate(step);
  c.peak = std::max(c.peak, c.rate);
  c.run = c.rate >= options_.min_rate ? c.run + 1 : 0;
  if (c.rate >= options_.min_rate * options_.resolve_ratio) p.last_high = t;
  if (!p.open) {
    if (c.run < options_.sustain_samples) return;
    p.open = true;
    for (Port::Counter& x : p.counters) x.peak = x.rate;
    p.reported_peak = c.rate;
    out.push_back(Make(p, t, true));
    return;
  }
  if (c.rate >= 2 * p.reported_peak) {  // markedly worse: tell
    p.reported_peak = c.rate;
    out.push_back(Make(p, t, true));
  }
  if (t - p.last_high >= options_.clear_window) {
    p.open = false;
    Finding f = Make(p, t, false);
    f.evidence["clear_s"] = absl::ToDoubleSeconds(t - p.last_high);
    out.push_back(std::move(f));
  }
}

void CongestionDetector::Advance(absl::Time now, std::vector<Finding>& out) {
  // Only staleness depends on time alone: a pass over every port's record once per sweep
  // interval (clamp(stale_after / 30, 1 s, 10 s)), not every call; also when the clock went back.
  const absl::Duration interval =
      std::clamp(options_.stale_after / 30, absl::Seconds(1), absl::Seconds(10));
  if (now < next_sweep_ && next_sweep_ - now <= interval) return;
  next_sweep_ = now + interval;
  for (auto it = ports_.begin(); it != ports_.end();) {
    Port& p = *it->second;
    if (p.last_input + options_.stale_after <= now) {
      if (p.open) {
        Finding f = Make(p, now, false);
        f.evidence["stale"] = 1;
        out.push_back(std::move(f));
      }
      last_.Clear();
      ports_.erase(it++);
      continue;
    }
    ++it;
  }
}

bool CongestionDetector::Restore(const Finding& open) {
  if (open.kind != IncidentKind::kCongestion) return false;
  auto get = [&](const char* k) -> std::string {
    auto it = open.entity.find(k);
    return it == open.entity.end() ? std::string() : it->second;
  };
  const std::string node = get("node");
  if (node.empty()) return false;
  PortId id;
  if (!get("device").empty()) {
    id = ResolvePort(directory_, node, "infiniband_hw", get("device"), get("port"));
  } else {
    id = ResolvePort(directory_, node, "ethtool", get("netdev"), "");
  }
  std::string key = node;
  key.push_back('\0');
  key.append(id.Key());
  auto& slot = ports_[key];
  if (!slot) {
    slot = std::make_unique<Port>();
    slot->node = node;
    slot->id = std::move(id);
  }
  slot->entity.Restore(open.entity);
  slot->open = true;
  slot->last_high = std::max<absl::Time>(slot->last_high, open.at);
  slot->last_input = std::max<absl::Time>(slot->last_input, open.at);
  slot->reported_peak = options_.min_rate;
  return true;
}

}  // namespace ringside::analysis
