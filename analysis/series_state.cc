#include "analysis/series_state.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "analysis/bfloat16.h"
#include "analysis/populate.h"

namespace ringside::analysis {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

using series_internal::PackedSeries;

constexpr int32_t kUnknownTick = std::numeric_limits<int32_t>::min();
constexpr int64_t kMinTick = int64_t{kUnknownTick} + 1;
constexpr int64_t kSecondNs = 1'000'000'000;

// The packed fields (see series_internal::PackedSeries).
constexpr uint8_t kStepMask = 0x07;
constexpr uint8_t kSaturatesBit = 0x08;
constexpr uint8_t kHasValueBit = 0x10;
constexpr int kNextShift = 5;

SeriesKind KindOf(const PackedSeries& s) { return static_cast<SeriesKind>(s.kind_width >> 6); }
uint8_t WidthOf(const PackedSeries& s) { return static_cast<uint8_t>((s.kind_width & 0x3f) + 1); }
StepKind LastStep(const PackedSeries& s) { return static_cast<StepKind>(s.bits & kStepMask); }
bool HasValue(const PackedSeries& s) { return (s.bits & kHasValueBit) != 0; }
bool Saturates(const PackedSeries& s) { return (s.bits & kSaturatesBit) != 0; }
int WindowNext(const PackedSeries& s) { return s.bits >> kNextShift; }
constexpr uint16_t kTerm32Bit = 0x8000;  // in `steps`: the counter is a sum of 32-bit terms
constexpr uint16_t kMaxSteps = 0x7fff;
uint16_t StepsOf(const PackedSeries& s) { return s.steps & kMaxSteps; }
uint8_t TermWidthOf(const PackedSeries& s) { return (s.steps & kTerm32Bit) != 0 ? 32 : 0; }
void SetTermWidth(PackedSeries& s, uint8_t term_width) {
  s.steps = static_cast<uint16_t>((s.steps & kMaxSteps) | (term_width == 32 ? kTerm32Bit : 0));
}
int WindowSize(const PackedSeries& s) {
  // Every accepted step after the baseline writes one slot; a gauge's or state's baseline too.
  if (!HasValue(s)) return 0;
  const int writes = StepsOf(s) + (KindOf(s) == SeriesKind::kCounter ? 0 : 1);
  return std::min(writes, kRateWindow);
}

void SetLastStep(PackedSeries& s, StepKind k) {
  s.bits = static_cast<uint8_t>((s.bits & ~kStepMask) | static_cast<uint8_t>(k));
}
void SetWidth(PackedSeries& s, uint8_t width) {
  const uint8_t w = (width == 0 || width > 64) ? 64 : width;
  s.kind_width = static_cast<uint8_t>((s.kind_width & 0xc0) | (w - 1));
}
void SetSaturates(PackedSeries& s, bool saturates) {
  s.bits = static_cast<uint8_t>((s.bits & ~kSaturatesBit) | (saturates ? kSaturatesBit : 0));
}

void PushWindow(PackedSeries& s, float v) {
  const int next = WindowNext(s);
  s.window[next] = FloatToBFloat16(v);
  s.bits = static_cast<uint8_t>((s.bits & ((1 << kNextShift) - 1)) |
                                (((next + 1) % kRateWindow) << kNextShift));
}

// A fresh series of this kind: no sample, no baseline; its id and identity kept.
void ResetPacked(PackedSeries& s, SeriesKind kind, uint8_t width, bool saturates,
                 uint8_t term_width) {
  const uint32_t id = s.id;
  const uint32_t identity = s.identity;
  s = PackedSeries{};
  s.id = id;
  s.identity = identity;
  s.last_tick = kUnknownTick;
  s.kind_width = static_cast<uint8_t>(static_cast<uint8_t>(kind) << 6);
  SetWidth(s, width);
  SetSaturates(s, saturates);
  SetTermWidth(s, term_width);
}

StepKind FromDelta(DeltaKind kind) {
  switch (kind) {
    case DeltaKind::kNormal:
      return StepKind::kNormal;
    case DeltaKind::kWrap:
      return StepKind::kWrap;
    case DeltaKind::kReset:
      return StepKind::kReset;
    case DeltaKind::kSaturated:
      return StepKind::kSaturated;
    case DeltaKind::kInvalid:
      return StepKind::kInvalid;
  }
  return StepKind::kInvalid;
}

}  // namespace

