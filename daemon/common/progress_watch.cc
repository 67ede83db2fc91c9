#include "daemon/common/progress_watch.h"

#include <utility>

namespace ringside::daemon {

ProgressWatch::ProgressWatch(absl::Duration stall_after, std::function<absl::Time()> now)
    : stall_after_(stall_after), now_(std::move(now)) {}

bool ProgressWatch::Moving(uint64_t counter) {
  const absl::Time now = now_();
  if (!seen_ || counter != last_) {
    moved_ = now;
    seen_ = true;
    last_ = counter;
  }
  still_for_ = now - moved_;
  return still_for_ <= stall_after_;
}

}  // namespace ringside::daemon
