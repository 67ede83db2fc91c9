// The interface every collector implements: read one source, no threads, no network.
#ifndef RINGSIDE_COLLECTORS_COMMON_COLLECTOR_H_
#define RINGSIDE_COLLECTORS_COMMON_COLLECTOR_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "collectors/common/series.h"

namespace ringside::collectors {

// What went wrong in one cycle, per series. Bounded: the count is exact, the messages are the
// first few only.
struct CycleErrors {
  static constexpr size_t kMaxMessages = 8;
  uint64_t count = 0;
  std::vector<std::string> messages;

  void Add(const absl::Status& status) {
    ++count;
    if (messages.size() < kMaxMessages) messages.emplace_back(status.ToString());
  }
};

class Collector {
 public:
  virtual ~Collector() = default;
  virtual absl::string_view name() const = 0;
  // Reads every series once. Never fails as a whole: a missing tree yields an empty table, a
  // failed read marks that value kError and is added to `errors`.
  virtual void Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) = 0;
  // OK when the source is there; otherwise why the collector is off (no library, no device), said
  // once at start-up and exported as a metric rather than as an error every cycle.
  virtual absl::Status Availability() const { return absl::OkStatus(); }
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_COMMON_COLLECTOR_H_
