// ProgressWatch on a fake clock: moving while the counter changes within the stall bound, stalled
// after it, moving again at the next change.
#include "daemon/common/progress_watch.h"

#include <gtest/gtest.h>

namespace ringside::daemon {
namespace {

TEST(ProgressWatchTest, StallsWhenTheCounterStopsAndRecovers) {
  absl::Time now = absl::FromUnixSeconds(100);
  ProgressWatch w(absl::Seconds(30), [&] { return now; });
  EXPECT_TRUE(w.Moving(5));  // the first observation starts the clock
  now += absl::Seconds(20);
  EXPECT_TRUE(w.Moving(6));
  now += absl::Seconds(30);
  EXPECT_TRUE(w.Moving(6));  // exactly the bound
  now += absl::Seconds(1);
  EXPECT_FALSE(w.Moving(6));
  EXPECT_EQ(w.still_for(), absl::Seconds(31));
  now += absl::Seconds(100);
  EXPECT_FALSE(w.Moving(6));
  EXPECT_TRUE(w.Moving(7));
  EXPECT_EQ(w.still_for(), absl::ZeroDuration());
}

}  // namespace
}  // namespace ringside::daemon