absl::string_view SeriesKindName(SeriesKind kind) {
  switch (kind) {
    case SeriesKind::kCounter:
      return "counter";
    case SeriesKind::kGauge:
      return "gauge";
    case SeriesKind::kState:
      return "state";
  }
  return "unknown";
}

absl::string_view StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kNone:
      return "none";
    case StepKind::kBaseline:
      return "baseline";
    case StepKind::kNormal:
      return "normal";
    case StepKind::kWrap:
      return "wrap";
    case StepKind::kReset:
      return "reset";
    case StepKind::kSaturated:
      return "saturated";
    case StepKind::kInvalid:
      return "invalid";
    case StepKind::kValue:
      return "value";
  }
  return "unknown";
}

int SeriesState::Window(float out[kRateWindow]) const {
  const int n = window_size;
  const int start = (window_next - n + kRateWindow) % kRateWindow;
  for (int i = 0; i < n; ++i) out[i] = window[(start + i) % kRateWindow];
  return n;
}

float SeriesState::LatestRate() const {
  if (window_size == 0) return kNaN;
  return window[(window_next + kRateWindow - 1) % kRateWindow];
}

// ---------------------------------------------------------------------------------------------

namespace {
std::atomic<uint64_t> next_layout{1};
}  // namespace

NodeSeries::NodeSeries(SeriesLimits limits, SeriesIdentityPool* pool)
    : limits_(limits), pool_(pool), layout_(next_layout.fetch_add(1, std::memory_order_relaxed)) {}

void NodeSeries::Relayout() { layout_ = next_layout.fetch_add(1, std::memory_order_relaxed); }

NodeSeries::~NodeSeries() {
  for (const Packed& s : series_) pool_->Release(s.identity);
}

int64_t NodeSeries::IndexOf(uint32_t id) const {
  if (guess_ < series_.size() && series_[guess_].id == id) return guess_++;
  auto it = std::lower_bound(series_.begin(), series_.end(), id,
                             [](const Packed& s, uint32_t v) { return s.id < v; });
  if (it == series_.end() || it->id != id) return -1;
  const int64_t at = it - series_.begin();
  guess_ = static_cast<uint32_t>(at + 1);
  return at;
}

int32_t NodeSeries::TickOf(int64_t time_ns) {
  if (!has_base_) {
    has_base_ = true;
    // Rounded toward zero, so that even the extreme int64 times give a base in range.
    base_ns_ = time_ns / kTickNs * kTickNs;
    origin_ns_ = time_ns / kSecondNs * kSecondNs;
  }
  if (cached_ && time_ns == cached_time_ns_) return cached_tick_;  // a batch shares one time
  // Any two int64 times are apart by less than 2^64 ns: 64-bit unless the difference overflows.
  int64_t diff;
  int64_t ticks;
  if (!__builtin_sub_overflow(time_ns, base_ns_, &diff)) {
    ticks = diff / kTickNs - (diff % kTickNs < 0 ? 1 : 0);
  } else {
    const __int128 wide = static_cast<__int128>(time_ns) - base_ns_;
    ticks = static_cast<int64_t>(wide / kTickNs - (wide % kTickNs < 0 ? 1 : 0));
  }
  int32_t tick;
  if (ticks > kRebaseAfterNs / kTickNs) {
    Rebase(ticks);
    tick = 0;
  } else {
    tick = ticks < kMinTick ? kUnknownTick : static_cast<int32_t>(ticks);
  }
  cached_ = true;
  cached_time_ns_ = time_ns;
  cached_tick_ = tick;
  return tick;
}

int64_t NodeSeries::TimeOfTick(int32_t tick) const {
  int64_t t;
  if (__builtin_add_overflow(base_ns_, int64_t{tick} * kTickNs, &t)) {
    return tick < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  }
  return t;
}

void NodeSeries::Rebase(int64_t ticks) {
  cached_ = false;
  // ticks * kTickNs <= time_ns - base_ns_: the new base is at most the newest time.
  base_ns_ = static_cast<int64_t>(static_cast<__int128>(base_ns_) +
                                  static_cast<__int128>(ticks) * kTickNs);
  for (Packed& s : series_) {
    if (s.last_tick == kUnknownTick) continue;
    const int64_t t = int64_t{s.last_tick} - ticks;
    s.last_tick = t < kMinTick ? kUnknownTick : static_cast<int32_t>(t);
  }
}

