#include "analysis/host_signals.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringside::analysis {
namespace {

constexpr const char* kHostCounters[] = {
    "cpu_pressure_some_us",    "cpu_pressure_full_us", "memory_pressure_some_us",
    "memory_pressure_full_us", "io_pressure_some_us",  "io_pressure_full_us"};
constexpr const char* kCgroupCounters[] = {"nr_periods", "nr_throttled", "throttled_usec",
                                           "usage_usec"};

}  // namespace

void HostSignals::Window::Add(absl::Time t, double on_part, double total_part,
                              absl::Duration window) {
  q.push_back({t, {on_part, total_part}});
  on += on_part;
  total += total_part;
  last = std::max(last, t);
  while (!q.empty() && q.front().first <= t - window) {
    on -= q.front().second.first;
    total -= q.front().second.second;
    q.pop_front();
  }
  if (q.empty()) on = total = 0;
}

bool HostSignals::Uses(absl::string_view source, absl::string_view counter) {
  if (source == "host") {
    for (const char* c : kHostCounters) {
      if (counter == c) return true;
    }
  } else if (source == "cgroup") {
    for (const char* c : kCgroupCounters) {
      if (counter == c) return true;
    }
  }
  return false;
}

void HostSignals::ObserveCounter(const CounterStep& step) {
  if (!DeltaUsable(step.kind) || step.interval <= absl::ZeroDuration()) return;
  const double seconds = FastSeconds(step.interval);
  const double delta = static_cast<double>(step.delta);
  if (step.source == "host") {
    // µs stalled per µs of wall time (PSI "total" is in µs).
    windows_[absl::StrCat(step.node, "\x1f", step.counter)].Add(
        step.time, std::min(delta * 1e-6, seconds), seconds, options_.window);
    return;
  }
  if (step.source != "cgroup") return;
  const std::string prefix = absl::StrCat(step.node, "\x1f", step.device, "\x1f");
  if (step.counter == "throttled_usec" || step.counter == "usage_usec") {
    windows_[prefix + std::string(step.counter)].Add(step.time, delta * 1e-6, seconds,
                                                     options_.window);
  } else if (step.counter == "nr_throttled") {
    windows_[prefix + "nr_throttled"].Add(step.time, delta, 0, options_.window);
  } else if (step.counter == "nr_periods") {
    windows_[prefix + "nr_periods"].Add(step.time, delta, 0, options_.window);
  }
}

HostEvidence HostSignals::Of(absl::string_view node, absl::string_view cgroup,
                             absl::Time not_before) const {
  HostEvidence e;
  auto share = [&](const std::string& key) {
    auto it = windows_.find(key);
    return it == windows_.end() ? -1.0 : it->second.Share(not_before);
  };
  const std::string n = absl::StrCat(node, "\x1f");
  e.cpu_some = share(n + "cpu_pressure_some_us");
  e.cpu_full = share(n + "cpu_pressure_full_us");
  e.memory_some = share(n + "memory_pressure_some_us");
  e.memory_full = share(n + "memory_pressure_full_us");
  e.io_some = share(n + "io_pressure_some_us");
  e.io_full = share(n + "io_pressure_full_us");
  if (cgroup.empty()) return e;
  const std::string c = absl::StrCat(node, "\x1f", cgroup, "\x1f");
  e.cgroup_throttled_s_per_s = share(c + "throttled_usec");
  e.cgroup_cpu_s_per_s = share(c + "usage_usec");
  auto periods = windows_.find(c + "nr_periods");
  auto throttled = windows_.find(c + "nr_throttled");
  if (periods != windows_.end() && throttled != windows_.end() && periods->second.on > 0 &&
      periods->second.last >= not_before) {
    e.cgroup_throttled_periods = std::min(1.0, throttled->second.on / periods->second.on);
  }
  return e;
}

void HostSignals::Expire(absl::Time before) {
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (it->second.last < before) {
      it = windows_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace ringside::analysis
