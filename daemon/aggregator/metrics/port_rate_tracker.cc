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

uint32_t PortRateTracker::EntryOf(std::vector<SlotLink>* slots, absl::string_view node,
                                  const analysis::ObservedSample& s, const Tracked& tr) {
  constexpr uint32_t kMaxSlots = uint32_t{1} << 20;  // beyond any --max-series-per-node in use
  SlotLink* link = nullptr;
  if (s.identity_generation != 0 && s.slot < kMaxSlots) {
    if (s.slot >= slots->size()) slots->resize(s.slot + 1);
    link = &(*slots)[s.slot];
    if (link->generation == s.identity_generation && link->identity == s.identity &&
        link->entry != kNoEntry && entries_[link->entry].serial == link->serial) {
      return link->entry;
    }
  }
  key_.clear();
  key_.append(node.data(), node.size());
  key_.push_back('\0');
  key_.append(s.device.data(), s.device.size());
  key_.push_back('\0');
  key_.append(s.port.data(), s.port.size());
  key_.push_back('\0');
  key_.append(reinterpret_cast<const char*>(&tr.priority), sizeof(tr.priority));
  key_.push_back(static_cast<char>(tr.signal));
  auto [it, fresh] = by_key_.try_emplace(key_, kNoEntry);
  if (fresh) {
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
    e.value.node = std::string(node);
    e.value.device = std::string(s.device);
    e.value.port = std::string(s.port);
    e.value.priority = tr.priority;
    e.value.signal = tr.signal;
    it->second = index;
    ++live_;
  }
  if (link != nullptr) {
    *link = SlotLink{it->second, entries_[it->second].serial, s.identity, s.identity_generation};
  }
  return it->second;
}

void PortRateTracker::Forget(uint32_t index) {
  Entry& e = entries_[index];
  by_key_.erase(e.key);
  e.key.clear();
  e.key.shrink_to_fit();
  e.value = PortSignalValue{};
  ++e.serial;  // every slot link to it misses from now on
  free_.push_back(index);
  --live_;
}

void PortRateTracker::Observe(absl::string_view node,
                              absl::Span<const analysis::ObservedSample> samples, absl::Time now) {
  if (samples.empty()) return;
  absl::MutexLock lock(&mu_);
  auto [node_it, fresh_node] =
      node_index_.try_emplace(node, static_cast<uint32_t>(slots_.size()));
  if (fresh_node) slots_.emplace_back();
  std::vector<SlotLink>* slots = &slots_[node_it->second];
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
    Entry& e = entries_[EntryOf(slots, node, s, tr)];
    e.value.value = value;
    e.value.time = absl::FromUnixNanos(s.time_ns);
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
    out.push_back(e.value);
  }
  return out;
}

size_t PortRateTracker::size() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

}  // namespace ringside::daemon
