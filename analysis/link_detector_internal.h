// Shared by link_detector.cc (link_down, link_flapping) and link_degraded.cc (link_degraded):
// the series the detector reads and its per-link state. Not part of the API.
#ifndef RINGSIDE_ANALYSIS_LINK_DETECTOR_INTERNAL_H_
#define RINGSIDE_ANALYSIS_LINK_DETECTOR_INTERNAL_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/compact_time.h"
#include "analysis/link_detector.h"

namespace ringside::analysis {
namespace link_internal {

enum Code : uint8_t {
  kNone = 0,
  // counters of downs
  kLinkDowned,
  kCarrierDown,
  kCarrierChanges,
  kLinkDownEventsPhy,
  // error counters
  kSymbolError,
  kPcsSymbol,
  kLinkErrorRecovery,
  kPortRcvErrors,
  kLocalLinkIntegrity,
  kNvReplay,
  kNvRecovery,
  kNvCrcFlit,
  kNvCrcData,
  kNv5RecoveryEvents,
  kNv5RecoveryFailed,
  kNv5Symbol,
  kNv5Effective,
  // states and gauges
  kIbState,
  kIbPhysState,
  kOperstate,
  kNvLinkState,
  kNvEffectiveBer,
  kIbRate,
};

struct Name {
  absl::string_view name;
  Code code;
};
constexpr Name kInfiniband[] = {
    {"link_downed", kLinkDowned},
    {"symbol_error", kSymbolError},
    {"link_error_recovery", kLinkErrorRecovery},
    {"port_rcv_errors", kPortRcvErrors},
    {"local_link_integrity_errors", kLocalLinkIntegrity},
};
constexpr Name kInfinibandPort[] = {
    {"state", kIbState}, {"phys_state", kIbPhysState}, {"rate", kIbRate}};
constexpr Name kNetdev[] = {{"carrier_down_count", kCarrierDown},
                            {"carrier_changes", kCarrierChanges},
                            {"operstate", kOperstate}};
constexpr Name kEthtool[] = {{"link_down_events_phy", kLinkDownEventsPhy},
                             {"rx_pcs_symbol_err_phy", kPcsSymbol}};
constexpr Name kNvlink[] = {
    {"link_state", kNvLinkState},
    {"replay_errors", kNvReplay},
    {"recovery_errors", kNvRecovery},
    {"crc_flit_errors", kNvCrcFlit},
    {"crc_data_errors", kNvCrcData},
    {"recovery_events", kNv5RecoveryEvents},
    {"recovery_failed_events", kNv5RecoveryFailed},
    {"symbol_errors", kNv5Symbol},
    {"effective_errors", kNv5Effective},
    {"effective_ber", kNvEffectiveBer},
};

template <size_t N>
inline Code Find(const Name (&table)[N], absl::string_view counter) {
  for (const Name& n : table) {
    if (n.name == counter) return n.code;
  }
  return kNone;
}

inline Code Classify(absl::string_view source, absl::string_view counter) {
  if (source == "infiniband") return Find(kInfiniband, counter);
  if (source == "infiniband_port") return Find(kInfinibandPort, counter);
  if (source == "ibmad") {  // the fabric scan: a switch (or remote) port, sysfs names
    const Code c = Find(kInfiniband, counter);
    return c != kNone ? c : Find(kInfinibandPort, counter);
  }
  if (source == "netdev") return Find(kNetdev, counter);
  if (source == "ethtool") return Find(kEthtool, counter);
  if (source == "nvlink") return Find(kNvlink, counter);
  return kNone;
}

// Witnesses of a down: each source of evidence counts a given down once.
constexpr uint16_t kWEventNetlink = 1 << 0;
constexpr uint16_t kWEventVerbs = 1 << 1;
constexpr uint16_t kWEventOther = 1 << 2;
constexpr uint16_t kWState = 1 << 3;
constexpr uint16_t kWLinkDowned = 1 << 4;
constexpr uint16_t kWCarrierDown = 1 << 5;
constexpr uint16_t kWLinkDownPhy = 1 << 6;
constexpr uint16_t kWCarrierChanges = 1 << 7;
constexpr uint16_t kWEvents = kWEventNetlink | kWEventVerbs | kWEventOther;
constexpr uint16_t kWCounters = kWLinkDowned | kWCarrierDown | kWLinkDownPhy | kWCarrierChanges;

inline uint16_t EventWitness(absl::string_view source) {
  if (source == "netlink") return kWEventNetlink;
  if (source == "verbs") return kWEventVerbs;
  return kWEventOther;
}

inline LinkState StateOf(Code code, double v) {
  const int id = static_cast<int>(std::lround(v));
  switch (code) {
    case kIbState:  // 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER
      if (id >= 4) return LinkState::kUp;
      if (id >= 1) return LinkState::kDown;
      return LinkState::kUnknown;
    case kIbPhysState:  // 1 Sleep, 2 Polling, 3 Disabled, 5 LinkUp, 4/6/7 training, recovery, test
      if (id == 5) return LinkState::kUp;
      if (id >= 1 && id <= 3) return LinkState::kDown;
      return LinkState::kUnknown;
    case kOperstate:  // RFC 2863: 6 up; 2 down, 3 lowerlayerdown
      if (id == 6) return LinkState::kUp;
      if (id == 2 || id == 3) return LinkState::kDown;
      return LinkState::kUnknown;
    case kNvLinkState:
      return id == 1 ? LinkState::kUp : id == 0 ? LinkState::kDown : LinkState::kUnknown;
    default:
      return LinkState::kUnknown;
  }
}

// NVML's packed BER (mantissa in bits 8-11, exponent in bits 0-7; 15/255 means zero), or an
// already decoded ratio.
inline double DecodeBer(double v) {
  if (!(v >= 1)) return v > 0 ? v : 0;
  const uint64_t packed = static_cast<uint64_t>(v);
  const unsigned exponent = packed & 0xff;
  const unsigned mantissa = (packed >> 8) & 0xf;
  if (mantissa == 15 && exponent == 255) return 0;
  return mantissa * std::pow(10.0, -static_cast<double>(exponent));
}

inline absl::string_view ErrorName(int code) {
  switch (code) {
    case kSymbolError:
      return "symbol_error";
    case kPcsSymbol:
      return "rx_pcs_symbol_err_phy";
    case kLinkErrorRecovery:
      return "link_error_recovery";
    case kPortRcvErrors:
      return "port_rcv_errors";
    case kLocalLinkIntegrity:
      return "local_link_integrity_errors";
    case kNvReplay:
      return "replay_errors";
    case kNvRecovery:
      return "recovery_errors";
    case kNvCrcFlit:
      return "crc_flit_errors";
    case kNvCrcData:
      return "crc_data_errors";
    case kNv5RecoveryEvents:
      return "recovery_events";
    case kNv5RecoveryFailed:
      return "recovery_failed_events";
    case kNv5Symbol:
      return "symbol_errors";
    case kNv5Effective:
      return "effective_errors";
  }
  return "errors";
}

constexpr size_t kMaxDowns = 64;

// A deque allocated on first use: most error series never count an error, and an empty std::deque
// still allocates its map and a 512-byte node.
template <typename T>
class LazyDeque {
 public:
  bool empty() const { return q_ == nullptr || q_->empty(); }
  const T& front() const { return q_->front(); }
  void pop_front() { q_->pop_front(); }
  void push_back(const T& v) {
    if (q_ == nullptr) q_ = std::make_unique<std::deque<T>>();
    q_->push_back(v);
  }
  void clear() { q_.reset(); }
  // The elements (null when there never were any, or after clear()).
  const std::deque<T>* get() const { return q_.get(); }

