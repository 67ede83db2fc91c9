// Per-series state for the aggregator: the last raw reading and its time, the counter's kind,
// width and saturation, how the last step was classified (normal, wrap, reset, saturated told
// apart), the cumulative delta since the series was first seen with that first reading, and a
// bounded window of recent per-second rates (counters) or values (gauges, states) for the
// detectors.
//
// A NodeSeries holds one node's series, sorted by the agent's id, with a limit on how many; a
// SeriesStore holds the nodes, with a limit on how many. Pure logic: time is the sample's own
// timestamp.
//
// Memory: one series costs NodeSeries::kBytesPerSeries (60) bytes, everything included — its
// state, its baseline, its id (the table is sorted by id: no index) and a 4-byte handle to its
// identity (source, device, port, counter, unit, priority), interned once for all nodes in a
// SeriesIdentityPool. To fit, times are kept as 32-bit counts of 10 µs from a per-node base
// (about ±6 h around it; see NodeSeries), the first sample's time to the second, and the rate
// window as bfloat16 (analysis/bfloat16.h: float32's range, 8 significant bits, at most 0.4 %
// off). Raw values and totals are exact; so are the rates a step returns (StepResult, the
// detectors' input): only the stored window is rounded.
//
// Thread safety: SeriesStore's node table and SeriesIdentityPool are thread-safe; one NodeSeries
// is thread-compatible (the caller serializes access to one node; different nodes run in
// parallel).
#ifndef RINGSIDE_ANALYSIS_SERIES_STATE_H_
#define RINGSIDE_ANALYSIS_SERIES_STATE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "analysis/counter_math.h"
#include "analysis/series_identity.h"

namespace ringside::analysis {

enum class SeriesKind : uint8_t { kCounter = 0, kGauge = 1, kState = 2 };
absl::string_view SeriesKindName(SeriesKind kind);  // counter, gauge, state

// How the last sample of a series was taken in.
enum class StepKind : uint8_t {
  kNone = 0,   // no sample yet
  kBaseline,   // the first sample: nothing to compare with
  kNormal,     // counter: cur >= prev
  kWrap,       // counter: passed its width's maximum
  kReset,      // counter: dropped with no wrap (driver reload, perfquery -R); delta = cur
  kSaturated,  // counter: a saturating counter at all-ones; delta is a lower bound, rate unknown
  kInvalid,    // counter: a value beyond the width; ignored (the baseline is kept)
  kValue,      // gauge or state: a new value
};
absl::string_view StepKindName(StepKind kind);

inline constexpr int kRateWindow = 8;

// A copy of one series' state, for readers (NodeSeries::Find, SeriesView). Rates are per second
// over the step that ended at each sample (NaN when unknown: saturated or invalid steps, or a
// step from a sample older than the node's time range); for gauges and states the window holds
// values. Window values come from bfloat16 (within 0.4 %).
struct SeriesState {
  uint64_t last_raw = 0;
  // Unix nanoseconds of last_raw on the agent's clock, to 10 µs (rounded down); 0 before the
  // first sample, and when the sample is older than the node's time range (about 6 h).
  int64_t last_time_ns = 0;
  // Sum of the counter's deltas since the aggregator first saw the series (modulo 2^64): over any
  // stretch of samples, including ones with wraps or missing batches, the difference of two totals
  // equals the counter's increase. Resets add the value counted since the reset; saturated steps
  // add their lower bound.
  uint64_t total = 0;
  float window[kRateWindow] = {};
  SeriesKind kind = SeriesKind::kCounter;
  uint8_t width = 64;  // 1..64
  uint8_t flags = 0;
  StepKind last_step = StepKind::kNone;
  uint8_t window_next = 0;  // slot of the next write
  uint8_t window_size = 0;  // 0..kRateWindow
  uint16_t steps = 0;       // samples taken in since the baseline (saturates at 32767)

  static constexpr uint8_t kSaturates = 1;
  static constexpr uint8_t kHasValue = 2;

