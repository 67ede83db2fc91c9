// Per-series state for the aggregator: the last raw reading and its time, the counter's kind,
// width and saturation, how the last step was classified (normal, wrap, reset, saturated told
// apart), the cumulative delta since the series was first seen, and a bounded window of recent
// per-second rates (counters) or values (gauges, states) for the detectors — 64 bytes a series.
//
// A NodeSeries holds one node's series by the agent's id, with a limit on how many; a SeriesStore
// holds the nodes, with a limit on how many. Pure logic: time is the sample's own timestamp.
//
// Thread safety: SeriesStore's node table and StringPool are thread-safe; one NodeSeries is
// thread-compatible (the caller serializes access to one node; different nodes run in parallel).
#ifndef RINGSIDE_ANALYSIS_SERIES_STATE_H_
#define RINGSIDE_ANALYSIS_SERIES_STATE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "analysis/counter_math.h"

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

// The hot state of one series. Rates are per second over the step that ended at each sample
// (NaN when unknown: saturated or invalid steps); for gauges and states the window holds values.
struct SeriesState {
  uint64_t last_raw = 0;
  int64_t last_time_ns = 0;  // unix nanoseconds of last_raw, on the agent's clock
  // Sum of the counter's deltas since the aggregator first saw the series (modulo 2^64): over any
  // stretch of samples, including ones with wraps or missing batches, the difference of two totals
  // equals the counter's increase. Resets add the value counted since the reset; saturated steps
  // add their lower bound.
  uint64_t total = 0;
  float window[kRateWindow] = {};
  SeriesKind kind = SeriesKind::kCounter;
  uint8_t width = 64;  // 1..64 (0 is taken as 64)
  uint8_t flags = 0;
  StepKind last_step = StepKind::kNone;
  uint8_t window_next = 0;  // slot of the next write
  uint8_t window_size = 0;  // 0..kRateWindow
  uint16_t steps = 0;       // samples taken in since the baseline (saturates at 65535)

  static constexpr uint8_t kSaturates = 1;
  static constexpr uint8_t kHasValue = 2;

  bool saturates() const { return (flags & kSaturates) != 0; }
  bool has_value() const { return (flags & kHasValue) != 0; }
  // The window, oldest first. Returns how many were written to `out`.
  int Window(float out[kRateWindow]) const;
  // The newest rate (or value); NaN when the window is empty.
  float LatestRate() const;
};
static_assert(sizeof(SeriesState) <= 64, "series state must stay within one cache line");

// What one sample did.
struct StepResult {
  bool accepted = false;  // false: not newer than the last sample (out of order), ignored
  StepKind kind = StepKind::kNone;
  uint64_t delta = 0;  // counters: the increase this step
  float rate = 0;      // counters: per second (NaN when unknown); gauges/states: the value
};

// Takes one sample in. `time_ns` must be later than the last accepted sample's.
StepResult ObserveSample(SeriesState& state, uint64_t raw, int64_t time_ns);

// Initializes a state for a series of this kind.
void ResetSeriesState(SeriesState& state, SeriesKind kind, uint8_t width, bool saturates);

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
  int64_t time_ns = 0;
  int64_t prev_time_ns = 0;  // of the previous accepted sample (0 for a baseline)
  uint64_t raw = 0;
  StepResult step;
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
};

// A copy of one series for readers (debug endpoint, detectors).
struct SeriesView {
  SeriesDefinition def;
  SeriesState state;
  // The first sample taken in (the baseline of `state.total`): total == the counter's increase
  // since then. 0/0 before any sample.
  uint64_t first_raw = 0;
  int64_t first_time_ns = 0;
};

// Interned strings with reference counts: the few hundred distinct source, device, port, counter
// and unit names of a cluster are stored once. Thread-safe.
class StringPool {
 public:
  const std::string* Acquire(absl::string_view s) ABSL_LOCKS_EXCLUDED(mu_);
  void Release(const std::string* s) ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t bytes() const ABSL_LOCKS_EXCLUDED(mu_);  // an estimate, with the table's overhead

 private:
  mutable absl::Mutex mu_;
  absl::node_hash_map<std::string, uint32_t> refs_ ABSL_GUARDED_BY(mu_);
  size_t chars_ ABSL_GUARDED_BY(mu_) = 0;
};

struct SeriesLimits {
  size_t max_series_per_node = 10000;
  size_t max_string_bytes = 256;  // each of source, device, port, counter, unit
};

// One node's series, by the agent's id. Thread-compatible.
class NodeSeries {
 public:
  enum class DefineResult { kNew, kUnchanged, kUpdated, kReplaced };

  NodeSeries(SeriesLimits limits, StringPool* pool);
  ~NodeSeries();
  NodeSeries(const NodeSeries&) = delete;
  NodeSeries& operator=(const NodeSeries&) = delete;

  // Defines `def.id`, or redefines it: the same series (source, device, port, counter, priority)
  // with a changed kind, width, unit or saturation keeps its state (a changed kind starts a new
  // window and baseline); another series under the same id replaces it and starts from scratch.
  // InvalidArgument for a malformed definition; ResourceExhausted past max_series_per_node.
  absl::StatusOr<DefineResult> Define(const SeriesDefinition& def);

  // Takes a sample of `id` in. NotFound when the id was never defined (the sample is ignored).
  absl::StatusOr<StepResult> Observe(uint32_t id, uint64_t raw, int64_t time_ns);

  // The same without building a status: false for an undefined id (the hot path of a batch).
  // `detail` (optional) receives the sample with its series' names.
  bool TryObserve(uint32_t id, uint64_t raw, int64_t time_ns, StepResult* result,
                  ObservedSample* detail = nullptr);

  // Gives back the tables' spare capacity (after a batch of definitions).
  void Compact();

  const SeriesState* Find(uint32_t id) const;
  std::vector<SeriesView> Views() const;  // in definition order
  size_t size() const { return states_.size(); }
  // Estimated heap bytes: hot state, definitions and the id index (the interned strings are
  // shared and counted by the pool).
  size_t MemoryBytes() const;
  const SeriesLimits& limits() const { return limits_; }

 private:
  struct Info {  // the cold part of a series (64 bytes): its names and its baseline
    const std::string* source;
    const std::string* device;
    const std::string* port;
    const std::string* counter;
    const std::string* unit;
    uint32_t id;
    int32_t priority;
    uint64_t first_raw;
    int64_t first_time_ns;
  };
  void Take(size_t at, uint64_t raw, int64_t time_ns, StepResult* result);
  int64_t IndexOf(uint32_t id) const;
  void ReleaseInfo(const Info& info);
  Info MakeInfo(const SeriesDefinition& def);

  SeriesLimits limits_;
  StringPool* pool_;
  std::vector<SeriesState> states_;
  std::vector<Info> infos_;                        // parallel to states_
  absl::flat_hash_map<uint32_t, uint32_t> index_;  // id → position
  mutable uint32_t guess_ = 0;  // batches list ids in definition order: try the next position first
};

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
  const StringPool& pool() const { return pool_; }
  const Options& options() const { return options_; }

 private:
  const Options options_;
  StringPool pool_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<NodeSeries>> nodes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_SERIES_STATE_H_
