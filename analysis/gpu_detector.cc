#include "analysis/gpu_detector.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/pci_bus_id.h"

namespace ringside::analysis {
namespace {

// NVML clock-event-reason bits (reference/gpu-causes.md §1.1).
constexpr uint64_t kBitIdle = 0x1;
constexpr uint64_t kBitPowerCap = 0x4;
constexpr uint64_t kBitHwSlowdown = 0x8;
constexpr uint64_t kBitSwThermal = 0x20;
constexpr uint64_t kBitHwThermal = 0x40;
constexpr uint64_t kBitHwPowerBrake = 0x80;

constexpr const char* kReasonName[] = {"hw_slowdown", "hw_thermal", "hw_power_brake", "sw_thermal",
                                       "power_cap"};
constexpr const char* kReasonText[] = {"hardware slowdown", "hardware thermal slowdown",
                                       "hardware power brake", "software thermal slowdown",
                                       "power cap"};
constexpr uint64_t kReasonBit[] = {kBitHwSlowdown, kBitHwThermal, kBitHwPowerBrake, kBitSwThermal,
                                   kBitPowerCap};

std::string Key(absl::string_view node, absl::string_view index) {
  return absl::StrCat(node, "\x1f", index);
}

bool Contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string Clock(absl::Time t) {
  return absl::FormatTime("%H:%M:%S UTC", t, absl::UTCTimeZone());
}

}  // namespace

int ParseXid(absl::string_view detail) {
  size_t i = 0;
  while (i < detail.size() && !absl::ascii_isdigit(detail[i])) ++i;
  size_t j = i;
  while (j < detail.size() && absl::ascii_isdigit(detail[j])) ++j;
  int v = -1;
  if (j == i || !absl::SimpleAtoi(detail.substr(i, j - i), &v)) return -1;
  return v;
}

void GpuDirectory::Map(absl::string_view node, absl::string_view index,
                       absl::string_view pci_bus_id) {
  const std::string bus = NormalizePciBusId(pci_bus_id);
  if (bus.empty()) return;
  bus_of_[Key(node, index)] = bus;
  index_of_[Key(node, bus)] = std::string(index);
}

std::string GpuDirectory::BusIdOf(absl::string_view node, absl::string_view index) const {
  auto it = bus_of_.find(Key(node, index));
  return it == bus_of_.end() ? "" : it->second;
}

std::string GpuDirectory::IndexOf(absl::string_view node, absl::string_view pci_bus_id) const {
  auto it = index_of_.find(Key(node, NormalizePciBusId(pci_bus_id)));
  return it == index_of_.end() ? "" : it->second;
}

void GpuDetector::ShareWindow::Add(absl::Time t, double on_part, double total_part,
                                   absl::Duration window) {
  q.push_back({t, {on_part, total_part}});
  on += on_part;
  total += total_part;
  while (!q.empty() && q.front().first <= t - window) {
    on -= q.front().second.first;
    total -= q.front().second.second;
    q.pop_front();
  }
  if (q.empty() || on < 0) on = 0;
  if (q.empty() || total < 0) total = 0;
}

GpuDetector::GpuDetector(GpuOptions options, const GpuDirectory* directory)
    : options_(std::move(options)), directory_(directory) {}

bool GpuDetector::Uses(absl::string_view source, absl::string_view counter) {
  if (source != "gpu") return false;
  static const char* const kUsed[] = {
      "clock_event_reasons", "sm_clock_mhz", "sm_clock_max_mhz", "temperature_c", "power_mw",
      "power_limit_mw", "throttle_power_cap_ns", "throttle_sw_thermal_ns",
      "throttle_hw_thermal_ns", "throttle_hw_power_brake_ns", "ecc_uncorrected_volatile",
      "remap_pending", "remap_failure", "pcie_link_gen", "pcie_link_gen_max", "pcie_link_width",
      "pcie_link_width_max", "pcie_replay", "compute_processes", "utilization_gpu_percent",
      "xid_events", "last_xid"};
  for (const char* c : kUsed) {
    if (counter == c) return true;
  }
  return false;
}

GpuDetector::Gpu& GpuDetector::GpuOf(absl::string_view node, absl::string_view index) {
  Gpu& g = gpus_[Key(node, index)];
  if (g.node.empty()) {
    g.node = std::string(node);
    g.index = std::string(index);
  }
  return g;
}

std::map<std::string, std::string> GpuDetector::EntityOf(const Gpu& g) const {
  std::map<std::string, std::string> e{{"node", g.node}, {"gpu", g.index}};
  if (directory_ != nullptr) {
    if (std::string bus = directory_->BusIdOf(g.node, g.index); !bus.empty()) {
      e["pci_bus_id"] = bus;
    }
  }
  return e;
}

std::string GpuDetector::Name(const Gpu& g) const {
  const std::string bus = directory_ != nullptr ? directory_->BusIdOf(g.node, g.index) : "";
  return absl::StrCat("GPU ", g.index, bus.empty() ? "" : absl::StrCat(" (", bus, ")"), " on ",
                      g.node);
}

bool GpuDetector::Busy(const Gpu& g) const {
  return g.last_seen != absl::InfinitePast() && g.busy_at >= g.last_seen - absl::Seconds(5) &&
         g.busy_at != absl::InfinitePast();
}

double GpuDetector::ReasonShare(const Gpu& g, int r) const {
  double share = 0;
  if (g.bits[r].q.size() >= static_cast<size_t>(std::max(1, options_.min_samples))) {
    share = g.bits[r].Share();
  }
  // A throttle-time counter is exact over its interval; judged once it covers half the window.
  if (g.counters[r].total >= 0.5 * FastSeconds(options_.window) * 1e9) {
    share = std::max(share, std::min(1.0, g.counters[r].Share()));
  }
  return share;
}

void GpuDetector::Report(Gpu& g, Open& o, IncidentKind kind, bool active, bool changed,
                         Severity severity, absl::Time at, std::map<std::string, double> evidence,
                         std::string summary, std::vector<Finding>& out) {
  if (!active && !o.open) return;
  if (active && o.open && !changed) return;
  if (active && !o.open) {
    o.entity = EntityOf(g);
    o.open = true;
  }
  Finding f;
  f.kind = kind;
  f.entity = o.entity;
  f.severity = severity;
  f.at = at;
  f.active = active;
  f.evidence = std::move(evidence);
  f.summary = std::move(summary);
  out.push_back(std::move(f));
  if (!active) o = Open{};
}

void GpuDetector::ObserveCounter(const CounterStep& step, std::vector<Finding>& out) {
  if (step.source != "gpu") return;
  Gpu& g = GpuOf(step.node, step.device);
  g.last_seen = std::max(g.last_seen, step.time);
  const double interval_ns = static_cast<double>(absl::ToInt64Nanoseconds(step.interval));
  if (interval_ns <= 0) return;
  const bool usable = DeltaUsable(step.kind);
  const double delta = usable ? static_cast<double>(step.delta) : 0;
  int reason = -1;
  if (step.counter == "throttle_power_cap_ns") reason = kPowerCap;
  if (step.counter == "throttle_sw_thermal_ns") reason = kSwThermal;
  if (step.counter == "throttle_hw_thermal_ns") reason = kHwThermal;
  if (step.counter == "throttle_hw_power_brake_ns") reason = kHwPowerBrake;
  if (reason >= 0) {
    if (!usable) return;
    const double before = ReasonShare(g, reason);
    g.counters[reason].Add(step.time, std::min(delta, interval_ns), interval_ns, options_.window);
    if (delta > 0 && (before == 0 || !g.since[reason])) {
      g.since[reason] = step.time - absl::Nanoseconds(std::min(delta, interval_ns));
    }
    JudgeThrottle(g, step.time, power_capped_[Key(g.node, g.index)], -1, out);
  } else if (step.counter == "ecc_uncorrected_volatile") {
    if (delta > 0) {
      g.ecc_uncorrected += delta;
      g.last_memory_error = step.time;
    }
    JudgeMemory(g, step.time, out);
  } else if (step.counter == "pcie_replay") {
    if (usable) g.replays.Add(step.time, delta, interval_ns * 1e-9, options_.window);
    JudgePcie(g, step.time, out);
  } else if (step.counter == "xid_events") {
    // The count catches XIDs whose event was lost; an XID streamed as an event is not raised twice.
    if (delta > 0 && g.last_xid_event < step.time - step.interval - absl::Seconds(5)) {
      RaiseXid(g, static_cast<int>(g.last_xid_gauge), step.time, out);
    }
  }
}

void GpuDetector::ObserveState(const StateSample& s, std::vector<Finding>& out) {
  if (s.source != "gpu") return;
  Gpu& g = GpuOf(s.node, s.device);
  g.last_seen = std::max(g.last_seen, s.time);
  const absl::string_view c = s.counter;
  if (c == "clock_event_reasons") {
    const uint64_t bits = static_cast<uint64_t>(s.value);
    g.reasons_mask = bits;
    if (!(bits & kBitIdle) && g.utilization < 0) g.busy_at = s.time;
    for (int r = 0; r < kReasons; ++r) {
      const bool on = (bits & kReasonBit[r]) != 0;
      const double before = ReasonShare(g, r);
      g.bits[r].Add(s.time, on ? 1 : 0, 1, options_.window);
      if (on && (before == 0 || !g.since[r])) g.since[r] = s.time;
      if (!on && ReasonShare(g, r) == 0 && g.counters[r].on == 0) g.since[r].reset();
    }
    JudgeThrottle(g, s.time, power_capped_[Key(g.node, g.index)], -1, out);
  } else if (c == "utilization_gpu_percent") {
    g.utilization = s.value;
    if (s.value >= options_.busy_utilization) g.busy_at = s.time;
  } else if (c == "sm_clock_mhz") {
    g.sm_clock = s.value;
    if (g.sm_clock_max > 0 && Busy(g)) {
      g.clock.Add(s.time, std::min(1.0, s.value / g.sm_clock_max), 1, options_.window);
    }
  } else if (c == "sm_clock_max_mhz") {
    g.sm_clock_max = s.value;
  } else if (c == "temperature_c") {
    g.temperature = s.value;
  } else if (c == "power_mw") {
    g.power_mw = s.value;
  } else if (c == "power_limit_mw") {
    g.limit_mw = s.value;
  } else if (c == "compute_processes") {
    g.compute_processes = s.value;
  } else if (c == "remap_failure" || c == "remap_pending") {
    (c == "remap_failure" ? g.remap_failure : g.remap_pending) = s.value;
    if (c == "remap_failure" && s.value > 0) g.last_memory_error = s.time;
    JudgeMemory(g, s.time, out);
  } else if (c == "pcie_link_gen" || c == "pcie_link_gen_max" || c == "pcie_link_width" ||
             c == "pcie_link_width_max") {
    (c == "pcie_link_gen"       ? g.gen
     : c == "pcie_link_gen_max" ? g.gen_max
     : c == "pcie_link_width"   ? g.width
                                : g.width_max) = s.value;
    JudgePcie(g, s.time, out);
  } else if (c == "last_xid") {
    g.last_xid_gauge = s.value;
  }
}

void GpuDetector::ObserveXid(absl::string_view node, absl::string_view gpu, absl::Time at,
                             absl::string_view detail, std::vector<Finding>& out) {
  Gpu& g = GpuOf(node, gpu);
  g.last_xid_event = std::max(g.last_xid_event, at);
  RaiseXid(g, ParseXid(detail), at, out);
}

void GpuDetector::RaiseXid(Gpu& g, int xid, absl::Time at, std::vector<Finding>& out) {
  if (xid < 0 || !Contains(options_.xids, xid)) return;  // not one that hurts a job
  const bool critical = Contains(options_.critical_xids, xid);
  g.last_xid = std::max(g.last_xid, at);
  g.last_xid_code = xid;
  g.xid_count += 1;
  Report(g, g.xid, IncidentKind::kGpuXid, true, true,
         critical ? Severity::kCritical : Severity::kWarning, at,
         {{"xid", xid}, {"xid_count", g.xid_count},
          {"last_xid_unix_s", absl::ToDoubleSeconds(at - absl::UnixEpoch())}},
         absl::StrCat("XID ", xid, " on ", Name(g), " at ", Clock(at)), out);
}

void GpuDetector::JudgeThrottle(Gpu& g, absl::Time at, bool power_cap_blamed, double peer_ratio,
                                std::vector<Finding>& out) {
  double share[kReasons];
  uint32_t reasons = 0;
  bool strong = false;
  for (int r = 0; r < kReasons; ++r) {
    share[r] = ReasonShare(g, r);
    const double need = r == kSwThermal ? options_.sw_thermal_share : options_.throttle_share;
    if (r != kPowerCap && share[r] >= need) {
      reasons |= 1u << r;
      strong = strong || r != kSwThermal;
    }
  }
  if (power_cap_blamed) reasons |= 1u << kPowerCap;
  if (g.throttled.open && reasons == 0) {
    // Open: keep it until every reason is below the resolve share.
    bool any = power_cap_blamed;
    for (int r = 0; r < kPowerCap; ++r) any = any || share[r] >= options_.resolve_share;
    if (any) return;
  }
  std::map<std::string, double> ev;
  std::vector<std::string> named;
  int main = -1;
  for (int r = 0; r < kReasons; ++r) {
    if (share[r] > 0 || (reasons & (1u << r))) ev[absl::StrCat("share_", kReasonName[r])] = share[r];
    if (reasons & (1u << r)) {
      named.push_back(absl::StrFormat("%s %.0f%%", kReasonText[r], 100 * share[r]));
      if (main < 0 && g.since[r]) main = r;
    }
  }
  if (g.sm_clock >= 0) ev["sm_clock_mhz"] = g.sm_clock;
  if (g.sm_clock_max > 0) ev["sm_clock_max_mhz"] = g.sm_clock_max;
  if (g.temperature >= 0) ev["temperature_c"] = g.temperature;
  if (g.power_mw >= 0) ev["power_w"] = g.power_mw / 1000;
  if (g.limit_mw > 0) ev["power_limit_w"] = g.limit_mw / 1000;
  if (g.reasons_mask) ev["clock_event_reasons"] = static_cast<double>(*g.reasons_mask);
  if (!g.clock.q.empty()) ev["clock_ratio"] = g.clock.Share();
  if (peer_ratio >= 0) ev["peer_clock_ratio"] = peer_ratio;
  std::string summary;
  if (reasons != 0) {
    if (main >= 0) ev["since_unix_s"] = absl::ToDoubleSeconds(*g.since[main] - absl::UnixEpoch());
    summary = absl::StrCat(Name(g), " in ", absl::StrJoin(named, ", "), " of the last ",
                           absl::FormatDuration(options_.window),
                           main >= 0 ? absl::StrCat(" since ", Clock(*g.since[main])) : "");
    if (g.sm_clock >= 0 && g.sm_clock_max > 0) {
      absl::StrAppend(&summary, absl::StrFormat(" (SM %.0f of %.0f MHz", g.sm_clock,
                                                g.sm_clock_max),
                      g.temperature >= 0 ? absl::StrFormat(", %.0f °C)", g.temperature) : ")");
    }
    if (power_cap_blamed && peer_ratio >= 0 && !g.clock.q.empty()) {
      absl::StrAppend(&summary, absl::StrFormat("; SM clock %.0f%% of max against its peers' %.0f%%",
                                                100 * g.clock.Share(), 100 * peer_ratio));
    }
  } else {
    summary = absl::StrCat(Name(g), ": throttling below ",
                           absl::StrFormat("%.0f%%", 100 * options_.resolve_share), " of the last ",
                           absl::FormatDuration(options_.window));
  }
  const bool changed = reasons != g.throttled.reasons;
  Report(g, g.throttled, IncidentKind::kGpuThrottled, reasons != 0, changed,
         strong ? Severity::kCritical : Severity::kWarning, at, std::move(ev), std::move(summary),
         out);
  g.throttled.reasons = g.throttled.open ? reasons : 0;
}

void GpuDetector::JudgePcie(Gpu& g, absl::Time at, std::vector<Finding>& out) {
  const bool known = g.gen > 0 && g.gen_max > 0 && g.width > 0 && g.width_max > 0;
  const bool below = known && (g.gen < g.gen_max || g.width < g.width_max);
  const double replay_rate =
      g.replays.total >= 0.5 * FastSeconds(options_.window) ? 60 * g.replays.Share() : 0;
  const bool replaying = options_.pcie_replay_per_min > 0 && replay_rate > options_.pcie_replay_per_min;
  const bool busy = Busy(g);
  if (below && busy) {
    if (!g.pcie_since) g.pcie_since = at;
  } else if (busy || !below) {
    g.pcie_since.reset();  // idle GPUs may lower their link: neither raise nor clear on them
  }
  const bool degraded = g.pcie_since && at - *g.pcie_since >= options_.pcie_min_duration;
  bool active = degraded || replaying;
  if (!active && g.pcie.open && below && !busy) return;  // idle: keep as is
  std::map<std::string, double> ev;
  if (known) {
    ev = {{"pcie_link_gen", g.gen}, {"pcie_link_gen_max", g.gen_max}, {"pcie_link_width", g.width},
          {"pcie_link_width_max", g.width_max}};
  }
  ev["pcie_replays_per_min"] = replay_rate;
  std::string summary = absl::StrCat(Name(g), ": PCIe link Gen", g.gen, " x", g.width, " of Gen",
                                     g.gen_max, " x", g.width_max);
  if (replaying) absl::StrAppend(&summary, absl::StrFormat(", %.0f replays/min", replay_rate));
  const bool changed = g.pcie.open && active && g.pcie.reasons != (degraded ? 1u : 0u) + (replaying ? 2u : 0u);
  Report(g, g.pcie, IncidentKind::kGpuPcieDegraded, active, changed, Severity::kWarning, at,
         std::move(ev), std::move(summary), out);
  g.pcie.reasons = g.pcie.open ? (degraded ? 1u : 0u) + (replaying ? 2u : 0u) : 0;
}

void GpuDetector::JudgeMemory(Gpu& g, absl::Time at, std::vector<Finding>& out) {
  const bool failure = g.remap_failure > 0;
  const bool recent = g.last_memory_error != absl::InfinitePast() &&
                      at - g.last_memory_error < options_.memory_hold;
  const bool active = failure || recent;
  const uint32_t state = (failure ? 1u : 0u) + static_cast<uint32_t>(g.ecc_uncorrected) * 2;
  std::map<std::string, double> ev{{"ecc_uncorrected", g.ecc_uncorrected},
                                   {"remap_failure", g.remap_failure},
                                   {"remap_pending", g.remap_pending}};
  std::string summary = absl::StrCat(
      Name(g), ": ",
      failure ? "row remapping failed" : absl::StrCat(g.ecc_uncorrected, " uncorrectable ECC errors"),
      g.remap_pending > 0 ? " (row remap pending: reset the GPU when drained)" : "");
  if (!active) summary = absl::StrCat(Name(g), ": no uncorrectable memory error for ",
                                      absl::FormatDuration(options_.memory_hold));
  Report(g, g.memory, IncidentKind::kGpuMemoryError, active, state != g.memory.reasons,
         Severity::kCritical, at, std::move(ev), std::move(summary), out);
  g.memory.reasons = g.memory.open ? state : 0;
}

void GpuDetector::Advance(absl::Time now, std::vector<Finding>& out) {
  // Power cap: blamed only where the GPU's SM clock (against its maximum) is below its busy
  // peers' median by the deficit.
  std::vector<std::pair<std::string, double>> ratios;
  for (auto& [key, g] : gpus_) {
    if (Busy(g) && g.clock.q.size() >= static_cast<size_t>(std::max(1, options_.min_samples)) &&
        g.last_seen >= now - options_.stale_after) {
      ratios.emplace_back(key, g.clock.Share());
    }
  }
  for (auto& [key, g] : gpus_) {
    double peer = -1;
    bool blamed = false;
    if (ReasonShare(g, kPowerCap) >= options_.power_cap_share && Busy(g) && !g.clock.q.empty() &&
        g.last_seen >= now - options_.stale_after) {
      std::vector<double> others;
      for (const auto& [k, r] : ratios) {
        if (k != key) others.push_back(r);
      }
      if (others.size() >= static_cast<size_t>(std::max(1, options_.power_cap_min_peers))) {
        std::nth_element(others.begin(), others.begin() + others.size() / 2, others.end());
        peer = others[others.size() / 2];
        blamed = g.clock.Share() < peer * (1 - options_.power_cap_clock_deficit);
      }
    }
    bool& was = power_capped_[key];
    if (blamed != was) {
      was = blamed;
      JudgeThrottle(g, std::max(g.last_seen, absl::UnixEpoch()), blamed, peer, out);
    }
    // Staleness: a GPU nobody samples any more (node gone, agent stopped).
    if (g.last_seen < now - options_.stale_after) {
      const std::string why = absl::StrCat(Name(g), ": no samples for ",
                                           absl::FormatDuration(options_.stale_after));
      Report(g, g.throttled, IncidentKind::kGpuThrottled, false, false, Severity::kWarning,
             now, {}, why, out);
      Report(g, g.pcie, IncidentKind::kGpuPcieDegraded, false, false, Severity::kWarning, now,
             {}, why, out);
    }
    if (g.xid.open && now - g.last_xid >= options_.xid_hold) {
      Report(g, g.xid, IncidentKind::kGpuXid, false, false, Severity::kWarning,
             g.last_xid + options_.xid_hold, {},
             absl::StrCat("no XID for ", absl::FormatDuration(options_.xid_hold)), out);
    }
    if (g.memory.open && g.remap_failure == 0 && now - g.last_memory_error >= options_.memory_hold) {
      JudgeMemory(g, g.last_memory_error + options_.memory_hold, out);
    }
  }
}

double GpuDetector::ComputeProcesses(absl::string_view node, absl::string_view index) const {
  auto it = gpus_.find(Key(node, index));
  return it == gpus_.end() ? -1 : it->second.compute_processes;
}

bool GpuDetector::Restore(const Finding& f) {
  if (f.kind != IncidentKind::kGpuThrottled && f.kind != IncidentKind::kGpuXid &&
      f.kind != IncidentKind::kGpuMemoryError && f.kind != IncidentKind::kGpuPcieDegraded) {
    return false;
  }
  auto node = f.entity.find("node");
  auto gpu = f.entity.find("gpu");
  if (node == f.entity.end() || gpu == f.entity.end()) return false;
  Gpu& g = GpuOf(node->second, gpu->second);
  Open* o = f.kind == IncidentKind::kGpuThrottled ? &g.throttled
            : f.kind == IncidentKind::kGpuXid     ? &g.xid
            : f.kind == IncidentKind::kGpuMemoryError ? &g.memory
                                                      : &g.pcie;
  o->open = true;
  o->entity = f.entity;
  o->reasons = ~0u;  // the next judgement reports afresh
  // Holds count from the restore; the others resolve when their signal is seen clean or stale.
  g.last_seen = std::max(g.last_seen, f.at);
  if (f.kind == IncidentKind::kGpuXid) g.last_xid = std::max(g.last_xid, f.at);
  if (f.kind == IncidentKind::kGpuMemoryError) g.last_memory_error = std::max(g.last_memory_error, f.at);
  return true;
}

}  // namespace ringside::analysis
