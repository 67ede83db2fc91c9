// Generated counter sequences for the fabric detector tests: a counter kept the way the hardware
// keeps it (width, saturation or wrap), read at the times a test chooses, turned into CounterSteps
// with the same arithmetic the aggregator uses (analysis/counter_math.h), so wraps, saturation and
// resets reach the detectors exactly as they would in production.
#ifndef RINGSIDE_TESTS_ANALYSIS_FABRIC_SIM_H_
#define RINGSIDE_TESTS_ANALYSIS_FABRIC_SIM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "analysis/counter_math.h"
#include "analysis/fabric_inputs.h"
#include "analysis/finding.h"

namespace ringside::analysis::testing {

inline absl::Time T0() { return absl::FromUnixSeconds(1'700'000'000); }
inline absl::Time At(int sample, absl::Duration every = absl::Seconds(10)) {
  return T0() + sample * every;
}

// One counter series of one port.
class SimCounter {
 public:
  SimCounter(std::string node, std::string source, std::string device, std::string port,
             std::string counter, uint8_t width = 64, bool saturates = false, uint64_t start = 0,
             int32_t priority = -1)
      : node_(std::move(node)),
        source_(std::move(source)),
        device_(std::move(device)),
        port_(std::move(port)),
        counter_(std::move(counter)),
        width_(width),
        saturates_(saturates),
        raw_(start),
        priority_(priority) {}

  // The hardware counts `inc` more, then the collector reads it at `t`.
  CounterStep Step(absl::Time t, uint64_t inc) {
    const uint64_t max = CounterMax(width_);
    const uint64_t prev = raw_;
    if (saturates_) {
      raw_ = inc > max - raw_ ? max : raw_ + inc;
    } else {
      raw_ = (raw_ + inc) & max;
    }
    return Make(t, prev);
  }
  // The counter was reset (driver reload, perfquery -R), then counted `after`.
  CounterStep Reset(absl::Time t, uint64_t after) {
    const uint64_t prev = raw_;
    raw_ = after;
    return Make(t, prev);
  }
  uint64_t raw() const { return raw_; }

 private:
  CounterStep Make(absl::Time t, uint64_t prev) {
    Delta d = ComputeDelta(prev, raw_, width_, saturates_);
    CounterStep s;
    s.node = node_;
    s.source = source_;
    s.device = device_;
    s.port = port_;
    s.counter = counter_;
    s.priority = priority_;
    s.time = t;
    s.interval = last_ == absl::InfinitePast() ? absl::Seconds(10) : t - last_;
    s.delta = d.value;
    s.kind = d.kind;
    last_ = t;
    return s;
  }

  std::string node_, source_, device_, port_, counter_;
  uint8_t width_;
  bool saturates_;
  uint64_t raw_;
  int32_t priority_;
  absl::Time last_ = absl::InfinitePast();
};

// A state or gauge series.
class SimState {
 public:
  SimState(std::string node, std::string source, std::string device, std::string port,
           std::string counter)
      : node_(std::move(node)),
        source_(std::move(source)),
        device_(std::move(device)),
        port_(std::move(port)),
        counter_(std::move(counter)) {}
  StateSample At(absl::Time t, double v) const {
    StateSample s;
    s.node = node_;
    s.source = source_;
    s.device = device_;
    s.port = port_;
    s.counter = counter_;
    s.time = t;
    s.value = v;
    return s;
  }

 private:
  std::string node_, source_, device_, port_, counter_;
};

inline int CountActive(const std::vector<Finding>& fs, IncidentKind kind) {
  int n = 0;
  for (const Finding& f : fs) n += f.kind == kind && f.active;
  return n;
}

inline const Finding* First(const std::vector<Finding>& fs, IncidentKind kind, bool active) {
  for (const Finding& f : fs) {
    if (f.kind == kind && f.active == active) return &f;
  }
  return nullptr;
}

}  // namespace ringside::analysis::testing

#endif  // RINGSIDE_TESTS_ANALYSIS_FABRIC_SIM_H_
