// Jittered exponential backoff for reconnecting: initial, initial x multiplier, ... up to max,
// each delay spread uniformly by ±jitter and never above max.
#ifndef RINGSIDE_DAEMON_AGENT_BACKOFF_H_
#define RINGSIDE_DAEMON_AGENT_BACKOFF_H_

#include <cstdint>
#include <random>

#include "absl/time/time.h"

namespace ringside::daemon {

struct BackoffOptions {
  absl::Duration initial = absl::Milliseconds(100);
  absl::Duration max = absl::Seconds(30);
  double multiplier = 1.6;
  double jitter =
      0.2;  // each delay is drawn from [d x (1 - jitter), d x (1 + jitter)], then capped
};

class Backoff {
 public:
  explicit Backoff(BackoffOptions options, uint64_t seed = std::random_device{}());

  // The delay before the next attempt; grows the following one.
  absl::Duration Next();
  // Back to the initial delay (after a healthy session).
  void Reset() { current_ = options_.initial; }
  const BackoffOptions& options() const { return options_; }

 private:
  BackoffOptions options_;
  absl::Duration current_;
  std::mt19937_64 rng_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_BACKOFF_H_
