#include "analysis/detection_options.h"

#include <cstddef>
#include <functional>
#include <variant>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace ringside::analysis {
namespace {

using Field = std::variant<absl::Duration*, double*, int*, bool*, size_t*, std::vector<int>*>;

struct Entry {
  const char* name;
  std::function<Field(FabricAnalysisOptions&)> field;
  const char* help;
};

#define RS_OPT(name, member, help) \
  Entry { name, [](FabricAnalysisOptions& o) -> Field { return &o.member; }, help }

const std::vector<Entry>& Table() {
  static const std::vector<Entry>* table = new std::vector<Entry>{
      // Links.
      RS_OPT("link.flap_cycles", link.flap_cycles, "down→up cycles that make a link flapping"),
      RS_OPT("link.flap_window", link.flap_window, "... within this window"),
      RS_OPT("link.flap_quiet", link.flap_quiet, "flapping resolves after this without a transition"),
      RS_OPT("link.event_slack", link.event_slack, "an event matches a sampled interval this close"),
      RS_OPT("link.state_stale_after", link.state_stale_after,
             "a state series not sampled this long no longer counts"),
      RS_OPT("link.symbol_errors_per_hour", link.symbol_errors_per_hour,
             "symbol errors per hour over symbol_window → degraded (critical)"),
      RS_OPT("link.symbol_window", link.symbol_window, "window of the symbol-error rule"),
      RS_OPT("link.symbol_burst_per_s", link.symbol_burst_per_s,
             "symbol errors per second over one step → degraded (warning)"),
      RS_OPT("link.rate_min_interval", link.rate_min_interval,
             "per-second error rates are taken over at least this long (shorter steps joined)"),
      RS_OPT("link.ufm_ber", link.ufm_ber, "UFM PDR BER bound (0 = off)"),
      RS_OPT("link.link_error_recovery_per_min", link.link_error_recovery_per_min,
             "link_error_recovery per minute → degraded (warning)"),
      RS_OPT("link.port_rcv_errors_per_s", link.port_rcv_errors_per_s,
             "port_rcv_errors per second → degraded (warning)"),
      RS_OPT("link.local_link_integrity_any", link.local_link_integrity_any,
             "any local_link_integrity_errors → degraded (critical)"),
      RS_OPT("link.nvlink_window", link.nvlink_window, "NVLink health window"),
      RS_OPT("link.nvlink_replay_recovery_any", link.nvlink_replay_recovery_any,
             "any NVLink replay/recovery error → degraded (critical)"),
      RS_OPT("link.nvlink_crc_per_s", link.nvlink_crc_per_s,
             "NVLink CRC errors per second → degraded (critical)"),
      RS_OPT("link.nvlink5_errors_any", link.nvlink5_errors_any,
             "any NVLink5 recovery/symbol/effective error → degraded (critical)"),
      RS_OPT("link.nvlink_effective_ber", link.nvlink_effective_ber,
             "NVLink effective BER worse than this → degraded (critical)"),
      RS_OPT("link.clean_window", link.clean_window, "degraded resolves after this without a breach"),
      RS_OPT("link.stale_after", link.stale_after, "a link with no input this long resolves"),
      // Pause storms.
      RS_OPT("pause_storm.storm_fraction", pause_storm.storm_fraction,
             "paused fraction of a sample's wall time that counts as storming"),
      RS_OPT("pause_storm.storm_samples", pause_storm.storm_samples,
             "consecutive storming samples that open a pause_storm"),
      RS_OPT("pause_storm.storm_events", pause_storm.storm_events,
             "mlx5 tx_pause_storm_*_events open a pause_storm at once"),
      RS_OPT("pause_storm.origin_min_fraction", pause_storm.origin_min_fraction,
             "tx paused fraction from which a port is an origin candidate"),
      RS_OPT("pause_storm.spread_fraction", pause_storm.spread_fraction,
             "rx paused fraction from which a port is listed as reached"),
      RS_OPT("pause_storm.infer_samples", pause_storm.infer_samples,
             "without a leaf: a port paused on another node within this many samples of an "
             "active origin's start is its spread (0 off)"),
      RS_OPT("pause_storm.quiet_fraction", pause_storm.quiet_fraction,
             "paused fraction below which a sample is quiet"),
      RS_OPT("pause_storm.restoration_time", pause_storm.restoration_time,
             "a pause_storm resolves after this quiet"),
      RS_OPT("pause_storm.recent", pause_storm.recent, "port data older than this is not used"),
      RS_OPT("pause_storm.stale_after", pause_storm.stale_after,
             "a storm with no observed port this long resolves"),
      // Congestion.
      RS_OPT("congestion.min_rate", congestion.min_rate, "ECN-marked/CNP per second that is congestion"),
      RS_OPT("congestion.sustain_samples", congestion.sustain_samples,
             "consecutive samples at or above min_rate"),
      RS_OPT("congestion.resolve_ratio", congestion.resolve_ratio,
             "resolution below min_rate × this ..."),
      RS_OPT("congestion.clear_window", congestion.clear_window, "... for this long"),
      RS_OPT("congestion.stale_after", congestion.stale_after, "no samples this long: resolve"),
      // Stragglers and job slowdown.
      RS_OPT("straggler.window", straggler.window, "collective instances per communicator judged together"),
      RS_OPT("straggler.min_count", straggler.min_count, "late arrivals in the window to flag a rank"),
      RS_OPT("straggler.min_last_fraction", straggler.min_last_fraction,
             "... and at least this fraction of the window"),
      RS_OPT("straggler.resolve_fraction", straggler.resolve_fraction,
             "resolved when late in at most this fraction of a full window"),
      RS_OPT("straggler.min_margin", straggler.min_margin, "smallest lateness behind the communicator's median arrival"),
      RS_OPT("straggler.min_margin_ratio", straggler.min_margin_ratio,
             "lateness at least this × the instance's collective time"),
      RS_OPT("straggler.min_wait_fraction", straggler.min_wait_fraction,
             "the bulk's wait for the rank at least this fraction of the window's wall time"),
      RS_OPT("straggler.victim_wait_fraction", straggler.victim_wait_fraction,
             "a rank waiting on p2p at least this much is a victim, not a culprit"),
      RS_OPT("straggler.min_busy_ratio", straggler.min_busy_ratio,
             "busy-time ratio against the largest communicator's median"),
      RS_OPT("straggler.clock_error_ratio", straggler.clock_error_ratio,
             "enqueue times across nodes compared only when 2 × the clock error bound is at most "
             "this × the margin"),
      RS_OPT("straggler.gpu_sharing", straggler.gpu_sharing,
             "leave out the kernel wait that GPU time-sharing explains"),
      RS_OPT("straggler.max_pending_per_comm", straggler.max_pending_per_comm,
             "instances waiting for their last rank, per communicator"),
      RS_OPT("straggler.pending_timeout", straggler.pending_timeout,
             "an instance missing ranks this long is dropped"),
      RS_OPT("straggler.baseline_instances", straggler.baseline_instances,
             "instances that make a job's baseline collective time"),
      RS_OPT("straggler.slowdown_window", straggler.slowdown_window,
             "recent instances compared with the baseline"),
      RS_OPT("straggler.slowdown_ratio", straggler.slowdown_ratio, "job_slowdown at this × baseline"),
      RS_OPT("straggler.slowdown_resolve_ratio", straggler.slowdown_resolve_ratio,
             "job_slowdown resolves below this × baseline"),
      RS_OPT("straggler.slowdown_min_delta", straggler.slowdown_min_delta,
             "and at least this much slower than the baseline"),
      // Correlation and incidents.
      RS_OPT("correlator.window", correlator.window,
             "a fabric incident explains a straggler within this time"),
      RS_OPT("correlator.rank_ttl", correlator.rank_ttl,
             "a rank not seen this long no longer runs behind a node"),
      RS_OPT("correlator.max_causes", correlator.max_causes, "cause links kept per incident"),
      RS_OPT("incidents.unconfirmed_timeout", incidents.unconfirmed_timeout,
             "a restored incident nobody re-asserts resolves after this"),
      RS_OPT("incidents.keep_resolved", incidents.keep_resolved, "resolved incidents kept in memory"),
      // GPU faults (analysis/gpu_detector.h).
      RS_OPT("gpu.window", gpu.window, "window over which a GPU's throttled share is judged"),
      RS_OPT("gpu.throttle_share", gpu.throttle_share,
             "HW slowdown, HW thermal or power-brake share of the window → gpu_throttled (critical)"),
      RS_OPT("gpu.sw_thermal_share", gpu.sw_thermal_share,
             "SW thermal slowdown share of the window → gpu_throttled (warning)"),
      RS_OPT("gpu.resolve_share", gpu.resolve_share,
             "gpu_throttled resolves when every reason is below this share"),
      RS_OPT("gpu.min_samples", gpu.min_samples,
             "clock-event-reason samples in the window before a reason bit is judged"),
      RS_OPT("gpu.power_cap_share", gpu.power_cap_share,
             "power-capped share from which a GPU slower than its peers is blamed"),
      RS_OPT("gpu.power_cap_clock_deficit", gpu.power_cap_clock_deficit,
             "... when its SM clock/max is this fraction below its busy peers' median"),
      RS_OPT("gpu.power_cap_min_peers", gpu.power_cap_min_peers,
             "busy peer GPUs needed for the power-cap comparison"),
      RS_OPT("gpu.busy_utilization", gpu.busy_utilization,
             "utilization (%) from which a GPU is busy (PCIe and power cap are judged only then)"),
      RS_OPT("gpu.pcie_min_duration", gpu.pcie_min_duration,
             "PCIe below its max generation or width while busy this long → gpu_pcie_degraded"),
      RS_OPT("gpu.pcie_replay_per_min", gpu.pcie_replay_per_min,
             "PCIe replays per minute over the window → gpu_pcie_degraded (0 off)"),
      RS_OPT("gpu.xids", gpu.xids, "XIDs that raise gpu_xid (list: 79;119 or 79 119)"),
      RS_OPT("gpu.critical_xids", gpu.critical_xids, "XIDs whose gpu_xid is critical"),
      RS_OPT("gpu.xid_hold", gpu.xid_hold, "gpu_xid resolves after this without another XID"),
      RS_OPT("gpu.memory_hold", gpu.memory_hold,
             "gpu_memory_error resolves after this without an uncorrectable error"),
      RS_OPT("gpu.stale_after", gpu.stale_after,
             "a GPU not sampled this long: its gpu_throttled and gpu_pcie_degraded resolve"),
      // Host evidence of a straggler's cause (analysis/host_signals.h).
      RS_OPT("host.window", host.window, "window of the host pressure and cgroup throttling shares"),
      RS_OPT("host.cpu_pressure_share", host.cpu_pressure_share,
             "CPU pressure (some) share of the window that is a straggler's host cause"),
      RS_OPT("host.memory_pressure_share", host.memory_pressure_share,
             "memory pressure (some) share that is a straggler's host cause"),
      RS_OPT("host.io_pressure_share", host.io_pressure_share,
             "IO pressure (some) share that is a straggler's host cause"),
      RS_OPT("host.cgroup_throttled_share", host.cgroup_throttled_share,
             "share of the rank's cgroup CFS periods throttled that is its host cause"),
  };
  return *table;
}

#undef RS_OPT

absl::Status Bad(absl::string_view name, absl::string_view value, absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat("detection option ", name, ": \"", value, "\" is not ", want));
}

