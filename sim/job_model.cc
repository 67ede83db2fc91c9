#include "sim/job_model.h"

#include <algorithm>
#include <cmath>

namespace ringside::sim {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

JobModel::JobModel(const Scenario& scenario, int64_t t0_ns) : s_(scenario), t0_ns_(t0_ns) {
  it_.arrive_ns.resize(s_.ranks());
  it_.stop_ns.resize(s_.ranks());
}

double JobModel::Noise(uint64_t i, uint64_t r, uint64_t salt) const {
  // Sum of three uniforms, centred and scaled: close enough to a normal for jitter.
  double sum = 0;
  for (uint64_t k = 0; k < 3; ++k) {
    const uint64_t h = Mix(s_.seed ^ Mix(i * 0x100000001b3ull ^ Mix(r * 131 + salt * 7919 + k)));
    sum += static_cast<double>(h >> 11) / 9007199254740992.0;
  }
  return (sum - 1.5) * 2.0;
}

double JobModel::RankSlowdown(int rank, absl::Duration t) const {
  double slow = 0;
  for (const FaultSpec& f : s_.faults) {
    if (f.rank != rank || f.slowdown_pct <= 0 || f.kind == FaultKind::kJobSlowdown) continue;
    if (t >= f.start && t < f.start + f.duration) slow += f.slowdown_pct / 100.0;
  }
  return slow;
}

double JobModel::CollectiveFactor(absl::Duration t) const {
  double factor = 1;
  for (const FaultSpec& f : s_.faults) {
    if (f.kind == FaultKind::kJobSlowdown && t >= f.start && t < f.start + f.duration) {
      factor = std::max(factor, f.factor);
    }
  }
  return factor;
}

const Iteration& JobModel::Next() {
  if (started_) {
    ++it_.index;
    it_.begin_ns = it_.end_ns;
  } else {
    started_ = true;
    it_.index = 0;
    it_.begin_ns = t0_ns_;
  }
  const absl::Duration t = absl::Nanoseconds(it_.begin_ns - t0_ns_);
  const double compute_ns = absl::ToDoubleNanoseconds(s_.compute);
  int64_t last = it_.begin_ns;
  for (int r = 0; r < s_.ranks(); ++r) {
    const double c = compute_ns * (1 + RankSlowdown(r, t)) * (1 + s_.jitter * Noise(it_.index, r, 1));
    it_.arrive_ns[r] = it_.begin_ns + static_cast<int64_t>(std::max(0.0, c));
    last = std::max(last, it_.arrive_ns[r]);
  }
  const double coll = absl::ToDoubleNanoseconds(s_.collective) * CollectiveFactor(t) *
                      (1 + 0.02 * Noise(it_.index, 0, 2));
  it_.end_ns = last + static_cast<int64_t>(std::max(1000.0, coll));
  for (int r = 0; r < s_.ranks(); ++r) {
    // Ranks leave the ring a few microseconds apart.
    it_.stop_ns[r] = it_.end_ns + (r % 8) * 2000;
  }
  return it_;
}

}  // namespace ringside::sim
