// Small waiting and counting helpers shared by the tests that drive real processes and servers.
#ifndef RINGSIDE_TESTS_TESTING_EVENTUALLY_H_
#define RINGSIDE_TESTS_TESTING_EVENTUALLY_H_

#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ringside::testing {

// Polls `pred` every `poll` for at most `timeout`; returns its last value.
template <typename Pred>
bool Eventually(Pred pred, absl::Duration timeout = absl::Seconds(10),
                absl::Duration poll = absl::Milliseconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (pred()) return true;
    absl::SleepFor(poll);
  }
  return pred();
}

// How often `needle` occurs in `haystack`, without overlaps.
inline int CountOf(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t p = haystack.find(needle); p != std::string::npos;
       p = haystack.find(needle, p + needle.size())) {
    ++n;
  }
  return n;
}

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_EVENTUALLY_H_
