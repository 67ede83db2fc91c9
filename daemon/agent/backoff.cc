#include "daemon/agent/backoff.h"

#include <algorithm>

namespace ringside::daemon {

Backoff::Backoff(BackoffOptions options, uint64_t seed)
    : options_(options), current_(options.initial), rng_(seed) {
  options_.multiplier = std::max(1.0, options_.multiplier);
  options_.jitter = std::clamp(options_.jitter, 0.0, 1.0);
  if (options_.max < options_.initial) options_.max = options_.initial;
  current_ = options_.initial;
}

absl::Duration Backoff::Next() {
  const absl::Duration base = current_;
  current_ = std::min(options_.max, current_ * options_.multiplier);
  std::uniform_real_distribution<double> spread(1.0 - options_.jitter, 1.0 + options_.jitter);
  return std::clamp(base * spread(rng_), absl::ZeroDuration(), options_.max);
}

}  // namespace ringside::daemon
