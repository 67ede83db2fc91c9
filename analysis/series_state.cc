#include "analysis/series_state.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringside::analysis {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

void PushWindow(SeriesState& s, float v) {
  s.window[s.window_next] = v;
  s.window_next = static_cast<uint8_t>((s.window_next + 1) % kRateWindow);
  if (s.window_size < kRateWindow) ++s.window_size;
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

void ResetSeriesState(SeriesState& state, SeriesKind kind, uint8_t width, bool saturates) {
  state = SeriesState();
  state.kind = kind;
  state.width = (width == 0 || width > 64) ? 64 : width;
  state.flags = saturates ? SeriesState::kSaturates : 0;
}

StepResult ObserveSample(SeriesState& s, uint64_t raw, int64_t time_ns) {
  StepResult r;
  if (!s.has_value()) {
    if (s.kind == SeriesKind::kCounter && raw > CounterMax(s.width)) {
      r.accepted = true;
      r.kind = StepKind::kInvalid;
      r.rate = kNaN;
      s.last_step = StepKind::kInvalid;
      return r;
    }
    s.last_raw = raw;
    s.last_time_ns = time_ns;
    s.flags |= SeriesState::kHasValue;
    s.steps = 0;
    r.accepted = true;
    if (s.kind == SeriesKind::kCounter) {
      r.kind = s.last_step = StepKind::kBaseline;
      r.rate = kNaN;
    } else {
      r.kind = s.last_step = StepKind::kValue;
      r.rate = static_cast<float>(raw);
      PushWindow(s, r.rate);
    }
    return r;
  }
  if (time_ns <= s.last_time_ns) return r;  // not newer: ignored
  r.accepted = true;
  if (s.steps < UINT16_MAX) ++s.steps;
  if (s.kind != SeriesKind::kCounter) {
    s.last_raw = raw;
    s.last_time_ns = time_ns;
    r.kind = s.last_step = StepKind::kValue;
    r.rate = static_cast<float>(raw);
    PushWindow(s, r.rate);
    return r;
  }
  const Delta d = ComputeDelta(s.last_raw, raw, s.width, s.saturates());
  r.kind = FromDelta(d.kind);
  s.last_step = r.kind;
  if (d.kind == DeltaKind::kInvalid) {
    // A value the width cannot hold: garbage or a wrong definition. The baseline stays, so the
    // next good sample spans both intervals.
    r.rate = kNaN;
    PushWindow(s, kNaN);
    return r;
  }
  const double dt = static_cast<double>(time_ns - s.last_time_ns) / 1e9;
  r.delta = d.value;
  r.rate = d.kind == DeltaKind::kSaturated ? kNaN
                                           : static_cast<float>(static_cast<double>(d.value) / dt);
  s.total += d.value;
  s.last_raw = raw;
  s.last_time_ns = time_ns;
  PushWindow(s, r.rate);
  return r;
}

// ---------------------------------------------------------------------------------------------

const std::string* StringPool::Acquire(absl::string_view s) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = refs_.try_emplace(std::string(s), 0);
  if (inserted) chars_ += s.size();
  ++it->second;
  return &it->first;
}

void StringPool::Release(const std::string* s) {
  if (s == nullptr) return;
  absl::MutexLock lock(&mu_);
  auto it = refs_.find(*s);
  if (it == refs_.end()) return;
  if (--it->second == 0) {
    chars_ -= it->first.size();
    refs_.erase(it);
  }
}

size_t StringPool::size() const {
  absl::MutexLock lock(&mu_);
  return refs_.size();
}

size_t StringPool::bytes() const {
  absl::MutexLock lock(&mu_);
  // Each node: the key, the count and the node allocation; plus a slot pointer in the table.
  return chars_ + refs_.size() * (sizeof(std::string) + sizeof(uint32_t) + 16 + sizeof(void*));
}

// ---------------------------------------------------------------------------------------------

NodeSeries::NodeSeries(SeriesLimits limits, StringPool* pool) : limits_(limits), pool_(pool) {}

NodeSeries::~NodeSeries() {
  for (const Info& info : infos_) ReleaseInfo(info);
}

void NodeSeries::ReleaseInfo(const Info& info) {
  pool_->Release(info.source);
  pool_->Release(info.device);
  pool_->Release(info.port);
  pool_->Release(info.counter);
  pool_->Release(info.unit);
}

NodeSeries::Info NodeSeries::MakeInfo(const SeriesDefinition& def) {
  Info info;
  info.source = pool_->Acquire(def.source);
  info.device = pool_->Acquire(def.device);
  info.port = pool_->Acquire(def.port);
  info.counter = pool_->Acquire(def.counter);
  info.unit = pool_->Acquire(def.unit);
  info.id = def.id;
  info.priority = def.priority;
  info.first_raw = 0;
  info.first_time_ns = 0;
  return info;
}

int64_t NodeSeries::IndexOf(uint32_t id) const {
  if (guess_ < infos_.size() && infos_[guess_].id == id) return guess_++;
  auto it = index_.find(id);
  if (it == index_.end()) return -1;
  guess_ = it->second + 1;
  return it->second;
}