int32_t NodeSeries::SecondsOf(int64_t time_ns) const {
  const __int128 diff = static_cast<__int128>(time_ns) - origin_ns_;
  __int128 s = diff / kSecondNs;
  if (diff % kSecondNs != 0 && diff < 0) --s;
  return static_cast<int32_t>(std::clamp<__int128>(s, std::numeric_limits<int32_t>::min(),
                                                   std::numeric_limits<int32_t>::max()));
}

StepResult NodeSeries::Step(Packed& s, uint64_t raw, int64_t time_ns, int32_t tick) {
  StepResult r;
  const SeriesKind kind = KindOf(s);
  if (!HasValue(s)) {
    if (kind == SeriesKind::kCounter && raw > CounterMax(WidthOf(s))) {
      r.accepted = true;
      r.kind = StepKind::kInvalid;
      r.rate = kNaN;
      SetLastStep(s, StepKind::kInvalid);
      return r;
    }
    s.last_raw = raw;
    s.last_tick = tick;
    s.first_raw = raw;
    s.first_second = SecondsOf(time_ns);
    s.bits |= kHasValueBit;
    s.steps &= kTerm32Bit;
    r.accepted = true;
    if (kind == SeriesKind::kCounter) {
      r.kind = StepKind::kBaseline;
      r.rate = kNaN;
    } else {
      r.kind = StepKind::kValue;
      r.rate = static_cast<float>(raw);
      PushWindow(s, r.rate);
    }
    SetLastStep(s, r.kind);
    return r;
  }
  // Not newer: ignored. A known time is above kUnknownTick, so a sample older than the range is
  // ignored after a known one; after an unknown one, order cannot be told and it is taken.
  const bool known_last = s.last_tick != kUnknownTick;
  if (known_last && tick <= s.last_tick) return r;
  r.accepted = true;
  if (StepsOf(s) < kMaxSteps) ++s.steps;
  if (kind != SeriesKind::kCounter) {
    s.last_raw = raw;
    s.last_tick = tick;
    r.kind = StepKind::kValue;
    SetLastStep(s, r.kind);
    r.rate = static_cast<float>(raw);
    PushWindow(s, r.rate);
    return r;
  }
  const Delta d = ComputeDelta(s.last_raw, raw, WidthOf(s), Saturates(s), TermWidthOf(s));
  r.kind = FromDelta(d.kind);
  SetLastStep(s, r.kind);
  if (d.kind == DeltaKind::kInvalid) {
    // A value the width cannot hold: garbage or a wrong definition. The baseline stays, so the
    // next good sample spans both intervals.
    r.rate = kNaN;
    PushWindow(s, kNaN);
    return r;
  }
  r.delta = d.value;
  if (d.kind == DeltaKind::kSaturated || !known_last || tick == kUnknownTick) {
    r.rate = kNaN;  // a lower bound, or an interval of unknown length
  } else {
    // Both times lie within the node's range, so the difference fits; it is > 0 (newer tick).
    const int64_t dt_ns = time_ns - TimeOfTick(s.last_tick);
    r.rate = static_cast<float>(static_cast<double>(d.value) * 1e9 / static_cast<double>(dt_ns));
  }
  s.total += d.value;
  s.last_raw = raw;
  s.last_tick = tick;
  PushWindow(s, r.rate);
  return r;
}

SeriesState NodeSeries::StateOf(const Packed& p) const {
  SeriesState s;
  s.last_raw = p.last_raw;
  s.last_time_ns = HasValue(p) && p.last_tick != kUnknownTick ? TimeOfTick(p.last_tick) : 0;
  s.total = p.total;
  for (int i = 0; i < kRateWindow; ++i) s.window[i] = BFloat16ToFloat(p.window[i]);
  s.kind = KindOf(p);
  s.width = WidthOf(p);
  s.flags = static_cast<uint8_t>((Saturates(p) ? SeriesState::kSaturates : 0) |
                                 (HasValue(p) ? SeriesState::kHasValue : 0));
  s.last_step = LastStep(p);
  s.window_next = static_cast<uint8_t>(WindowNext(p));
  s.window_size = static_cast<uint8_t>(WindowSize(p));
  s.steps = StepsOf(p);
  return s;
}

