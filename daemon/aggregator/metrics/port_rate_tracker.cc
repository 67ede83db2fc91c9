#include "daemon/aggregator/metrics/port_rate_tracker.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "analysis/fabric_inputs.h"

namespace ringside::daemon {

bool TrackedSignal(absl::string_view source, absl::string_view counter, int32_t def_priority,
                   PortSignal* signal, int32_t* priority) {
  if (source == "ethtool") {
    if (!absl::EndsWith(counter, "_pause_duration")) return false;
    const bool tx = absl::StartsWith(counter, "tx_prio");
    if (!tx && !absl::StartsWith(counter, "rx_prio")) return false;  // global pause: not per prio
    const int p = analysis::PrioOf(counter, tx ? "tx_prio" : "rx_prio", "_pause_duration");
    if (p < 0 && def_priority < 0) return false;
    *priority = def_priority >= 0 ? def_priority : p;
    *signal = tx ? PortSignal::kTxPausedRatio : PortSignal::kRxPausedRatio;
    return true;
  }
  if (source == "infiniband_hw") {
    *priority = -1;
    if (counter == "np_ecn_marked_roce_packets") {
      *signal = PortSignal::kEcnMarkedRate;
    } else if (counter == "np_cnp_sent") {
      *signal = PortSignal::kCnpSentRate;
    } else if (counter == "rp_cnp_handled") {
      *signal = PortSignal::kCnpHandledRate;
    } else {
      return false;
    }
    return true;
  }
  return false;
}

const PortRateTracker::Tracked& PortRateTracker::TrackedOf(const analysis::ObservedSample& s) {
  constexpr uint32_t kMaxCachedHandles = uint32_t{1} << 22;
  Tracked* t = &scratch_;
  if (s.identity_generation != 0 && s.identity < kMaxCachedHandles) {
    if (s.identity >= by_identity_.size()) by_identity_.resize(s.identity + 1);
    t = &by_identity_[s.identity];
    if (t->generation == s.identity_generation) return *t;
    t->generation = s.identity_generation;
  }
  t->tracked = TrackedSignal(s.source, s.counter, s.priority, &t->signal, &t->priority);
  return *t;
}

uint32_t PortRateTracker::EntryByKey(absl::string_view node, const analysis::ObservedSample& s,
                                     const Tracked& tr) {
  key_.clear();
  key_.append(node.data(), node.size());
  key_.push_back('\0');
  key_.append(s.device.data(), s.device.size());
  key_.push_back('\0');
  key_.append(s.port.data(), s.port.size());
  key_.push_back('\0');
  key_.append(reinterpret_cast<const char*>(&tr.priority), sizeof(tr.priority));
  key_.push_back(static_cast<char>(tr.signal));
  auto [it, fresh] = by_key_.try_emplace(key_, 0);
  if (!fresh) return it->second;
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = static_cast<uint32_t>(entries_.size());
    entries_.emplace_back();
  }
  Entry& e = entries_[index];
  ++e.serial;
  e.key = key_;
  e.names.node = std::string(node);
  e.names.device = std::string(s.device);
  e.names.port = std::string(s.port);
  e.names.priority = tr.priority;
  e.names.signal = tr.signal;
  it->second = index;
  ++live_;
  return index;
}

uint32_t PortRateTracker::EntryOf(NodeLinks* node_links, absl::string_view node,
                                  const analysis::ObservedSample& s, const Tracked& tr) {
  if (s.identity_generation == 0) return EntryByKey(node, s, tr);
  std::vector<Link>& links = node_links->links;
  size_t i = node_links->cursor;
  if (i >= links.size() || links[i].slot != s.slot) {
    i = static_cast<size_t>(
        std::lower_bound(links.begin(), links.end(), s.slot,
                         [](const Link& l, uint32_t slot) { return l.slot < slot; }) -
        links.begin());
  }
  if (i < links.size() && links[i].slot == s.slot) {
    Link& l = links[i];
    node_links->cursor = i + 1;
    if (l.identity == s.identity && l.generation == s.identity_generation &&
        entries_[l.entry].serial == l.serial) {
      return l.entry;
    }
    l.entry = EntryByKey(node, s, tr);
    l.serial = entries_[l.entry].serial;
    l.identity = s.identity;
    l.generation = s.identity_generation;
    return l.entry;
  }
  const uint32_t entry = EntryByKey(node, s, tr);
  links.insert(links.begin() + static_cast<std::ptrdiff_t>(i),
               Link{s.slot, entry, entries_[entry].serial, s.identity, s.identity_generation});
  node_links->cursor = i + 1;
  return entry;
}

void PortRateTracker::Forget(uint32_t index) {
  Entry& e = entries_[index];
  by_key_.erase(e.key);
  e.key.clear();
  e.key.shrink_to_fit();
  e.names = PortSignalValue{};
  ++e.serial;  // every slot link to it misses from now on
  free_.push_back(index);
  --live_;
}

void PortRateTracker::Observe(absl::string_view node,
                              absl::Span<const analysis::ObservedSample> samples, absl::Time now) {
  if (samples.empty()) return;
  absl::MutexLock lock(&mu_);
  auto [node_it, fresh_node] =
      node_index_.try_emplace(node, static_cast<uint32_t>(links_.size()));
  if (fresh_node) links_.emplace_back();
  NodeLinks* node_links = &links_[node_it->second];
  node_links->cursor = 0;
  for (const analysis::ObservedSample& s : samples) {
    if (s.kind != analysis::SeriesKind::kCounter) continue;
    // Only steps whose delta is the real increase over a known interval give a rate.
    if (s.step.kind != analysis::StepKind::kNormal && s.step.kind != analysis::StepKind::kWrap) {
      continue;
    }
    if (s.prev_time_ns <= 0 || s.time_ns <= s.prev_time_ns) continue;
    const Tracked& tr = TrackedOf(s);
    if (!tr.tracked) continue;
    const double seconds = static_cast<double>(s.time_ns - s.prev_time_ns) * 1e-9;
    double value = static_cast<double>(s.step.delta) / seconds;
    if (tr.signal == PortSignal::kRxPausedRatio || tr.signal == PortSignal::kTxPausedRatio) {
      value = std::clamp(value * 1e-6, 0.0, 1.0);  // µs paused per second → fraction of time
    }
    Entry& e = entries_[EntryOf(node_links, node, s, tr)];
    e.value = value;
    e.time_ns = s.time_ns;
    e.updated = now;
  }
}

std::vector<PortSignalValue> PortRateTracker::Snapshot(absl::Time now) {
  std::vector<PortSignalValue> out;
  absl::MutexLock lock(&mu_);
  out.reserve(live_);
  for (uint32_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.key.empty()) continue;  // free
    if (now - e.updated > stale_after_) {
      Forget(i);
      continue;
    }
    out.push_back(e.names);
    out.back().value = e.value;
    out.back().time = absl::FromUnixNanos(e.time_ns);
  }
  return out;
}

size_t PortRateTracker::size() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

}  // namespace ringside::daemon