absl::StatusOr<NodeSeries::DefineResult> NodeSeries::Define(const SeriesDefinition& def) {
  for (const std::string* s : {&def.source, &def.device, &def.port, &def.counter, &def.unit}) {
    if (s->size() > limits_.max_string_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("series ", def.id, ": a name of ", s->size(),
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
  const uint8_t width = def.kind == SeriesKind::kCounter ? def.width : 64;
  const int64_t at = IndexOf(def.id);
  if (at < 0) {
    if (states_.size() >= limits_.max_series_per_node) {
      return absl::ResourceExhaustedError(absl::StrCat("series limit reached: ", states_.size(),
                                                       " series defined, at most ",
                                                       limits_.max_series_per_node, " per node"));
    }
    SeriesState state;
    ResetSeriesState(state, def.kind, width, def.saturates);
    index_[def.id] = static_cast<uint32_t>(states_.size());
    states_.push_back(state);
    infos_.push_back(MakeInfo(def));
    return DefineResult::kNew;
  }
  Info& info = infos_[at];
  SeriesState& state = states_[at];
  const bool same_series = *info.source == def.source && *info.device == def.device &&
                           *info.port == def.port && *info.counter == def.counter &&
                           info.priority == def.priority;
  if (!same_series) {
    ReleaseInfo(info);
    info = MakeInfo(def);
    ResetSeriesState(state, def.kind, width, def.saturates);
    return DefineResult::kReplaced;
  }
  const bool same_shape = state.kind == def.kind && state.width == ((width == 0) ? 64 : width) &&
                          state.saturates() == def.saturates && *info.unit == def.unit;
  if (same_shape) return DefineResult::kUnchanged;
  if (*info.unit != def.unit) {
    pool_->Release(info.unit);
    info.unit = pool_->Acquire(def.unit);
  }
  if (state.kind != def.kind) {
    ResetSeriesState(state, def.kind, width, def.saturates);
    info.first_raw = 0;
    info.first_time_ns = 0;
  } else {
    state.width = (width == 0 || width > 64) ? 64 : width;
    state.flags = static_cast<uint8_t>((state.flags & ~SeriesState::kSaturates) |
                                       (def.saturates ? SeriesState::kSaturates : 0));
  }
  return DefineResult::kUpdated;
}

void NodeSeries::Take(size_t at, uint64_t raw, int64_t time_ns, StepResult* result) {
  SeriesState& state = states_[at];
  const bool first = !state.has_value();
  *result = ObserveSample(state, raw, time_ns);
  if (first && state.has_value()) {
    infos_[at].first_raw = raw;
    infos_[at].first_time_ns = time_ns;
  }
}

absl::StatusOr<StepResult> NodeSeries::Observe(uint32_t id, uint64_t raw, int64_t time_ns) {
  const int64_t at = IndexOf(id);
  if (at < 0) return absl::NotFoundError(absl::StrCat("series id ", id, " was never defined"));
  StepResult r;
  Take(static_cast<size_t>(at), raw, time_ns, &r);
  return r;
}

bool NodeSeries::TryObserve(uint32_t id, uint64_t raw, int64_t time_ns, StepResult* result,
                            ObservedSample* detail) {
  const int64_t at = IndexOf(id);
  if (at < 0) return false;
  SeriesState& state = states_[at];
  const int64_t prev = state.has_value() ? state.last_time_ns : 0;
  Take(static_cast<size_t>(at), raw, time_ns, result);
  if (detail != nullptr) {
    const Info& info = infos_[at];
    detail->id = id;
    detail->source = *info.source;
    detail->device = *info.device;
    detail->port = *info.port;
    detail->counter = *info.counter;
    detail->priority = info.priority;
    detail->kind = state.kind;
    detail->time_ns = time_ns;
    detail->prev_time_ns = prev;
    detail->raw = raw;
    detail->step = *result;
  }
  return true;
}

void NodeSeries::Compact() {
  states_.shrink_to_fit();
  infos_.shrink_to_fit();
}

const SeriesState* NodeSeries::Find(uint32_t id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &states_[it->second];
}

std::vector<SeriesView> NodeSeries::Views() const {
  std::vector<SeriesView> out;
  out.reserve(states_.size());
  for (size_t i = 0; i < states_.size(); ++i) {
    const Info& info = infos_[i];
    SeriesView v;
    v.def.id = info.id;
    v.def.source = *info.source;
    v.def.device = *info.device;
    v.def.port = *info.port;
    v.def.counter = *info.counter;
    v.def.unit = *info.unit;
    v.def.priority = info.priority;
    v.def.kind = states_[i].kind;
    v.def.width = states_[i].width;
    v.def.saturates = states_[i].saturates();
    v.state = states_[i];
    v.first_raw = info.first_raw;
    v.first_time_ns = info.first_time_ns;
    out.push_back(std::move(v));
  }
  return out;
}

size_t NodeSeries::MemoryBytes() const {
  return states_.capacity() * sizeof(SeriesState) + infos_.capacity() * sizeof(Info) +
         index_.capacity() * (sizeof(std::pair<uint32_t, uint32_t>) + 1) + sizeof(*this);
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