SeriesDefinition SeriesDefinitionRef::Owned() const {
  SeriesDefinition d;
  d.id = id;
  d.source = std::string(source);
  d.device = std::string(device);
  d.port = std::string(port);
  d.counter = std::string(counter);
  d.unit = std::string(unit);
  d.priority = priority;
  d.kind = kind;
  d.width = width;
  d.saturates = saturates;
  d.term_width = term_width;
  return d;
}

SeriesDefinitionRef SeriesDefinitionRef::Of(const SeriesDefinition& def) {
  SeriesDefinitionRef r;
  r.id = def.id;
  r.source = def.source;
  r.device = def.device;
  r.port = def.port;
  r.counter = def.counter;
  r.unit = def.unit;
  r.priority = def.priority;
  r.kind = def.kind;
  r.width = def.width;
  r.saturates = def.saturates;
  r.term_width = def.term_width;
  return r;
}

namespace {

SeriesIdentityKey KeyOf(const SeriesDefinitionRef& def) {
  return SeriesIdentityKey{def.source, def.device, def.port, def.counter, def.unit, def.priority};
}

uint8_t StoredWidth(const SeriesDefinitionRef& def) {
  return def.kind == SeriesKind::kCounter && def.width != 0 ? def.width : 64;
}

bool SameSeries(const SeriesIdentity& cur, const SeriesDefinitionRef& def) {
  return cur.priority == def.priority && *cur.counter == def.counter && *cur.device == def.device &&
         *cur.port == def.port && *cur.source == def.source;
}

}  // namespace

absl::Status NodeSeries::Check(const SeriesDefinitionRef& def) const {
  for (absl::string_view s : {def.source, def.device, def.port, def.counter, def.unit}) {
    if (s.size() > limits_.max_string_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("series ", def.id, ": a name of ", s.size(),
                                                     " bytes exceeds ", limits_.max_string_bytes));
    }
  }
  if (def.counter.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("series ", def.id, ": empty counter name"));
  }
  if (def.kind == SeriesKind::kCounter && def.width > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("series ", def.id, ": width ", def.width, " is not in 1..64"));
  }
  return absl::OkStatus();
}

absl::Status NodeSeries::LimitError(size_t defined) const {
  return absl::ResourceExhaustedError(absl::StrCat("series limit reached: ", defined,
                                                   " series defined, at most ",
                                                   limits_.max_series_per_node, " per node"));
}

bool NodeSeries::NeedsIdentity(const Packed& s, const SeriesDefinitionRef& def) const {
  const SeriesIdentity& cur = pool_->Get(s.identity);
  return !SameSeries(cur, def) || *cur.unit != def.unit;
}

NodeSeries::Packed NodeSeries::NewSeries(const SeriesDefinitionRef& def, uint32_t identity) const {
  Packed s{};
  s.id = def.id;
  s.identity = identity;
  ResetPacked(s, def.kind, StoredWidth(def), def.saturates, def.term_width);
  return s;
}

NodeSeries::DefineResult NodeSeries::Redefine(Packed& s, const SeriesDefinitionRef& def,
                                              uint32_t identity) {
  const uint8_t width = StoredWidth(def);
  const SeriesIdentity& cur = pool_->Get(s.identity);
  if (!SameSeries(cur, def)) {
    const uint32_t old = s.identity;
    s.identity = identity;
    pool_->Release(old);
    ResetPacked(s, def.kind, width, def.saturates, def.term_width);
    Relayout();
    return DefineResult::kReplaced;
  }
  const bool same_unit = *cur.unit == def.unit;
  const bool same_shape =
      KindOf(s) == def.kind && WidthOf(s) == width && Saturates(s) == def.saturates &&
      TermWidthOf(s) == (def.term_width == 32 ? 32 : 0) && same_unit;
  if (same_shape) return DefineResult::kUnchanged;
  Relayout();
  if (!same_unit) {
    const uint32_t old = s.identity;
    s.identity = identity;
    pool_->Release(old);
  }
  if (KindOf(s) != def.kind) {
    ResetPacked(s, def.kind, width, def.saturates, def.term_width);  // a new window, baseline
  } else {
    SetWidth(s, width);
    SetSaturates(s, def.saturates);
    SetTermWidth(s, def.term_width);
  }
  return DefineResult::kUpdated;
}

