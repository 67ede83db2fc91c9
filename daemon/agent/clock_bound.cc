#include "daemon/agent/clock_bound.h"

#include <cstring>

namespace ringside::daemon {

std::optional<v1::ClockBound> ReadClockBound(const AdjtimexFn& adjtimex_fn) {
  struct timex tx;
  std::memset(&tx, 0, sizeof(tx));  // modes 0: read only
  const int state = adjtimex_fn ? adjtimex_fn(&tx) : ::adjtimex(&tx);
  if (state < 0) return std::nullopt;
  v1::ClockBound b;
  b.set_synchronized(state != TIME_ERROR && (tx.status & STA_UNSYNC) == 0);
  b.set_max_error_nanos(static_cast<int64_t>(tx.maxerror) * 1000);
  b.set_est_error_nanos(static_cast<int64_t>(tx.esterror) * 1000);
  return b;
}

}  // namespace ringside::daemon