  bool saturates() const { return (flags & kSaturates) != 0; }
  bool has_value() const { return (flags & kHasValue) != 0; }
  // The window, oldest first. Returns how many were written to `out`.
  int Window(float out[kRateWindow]) const;
  // The newest rate (or value); NaN when the window is empty.
  float LatestRate() const;
};

// What one sample did.
struct StepResult {
  bool accepted = false;  // false: not newer than the last sample (out of order), ignored
  StepKind kind = StepKind::kNone;
  uint64_t delta = 0;  // counters: the increase this step
  float rate = 0;      // counters: per second (NaN when unknown); gauges/states: the value
};

// One accepted sample with its series' names, for observers (the detectors' CounterStep and
// StateSample are built from it). The views point at interned names: valid while the caller holds
// the node (see NodeSeries).
struct ObservedSample {
  uint32_t id = 0;
  absl::string_view source;
  absl::string_view device;
  absl::string_view port;
  absl::string_view counter;
  int32_t priority = -1;
  SeriesKind kind = SeriesKind::kCounter;
  int64_t time_ns = 0;       // the sample's own time, exact
  int64_t prev_time_ns = 0;  // of the previous accepted sample, to 10 µs (0 for a baseline, or
                             // when that sample is older than the node's time range)
  uint64_t raw = 0;
  StepResult step;
  // The series' interned identity (series_identity.h) when the sample came through a NodeSeries:
  // its handle and generation (0: none), for callers that cache per identity.
  uint32_t identity = 0;
  uint32_t identity_generation = 0;
  // The series' index in its node's table (dense from 0; a series removed or redefined may move
  // it, so a caller keeping state by slot checks the identity too, or the layout).
  uint32_t slot = 0;
  // The node table's NodeSeries::layout() when the sample came through one (0: none): while it
  // stays the same, each slot names the same series.
  uint64_t layout = 0;
};

// A series as an agent declares it (ringside.v1 SeriesDef).
struct SeriesDefinition {
  uint32_t id = 0;
  std::string source;
  std::string device;
  std::string port;
  std::string counter;
  std::string unit;
  int32_t priority = -1;
  SeriesKind kind = SeriesKind::kCounter;
  uint8_t width = 64;
  bool saturates = false;
  uint8_t term_width = 0;  // 32: a sum of 32-bit wrapping counters (counter_math.h); else 0
};

// The same with its names as views (into a received message, for the lifetime of a Define call):
// what the aggregator's ingest defines series from, without copying a name.
struct SeriesDefinitionRef {
  uint32_t id = 0;
  absl::string_view source;
  absl::string_view device;
  absl::string_view port;
  absl::string_view counter;
  absl::string_view unit;
  int32_t priority = -1;
  SeriesKind kind = SeriesKind::kCounter;
  uint8_t width = 64;
  bool saturates = false;
  uint8_t term_width = 0;

  static SeriesDefinitionRef Of(const SeriesDefinition& def);
  SeriesDefinition Owned() const;  // the same with its names copied
};

// What a DefineAll did.
struct DefineCounts {
  size_t added = 0;      // kNew
  size_t redefined = 0;  // kUpdated or kReplaced
  size_t unchanged = 0;  // kUnchanged
};

// A copy of one series for readers (debug endpoint, detectors).
struct SeriesView {
  SeriesDefinition def;
  SeriesState state;
  // The first sample taken in (the baseline of `state.total`): total == the counter's increase
  // since then. first_time_ns is to the second (rounded down). 0/0 before any sample.
  uint64_t first_raw = 0;
  int64_t first_time_ns = 0;
};

struct SeriesLimits {
  size_t max_series_per_node = 10000;
  size_t max_string_bytes = 256;  // each of source, device, port, counter, unit
};

namespace series_internal {

// The stored form of one series: 60 bytes, 4-byte aligned (so a table of them has no padding).
#pragma pack(push, 4)
struct PackedSeries {
  uint64_t last_raw;
  uint64_t total;
  uint64_t first_raw;
  int32_t last_tick;     // time of last_raw: 10 µs units from the node's base; kUnknownTick
  int32_t first_second;  // time of first_raw: seconds from the node's origin
  uint32_t id;
  uint32_t identity;             // SeriesIdentityPool handle
  uint16_t window[kRateWindow];  // bfloat16
  uint8_t kind_width;            // kind << 6 | (width - 1)
  uint8_t bits;                  // last_step | saturates << 3 | has_value << 4 | window_next << 5
  uint16_t steps;  // samples since the baseline (bits 0-14) | a sum of 32-bit terms << 15
};
#pragma pack(pop)

}  // namespace series_internal

// One node's series, sorted by the agent's id. Thread-compatible.
//
// Time: a series keeps its last sample's time as a signed 32-bit count of 10 µs from the node's
// base (the first sample's time), so ±5.9 h around it. When a sample runs more than
// kRebaseAfter past the base, the base moves to it and every series' time is shifted; a series
// whose last sample is then older than the range keeps its raw value and total exactly, but its
// time becomes unknown: its next step's delta is exact and its rate NaN. Two samples of one
// series less than 10 µs apart count as the same time (the later is ignored as not newer).
class NodeSeries {
 public:
  enum class DefineResult { kNew, kUnchanged, kUpdated, kReplaced };

  static constexpr size_t kBytesPerSeries = sizeof(series_internal::PackedSeries);
  static constexpr int64_t kTickNs = 10'000;
  static constexpr int64_t kRebaseAfterNs = int64_t{2} * 3600 * 1'000'000'000;

  NodeSeries(SeriesLimits limits, SeriesIdentityPool* pool);
  ~NodeSeries();
  NodeSeries(const NodeSeries&) = delete;
  NodeSeries& operator=(const NodeSeries&) = delete;

  // Defines `def.id`, or redefines it: the same series (source, device, port, counter, priority)
  // with a changed kind, width, unit or saturation keeps its state (a changed kind starts a new
  // window and baseline); another series under the same id replaces it and starts from scratch.
  // InvalidArgument for a malformed definition; ResourceExhausted past max_series_per_node.
  // Agents number their series densely and in order, so a new id is normally the largest (an
  // append); a smaller one is inserted in order.
  absl::StatusOr<DefineResult> Define(const SeriesDefinition& def);
  absl::StatusOr<DefineResult> Define(const SeriesDefinitionRef& def);

