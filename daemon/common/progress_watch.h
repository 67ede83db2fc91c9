// Whether a counter that a healthy loop keeps moving (flushes done, cycles completed) has moved
// recently: the aggregator's watchdog pets stop when the analysis flush loop stalls. One caller
// thread; not thread-safe.
#ifndef RINGSIDE_DAEMON_COMMON_PROGRESS_WATCH_H_
#define RINGSIDE_DAEMON_COMMON_PROGRESS_WATCH_H_

#include <cstdint>
#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/common/steady_time.h"

namespace ringside::daemon {

class ProgressWatch {
 public:
  // `now`: a monotonic clock (a step of the wall clock is no stall).
  explicit ProgressWatch(absl::Duration stall_after, std::function<absl::Time()> now = SteadyNow);

  // Observes the counter; true while it moved within stall_after (the first observation counts
  // as a move).
  bool Moving(uint64_t counter);
  // How long the counter had not moved at the latest Moving().
  absl::Duration still_for() const { return still_for_; }
  absl::Duration stall_after() const { return stall_after_; }

 private:
  absl::Duration stall_after_;
  std::function<absl::Time()> now_;
  bool seen_ = false;
  uint64_t last_ = 0;
  absl::Time moved_;
  absl::Duration still_for_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_PROGRESS_WATCH_H_