 private:
  std::unique_ptr<std::deque<T>> q_;
};

}  // namespace link_internal

struct LinkDetector::Down {
  CompactTime lo, hi;  // when it happened, narrowed by each witness
  CompactTime at;      // best estimate (an event's own time when one saw it)
  CompactTime up_at;
  uint16_t witnesses = 0;
  enum Status : uint8_t { kOpen, kPending, kCompleted } status = kPending;
  bool seen = false;      // seen as a down state (event or sample): link_down was handled there
  bool reported = false;  // counted into a link_down or a link_flapping finding
};

// A link's record. The fields every sample reads come first and the state series are kept
// inline, so that a sample that changes nothing touches a few adjacent cache lines: the detector
// visits every link once per sampling interval, far more links than fit in the L2 cache. Times
// are kept in 8 bytes (compact_time.h).
struct LinkDetector::Link {
  Link() = default;
  Link(const Link&) = delete;  // `node` views the record's own `key`
  Link& operator=(const Link&) = delete;

  // --- read or written by every sample ---
  CompactTime last_input = absl::InfinitePast();
  CompactTime state_time = absl::InfinitePast();
  CompactTime sample_time = absl::InfinitePast();
  CompactTime prev_sample_time = absl::InfinitePast();
  CompactTime last_transition = absl::InfinitePast();
  LinkState state = LinkState::kUnknown;
  bool was_up = false;
  bool has_state_source = false;
  bool down_open = false;
  bool flapping_open = false;
  bool degraded_open = false;
  uint8_t n_series = 0;
  // Error series (bit = link_internal::Code): seen at all, and needing a look at a step that
  // counts nothing (stuck at their maximum, or errors still in their window). A step of Δ 0 on a
  // series seen and not needing a look changes nothing and skips ObserveError.
  uint32_t err_present = 0;
  uint32_t err_attention = 0;
  struct Series {
    link_internal::Code code;
    LinkState state;
    CompactTime time;
  };
  // At most one per state code (infiniband_port state and phys_state, operstate, nvlink
  // link_state).
  static constexpr size_t kMaxSeries = 4;
  std::array<Series, kMaxSeries> series{};
  std::vector<Down> downs;  // oldest first, at most kMaxDowns