  // Defines each of `defs` in order, with the result of one Define after another: on an error,
  // the definitions before it are defined and the error is returned. The admission path (a
  // session's first SeriesDefs): when the ids ascend, as agents send them, a definition identical
  // to the one held is checked without the identity pool, the new identities are interned in one
  // pass (SeriesIdentityPool::AcquireMany), and the new series are merged into a table allocated
  // at its exact size (no growth, nothing for Compact to give back). `identity_hints` (empty, or
  // one per definition): SeriesIdentityPool's hints for them, used and kept up to date.
  absl::Status DefineAll(absl::Span<const SeriesDefinitionRef> defs, DefineCounts* counts,
                         absl::Span<std::atomic<uint64_t>> identity_hints = {});

  // Takes a sample of `id` in. NotFound when the id was never defined (the sample is ignored).
  absl::StatusOr<StepResult> Observe(uint32_t id, uint64_t raw, int64_t time_ns);

  // The same without building a status: false for an undefined id (the hot path of a batch).
  // `detail` (optional) receives the sample with its series' names.
  bool TryObserve(uint32_t id, uint64_t raw, int64_t time_ns, StepResult* result,
                  ObservedSample* detail = nullptr);

  // Gives back the table's spare capacity (after a batch of definitions).
  void Compact();

  // Changes whenever a slot (ObservedSample::slot) may name another series than before: a
  // series added, replaced or redefined. Unique among all NodeSeries of the process, so a caller
  // that keeps state by slot keeps it while its node's samples carry the same layout.
  uint64_t layout() const { return layout_; }

  std::optional<SeriesState> Find(uint32_t id) const;
  std::vector<SeriesView> Views() const;  // in id order
  size_t size() const { return series_.size(); }
  // Heap bytes of this node: the series table at its capacity, and the node itself (the
  // identities are shared and counted by the pool).
  size_t MemoryBytes() const;
  const SeriesLimits& limits() const { return limits_; }
  // Unix nanoseconds that tick 0 stands for (0 before the first sample).
  int64_t time_base_ns() const { return base_ns_; }

 private:
  using Packed = series_internal::PackedSeries;
  int64_t IndexOf(uint32_t id) const;
  int32_t TickOf(int64_t time_ns);  // rebases when the time runs past the range
  void Rebase(int64_t ticks);
  int64_t TimeOfTick(int32_t tick) const;  // unix nanoseconds (saturated to int64)
  int32_t SecondsOf(int64_t time_ns) const;
  StepResult Step(Packed& s, uint64_t raw, int64_t time_ns, int32_t tick);
  SeriesState StateOf(const Packed& s) const;
  absl::Status Check(const SeriesDefinitionRef& def) const;
  absl::Status LimitError(size_t defined) const;
  // Whether a held series needs another identity for `def` (another series, or a new unit).
  bool NeedsIdentity(const Packed& s, const SeriesDefinitionRef& def) const;
  // Redefines a held series; `identity` is a handle acquired for `def` when NeedsIdentity (owned
  // from here on), unused otherwise.
  DefineResult Redefine(Packed& s, const SeriesDefinitionRef& def, uint32_t identity);
  Packed NewSeries(const SeriesDefinitionRef& def, uint32_t identity) const;
  void Relayout();  // a slot may name another series now: a new layout()

  SeriesLimits limits_;
  SeriesIdentityPool* pool_;
  std::vector<Packed> series_;  // ascending ids
  uint64_t layout_;
  bool has_base_ = false;
  int64_t base_ns_ = 0;    // tick 0, a multiple of kTickNs
  int64_t origin_ns_ = 0;  // second 0 of first_second: the node's first sample, in whole seconds
  mutable uint32_t guess_ = 0;  // batches list ids in order: try the next position first
  // The last time converted to a tick (a batch's samples share one time).
  bool cached_ = false;
  int32_t cached_tick_ = 0;
  int64_t cached_time_ns_ = 0;
};
static_assert(NodeSeries::kBytesPerSeries == 60,
              "a series must stay within 64 bytes with its share of the pools");
static_assert(alignof(series_internal::PackedSeries) == 4);

// The nodes' series. AddNode and FindNode are thread-safe and return pointers that stay valid for
// the store's lifetime (nodes are never removed).
class SeriesStore {
 public:
  struct Options {
    size_t max_nodes = 10000;
    SeriesLimits series;
  };
  explicit SeriesStore(Options options) : options_(options) {}

  // The node's series table, created on first use. ResourceExhausted past max_nodes.
  absl::StatusOr<NodeSeries*> AddNode(absl::string_view node) ABSL_LOCKS_EXCLUDED(mu_);
  NodeSeries* FindNode(absl::string_view node) const ABSL_LOCKS_EXCLUDED(mu_);
  size_t nodes() const ABSL_LOCKS_EXCLUDED(mu_);
  const SeriesIdentityPool& pool() const { return pool_; }
  const Options& options() const { return options_; }

 private:
  const Options options_;
  SeriesIdentityPool pool_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<NodeSeries>> nodes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_SERIES_STATE_H_