absl::StatusOr<NodeSeries::DefineResult> NodeSeries::Define(const SeriesDefinition& def) {
  return Define(SeriesDefinitionRef::Of(def));
}

absl::StatusOr<NodeSeries::DefineResult> NodeSeries::Define(const SeriesDefinitionRef& def) {
  if (absl::Status s = Check(def); !s.ok()) return s;
  const int64_t at = IndexOf(def.id);
  if (at < 0) {
    if (series_.size() >= limits_.max_series_per_node) return LimitError(series_.size());
    const Packed s = NewSeries(def, pool_->Acquire(KeyOf(def)));
    if (series_.empty() || series_.back().id < def.id) {
      series_.push_back(s);
    } else {  // an id below the largest: in order (rare)
      auto pos = std::lower_bound(series_.begin(), series_.end(), def.id,
                                  [](const Packed& p, uint32_t v) { return p.id < v; });
      series_.insert(pos, s);
    }
    Relayout();
    return DefineResult::kNew;
  }
  Packed& s = series_[at];
  const uint32_t identity = NeedsIdentity(s, def) ? pool_->Acquire(KeyOf(def)) : 0;
  return Redefine(s, def, identity);
}

absl::Status NodeSeries::DefineAll(absl::Span<const SeriesDefinitionRef> defs,
                                   DefineCounts* counts,
                                   absl::Span<std::atomic<uint64_t>> identity_hints) {
  auto count = [counts](DefineResult r) {
    if (r == DefineResult::kNew) {
      ++counts->added;
    } else if (r == DefineResult::kUnchanged) {
      ++counts->unchanged;
    } else {
      ++counts->redefined;
    }
  };
  for (size_t i = 1; i < defs.size(); ++i) {
    if (defs[i].id > defs[i - 1].id) continue;
    // Ids out of order or repeated: one after another, each seeing the ones before.
    for (const SeriesDefinitionRef& def : defs) {
      absl::StatusOr<DefineResult> r = Define(def);
      if (!r.ok()) return r.status();
      count(*r);
    }
    return absl::OkStatus();
  }
  // Ascending ids: each definition is a different series, so each is judged against the table as
  // it is. First the checks and what needs an identity, up to the first error.
  thread_local std::vector<int64_t> at;  // the series' index, -1 when new
  thread_local std::vector<SeriesIdentityKey> keys;
  thread_local std::vector<uint32_t> handles;
  thread_local std::vector<std::atomic<uint64_t>*> hints;  // keys[i]'s, when given
  const bool hinted = identity_hints.size() == defs.size();
  at.clear();
  keys.clear();
  hints.clear();
  absl::Status error;
  size_t n = defs.size();
  size_t added = 0;
  for (size_t i = 0; i < defs.size(); ++i) {
    const SeriesDefinitionRef& def = defs[i];
    error = Check(def);
    if (error.ok()) {
      const int64_t a = IndexOf(def.id);
      if (a >= 0) {
        at.push_back(a);
        if (NeedsIdentity(series_[a], def)) {
          keys.push_back(KeyOf(def));
          if (hinted) hints.push_back(&identity_hints[i]);
        }
        continue;
      }
      if (series_.size() + added < limits_.max_series_per_node) {
        at.push_back(-1);
        ++added;
        keys.push_back(KeyOf(def));
        if (hinted) hints.push_back(&identity_hints[i]);
        continue;
      }
      error = LimitError(series_.size() + added);
    }
    n = i;
    break;
  }
  handles.resize(keys.size());
  pool_->AcquireMany(keys, absl::MakeSpan(handles), hints);
  // Then each in order: held series redefined in place, new ones gathered (ascending).
  size_t next_handle = 0;
  std::vector<Packed> fresh;
  fresh.reserve(added);
  if (series_.empty()) PopulateForWrite(fresh.data(), added * sizeof(Packed));
  for (size_t i = 0; i < n; ++i) {
    const SeriesDefinitionRef& def = defs[i];
    if (at[i] < 0) {
      fresh.push_back(NewSeries(def, handles[next_handle++]));
      ++counts->added;
      continue;
    }
    Packed& s = series_[at[i]];
    const uint32_t identity = NeedsIdentity(s, def) ? handles[next_handle++] : 0;
    count(Redefine(s, def, identity));
  }
  if (!fresh.empty()) {
    if (series_.empty()) {
      series_ = std::move(fresh);  // a node's first definitions: exactly their size
    } else {
      // One table of the exact size, merged in id order.
      std::vector<Packed> merged;
      merged.reserve(series_.size() + fresh.size());
      PopulateForWrite(merged.data(), merged.capacity() * sizeof(Packed));
      std::merge(series_.begin(), series_.end(), fresh.begin(), fresh.end(),
                 std::back_inserter(merged),
                 [](const Packed& a, const Packed& b) { return a.id < b.id; });
      series_ = std::move(merged);
    }
    guess_ = 0;
    Relayout();
  }
  return error;
}

