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

void PortRateTracker::Observe(absl::string_view node,
                              absl::Span<const analysis::ObservedSample> samples, absl::Time now) {
  if (samples.empty()) return;
  absl::MutexLock lock(&mu_);
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
    key_.assign(node.data(), node.size());
    key_.push_back('\0');
    key_.append(s.device.data(), s.device.size());
    key_.push_back('\0');
    key_.append(s.port.data(), s.port.size());
    key_.push_back('\0');
    key_.append(reinterpret_cast<const char*>(&tr.priority), sizeof(tr.priority));
    key_.push_back(static_cast<char>(tr.signal));
    auto it = entries_.find(key_);
    if (it == entries_.end()) {
      Entry e;
      e.value.node = std::string(node);
      e.value.device = std::string(s.device);
      e.value.port = std::string(s.port);
      e.value.priority = tr.priority;
      e.value.signal = tr.signal;
      it = entries_.emplace(key_, std::move(e)).first;
    }
    Entry& e = it->second;
    e.value.value = value;
    e.value.time = absl::FromUnixNanos(s.time_ns);
    e.updated = now;
  }
}

std::vector<PortSignalValue> PortRateTracker::Snapshot(absl::Time now) {
  std::vector<PortSignalValue> out;
  absl::MutexLock lock(&mu_);
  out.reserve(entries_.size());
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (now - it->second.updated > stale_after_) {
      entries_.erase(it++);
      continue;
    }
    out.push_back(it->second.value);
    ++it;
  }
  return out;
}

size_t PortRateTracker::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace ringside::daemon