  // --- read when something happens ---
  uint64_t carrier_residual = 0;  // carrier_changes not yet paired into a down and an up
  CompactTime carrier_residual_since;
  int flapping_reported_cycles = 0;
  uint64_t flap_cycles_total = 0;

  struct Hit {
    absl::Time time;
    double count;
  };
  // A step that counted, for rates over at least LinkOptions::rate_min_interval (SpanRate).
  struct Counted {
    absl::Time start, end;
    double count;
  };
  struct ErrSeries {
    link_internal::Code code = link_internal::kNone;
    bool stuck = false;  // saturated at its maximum
    double sum = 0;
    uint64_t total = 0;
    link_internal::LazyDeque<Hit> hits;
    // Since when the series' steps are known without a gap (the start of the first usable step,
    // or of the first after an unusable one), and its counting steps of the last
    // rate_min_interval: between them, steps counted 0.
    CompactTime known_since = absl::InfiniteFuture();
    link_internal::LazyDeque<Counted> recent;
  };
  std::vector<ErrSeries> errs;
  double rate_bits_per_s = 0;
  Severity degraded_severity = Severity::kWarning;
  CompactTime last_breach = absl::InfinitePast();
  // The open link_degraded incident's rules and evidence: only while one is open (most links
  // never have one; 80 bytes a link otherwise).
  struct DegradedNote {
    std::string rule;
    std::map<std::string, double> evidence;
  };
  std::unique_ptr<DegradedNote> degraded;
  DegradedNote& Degraded() {
    if (degraded == nullptr) degraded = std::make_unique<DegradedNote>();
    return *degraded;
  }

  // --- names ---
  std::string key;         // node \0 PortId::Key(): links_'s key views it (the record never moves)
  absl::string_view node;  // the node's name: the start of `key`
  PortId id;
  RecordEntity entity;  // of `id`, or as restored
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_LINK_DETECTOR_INTERNAL_H_