absl::StatusOr<StepResult> NodeSeries::Observe(uint32_t id, uint64_t raw, int64_t time_ns) {
  StepResult r;
  if (!TryObserve(id, raw, time_ns, &r)) {
    return absl::NotFoundError(absl::StrCat("series id ", id, " was never defined"));
  }
  return r;
}

bool NodeSeries::TryObserve(uint32_t id, uint64_t raw, int64_t time_ns, StepResult* result,
                            ObservedSample* detail) {
  const int64_t at = IndexOf(id);
  if (at < 0) return false;
  const int32_t tick = TickOf(time_ns);  // first: it may move every series' time
  Packed& s = series_[at];
  const int64_t prev = HasValue(s) && s.last_tick != kUnknownTick ? TimeOfTick(s.last_tick) : 0;
  *result = Step(s, raw, time_ns, tick);
  if (detail != nullptr) {
    const SeriesIdentity& info = pool_->Get(s.identity);
    detail->id = id;
    detail->source = *info.source;
    detail->device = *info.device;
    detail->port = *info.port;
    detail->counter = *info.counter;
    detail->priority = info.priority;
    detail->kind = KindOf(s);
    detail->time_ns = time_ns;
    detail->prev_time_ns = prev;
    detail->raw = raw;
    detail->step = *result;
    detail->identity = s.identity;
    detail->identity_generation = info.generation;
    detail->slot = static_cast<uint32_t>(at);
    detail->layout = layout_;
  }
  return true;
}

void NodeSeries::Compact() { series_.shrink_to_fit(); }

std::optional<SeriesState> NodeSeries::Find(uint32_t id) const {
  const int64_t at = IndexOf(id);
  if (at < 0) return std::nullopt;
  return StateOf(series_[at]);
}

std::vector<SeriesView> NodeSeries::Views() const {
  std::vector<SeriesView> out;
  out.reserve(series_.size());
  for (const Packed& p : series_) {
    const SeriesIdentity& info = pool_->Get(p.identity);
    SeriesView v;
    v.def.id = p.id;
    v.def.source = *info.source;
    v.def.device = *info.device;
    v.def.port = *info.port;
    v.def.counter = *info.counter;
    v.def.unit = *info.unit;
    v.def.priority = info.priority;
    v.def.kind = KindOf(p);
    v.def.width = WidthOf(p);
    v.def.term_width = TermWidthOf(p);
    v.def.saturates = Saturates(p);
    v.state = StateOf(p);
    if (HasValue(p)) {
      v.first_raw = p.first_raw;
      v.first_time_ns = origin_ns_ + int64_t{p.first_second} * kSecondNs;
    }
    out.push_back(std::move(v));
  }
  return out;
}

size_t NodeSeries::MemoryBytes() const {
  return series_.capacity() * sizeof(Packed) + sizeof(*this);
}

// ---------------------------------------------------------------------------------------------

absl::StatusOr<NodeSeries*> SeriesStore::AddNode(absl::string_view node) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node);
  if (it != nodes_.end()) return it->second.get();
  if (nodes_.size() >= options_.max_nodes) {
    return absl::ResourceExhaustedError(absl::StrCat("node limit reached: ", nodes_.size(),
                                                     " nodes known, at most ", options_.max_nodes));
  }
  auto series = std::make_unique<NodeSeries>(options_.series, &pool_);
  NodeSeries* p = series.get();
  nodes_.emplace(std::string(node), std::move(series));
  return p;
}

NodeSeries* SeriesStore::FindNode(absl::string_view node) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node);
  return it == nodes_.end() ? nullptr : it->second.get();
}

size_t SeriesStore::nodes() const {
  absl::MutexLock lock(&mu_);
  return nodes_.size();
}

}  // namespace ringside::analysis
