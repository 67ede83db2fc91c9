#include "collectors/ethtool/ethtool_pause.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "collectors/ethtool/ethtool_names.h"

namespace ringside::collectors {
namespace {

using Key = std::pair<absl::string_view, absl::string_view>;  // (device, counter)

// Good values of a snapshot by (device, counter). Views point into the snapshot's table.
std::map<Key, uint64_t> GoodValues(const CollectorSnapshot& s) {
  std::map<Key, uint64_t> out;
  if (!s.table) return out;
  const size_t n = std::min(s.table->defs.size(), s.values.size());
  for (size_t i = 0; i < n; ++i) {
    if (s.values[i].status != ValueStatus::kOk) continue;
    const SeriesDef& d = s.table->defs[i];
    out.emplace(Key{d.device, d.counter}, s.values[i].raw);
  }
  return out;
}

// For "<rx|tx>_prio<p>_pause_duration" and "<rx|tx>_global_pause_duration": direction and
// priority (-1 for global).
bool ParseDurationName(absl::string_view name, PauseDirection& dir, int& priority) {
  if (!absl::EndsWith(name, "_pause_duration")) return false;
  if (absl::StartsWith(name, "rx_")) {
    dir = PauseDirection::kRx;
  } else if (absl::StartsWith(name, "tx_")) {
    dir = PauseDirection::kTx;
  } else {
    return false;
  }
  if (name == "rx_global_pause_duration" || name == "tx_global_pause_duration") {
    priority = -1;
    return true;
  }
  priority = EthtoolPriority(name);
  // Exactly <dir>_prio<p>_pause_duration.
  return priority >= 0 && priority <= 7 &&
         name.size() == absl::string_view("rx_prio0_pause_duration").size();
}

}  // namespace

std::vector<PauseInterval> PauseDurationPerInterval(const CollectorSnapshot& earlier,
                                                    const CollectorSnapshot& later) {
  std::vector<PauseInterval> out;
  const absl::Duration interval = later.timestamp - earlier.timestamp;
  if (interval <= absl::ZeroDuration() || !later.table) return out;
  const double seconds = absl::ToDoubleSeconds(interval);
  const std::map<Key, uint64_t> before = GoodValues(earlier);
  const std::map<Key, uint64_t> after = GoodValues(later);

  for (const auto& [key, now] : after) {
    PauseInterval p;
    if (!ParseDurationName(key.second, p.direction, p.priority)) continue;
    auto then = before.find(key);
    if (then == before.end() || now < then->second) continue;
    p.device = std::string(key.first);
    p.interval = interval;
    p.paused_us = now - then->second;
    // The frame counter is the duration's name without "_duration".
    absl::string_view frames_name = key.second.substr(0, key.second.size() - 9);
    auto f_now = after.find(Key{key.first, frames_name});
    auto f_then = before.find(Key{key.first, frames_name});
    if (f_now != after.end() && f_then != before.end() && f_now->second >= f_then->second) {
      p.pause_frames = f_now->second - f_then->second;
    }
    p.paused_us_per_second = static_cast<double>(p.paused_us) / seconds;
    p.paused_fraction = std::min(1.0, p.paused_us_per_second / 1e6);
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(), [](const PauseInterval& a, const PauseInterval& b) {
    return std::tie(a.device, a.direction, a.priority) <
           std::tie(b.device, b.direction, b.priority);
  });
  return out;
}

}  // namespace ringside::collectors