struct Setter {
  absl::string_view name;
  absl::string_view value;
  absl::Status operator()(absl::Duration* d) const {
    absl::Duration v;
    if (!absl::ParseDuration(value, &v) || v < absl::ZeroDuration()) {
      return Bad(name, value, "a duration (e.g. 90s, 5m, 200us)");
    }
    *d = v;
    return absl::OkStatus();
  }
  absl::Status operator()(double* d) const {
    double v;
    if (!absl::SimpleAtod(value, &v) || !(v >= 0)) return Bad(name, value, "a number ≥ 0");
    *d = v;
    return absl::OkStatus();
  }
  absl::Status operator()(int* i) const {
    int v;
    if (!absl::SimpleAtoi(value, &v) || v < 0) return Bad(name, value, "an integer ≥ 0");
    *i = v;
    return absl::OkStatus();
  }
  absl::Status operator()(size_t* i) const {
    uint64_t v;
    if (!absl::SimpleAtoi(value, &v)) return Bad(name, value, "an integer ≥ 0");
    *i = static_cast<size_t>(v);
    return absl::OkStatus();
  }
  absl::Status operator()(bool* b) const {
    bool v;
    if (!absl::SimpleAtob(value, &v)) return Bad(name, value, "true or false");
    *b = v;
    return absl::OkStatus();
  }
  absl::Status operator()(std::vector<int>* l) const {
    std::vector<int> v;
    for (absl::string_view item : absl::StrSplit(value, absl::ByAnyChar("; \t"), absl::SkipEmpty())) {
      int x;
      if (!absl::SimpleAtoi(item, &x) || x < 0) {
        return Bad(name, value, "a list of integers ≥ 0 (79;119 or \"79 119\")");
      }
      v.push_back(x);
    }
    *l = std::move(v);
    return absl::OkStatus();
  }
};

