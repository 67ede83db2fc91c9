#include "daemon/aggregator/metrics/port_rate_tracker.h"

#include <algorithm>
#include <tuple>

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

uint32_t PortRateTracker::EntryByKey(uint32_t node, const analysis::ObservedSample& s,
                                     const Tracked& tr) {
  auto [place_it, fresh_place] = place_index_.try_emplace(
      std::make_pair(std::string(s.device), std::string(s.port)),
      static_cast<uint32_t>(places_.size()));
  if (fresh_place) places_.push_back(place_it->first);
  const EntryKey key{node, place_it->second, tr.priority, tr.signal};
  auto [it, fresh] = by_key_.try_emplace(key, 0);
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
  e.node = key.node;
  e.place = key.place;
  e.priority = static_cast<int16_t>(key.priority);
  e.signal = key.signal;
  e.live = true;
  it->second = index;
  ++live_;
  return index;
}

uint32_t PortRateTracker::EntryOf(NodeLinks* node_links, uint32_t node,
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
  by_key_.erase(EntryKey{e.node, e.place, e.priority, e.signal});
  e.live = false;
  ++e.serial;  // every link to it misses from now on
  free_.push_back(index);
  --live_;
}

void PortRateTracker::Observe(absl::string_view node,
                              absl::Span<const analysis::ObservedSample> samples, absl::Time now) {
  if (samples.empty()) return;
  absl::MutexLock lock(&mu_);
  auto [node_it, fresh_node] =
      node_index_.try_emplace(node, static_cast<uint32_t>(links_.size()));
  if (fresh_node) {
    links_.emplace_back();
    node_names_.emplace_back(node);
  }
  const uint32_t node_number = node_it->second;
  NodeLinks* node_links = &links_[node_number];
  node_links->cursor = 0;
  const int64_t now_ns = absl::ToUnixNanos(now);
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
    Entry& e = entries_[EntryOf(node_links, node_number, s, tr)];
    e.value = value;
    e.time_ns = s.time_ns;
    e.updated_ns = now_ns;
  }
}

template <typename Fn>
void PortRateTracker::ForEachLive(absl::Time now, Fn fn) {
  const int64_t stale_ns = absl::ToInt64Nanoseconds(stale_after_);
  const int64_t now_ns = absl::ToUnixNanos(now);
  for (uint32_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (!e.live) continue;
    if (now_ns - e.updated_ns > stale_ns) {
      Forget(i);
      continue;
    }
    fn(i, e);
  }
}

PortSignalValue PortRateTracker::ValueOf(const Entry& e) const {
  PortSignalValue v;
  v.node = node_names_[e.node];
  v.device = places_[e.place].first;
  v.port = places_[e.place].second;
  v.priority = e.priority;
  v.signal = e.signal;
  v.value = e.value;
  v.time = absl::FromUnixNanos(e.time_ns);
  return v;
}

std::vector<PortSignalValue> PortRateTracker::Snapshot(absl::Time now) {
  std::vector<PortSignalValue> out;
  absl::MutexLock lock(&mu_);
  out.reserve(live_);
  ForEachLive(now, [&](uint32_t, const Entry& e) { out.push_back(ValueOf(e)); });
  return out;
}

int PortFamilyOf(PortSignal signal) {
  switch (signal) {
    case PortSignal::kRxPausedRatio:
    case PortSignal::kTxPausedRatio:
      return 0;
    case PortSignal::kEcnMarkedRate:
      return 1;
    case PortSignal::kCnpSentRate:
      return 2;
    case PortSignal::kCnpHandledRate:
      return 3;
  }
  return 0;
}

PortRateTracker::Worst PortRateTracker::WorstOf(absl::Time now, size_t max) {
  Worst out;
  absl::MutexLock lock(&mu_);
  // Whether entry a ranks before entry b (names compared only between equal values).
  auto worse = [this](uint32_t ia, uint32_t ib) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Entry& a = entries_[ia];
    const Entry& b = entries_[ib];
    if (a.value != b.value) return a.value > b.value;
    const auto& pa = places_[a.place];
    const auto& pb = places_[b.place];
    return std::tie(node_names_[a.node], pa.first, pa.second, a.priority, a.signal) >
           std::tie(node_names_[b.node], pb.first, pb.second, b.priority, b.signal);
  };
  // Per family, the `max` worst so far in a heap whose top is the best of them.
  std::array<std::vector<uint32_t>, 4> heaps;
  ForEachLive(now, [&](uint32_t i, const Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int f = PortFamilyOf(e.signal);
    ++out.live[f];
    if (max == 0) return;
    std::vector<uint32_t>& h = heaps[f];
    if (h.size() < max) {
      h.push_back(i);
      std::push_heap(h.begin(), h.end(), worse);
    } else if (worse(i, h.front())) {
      std::pop_heap(h.begin(), h.end(), worse);
      h.back() = i;
      std::push_heap(h.begin(), h.end(), worse);
    }
  });
  for (size_t f = 0; f < heaps.size(); ++f) {
    std::vector<uint32_t>& h = heaps[f];
    std::sort_heap(h.begin(), h.end(), worse);  // ascending under `worse`: worst first
    out.kept[f].reserve(h.size());
    for (uint32_t i : h) out.kept[f].push_back(ValueOf(entries_[i]));
  }
  return out;
}

size_t PortRateTracker::size() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

}  // namespace ringside::daemon