struct Printer {
  std::string operator()(absl::Duration* d) const { return absl::FormatDuration(*d); }
  std::string operator()(double* d) const { return absl::StrFormat("%g", *d); }
  std::string operator()(int* i) const { return absl::StrCat(*i); }
  std::string operator()(size_t* i) const { return absl::StrCat(*i); }
  std::string operator()(bool* b) const { return *b ? "true" : "false"; }
  std::string operator()(std::vector<int>* l) const { return absl::StrJoin(*l, ";"); }
};

struct Typer {
  const char* operator()(absl::Duration*) const { return "duration"; }
  const char* operator()(double*) const { return "number"; }
  const char* operator()(int*) const { return "integer"; }
  const char* operator()(size_t*) const { return "integer"; }
  const char* operator()(bool*) const { return "bool"; }
  const char* operator()(std::vector<int>*) const { return "list"; }
};

}  // namespace

absl::Status SetDetectionOption(FabricAnalysisOptions& options, absl::string_view name,
                                absl::string_view value) {
  name = absl::StripAsciiWhitespace(name);
  value = absl::StripAsciiWhitespace(value);
  for (const Entry& e : Table()) {
    if (name == e.name) return std::visit(Setter{name, value}, e.field(options));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown detection option \"", name,
      "\" (ringside-aggregator --list-detection-options lists them)"));
}

absl::Status ParseDetectionConfig(absl::string_view text, FabricAnalysisOptions& options) {
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    size_t sep = line.find('=');
    if (sep == absl::string_view::npos) sep = line.find_first_of(" \t");
    if (sep == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": expected \"name = value\", got \"", line, "\""));
    }
    absl::Status s = SetDetectionOption(options, line.substr(0, sep), line.substr(sep + 1));
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ParseDetectionAssignments(absl::string_view list, FabricAnalysisOptions& options) {
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected name=value, got \"", item, "\""));
    }
    if (absl::Status s = SetDetectionOption(options, item.substr(0, eq), item.substr(eq + 1));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

std::vector<DetectionOptionInfo> ListDetectionOptions(const FabricAnalysisOptions& options) {
  FabricAnalysisOptions copy = options;
  std::vector<DetectionOptionInfo> out;
  for (const Entry& e : Table()) {
    Field f = e.field(copy);
    out.push_back({e.name, std::visit(Typer{}, f), std::visit(Printer{}, f), e.help});
  }
  return out;
}

}  // namespace ringside::analysis
