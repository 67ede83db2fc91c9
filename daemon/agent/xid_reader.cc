#include "daemon/agent/xid_reader.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringside::daemon {

XidReader::XidReader(collectors::XidEvents* events, LinkEventLog* log, XidReaderOptions options)
    : events_(events), log_(log), options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

XidReader::~XidReader() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

void XidReader::Loop() {
  uint64_t logged_errors = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    const absl::Time now = options_.clock ? options_.clock() : absl::Now();
    absl::StatusOr<std::vector<collectors::LinkEvent>> got = events_->Wait(options_.wait, now);
    if (!got.ok()) {
      const uint64_t n = wait_errors_.fetch_add(1, std::memory_order_relaxed) + 1;
      if (options_.log && n >= logged_errors * 2 + 1) {  // 1, 3, 7, 15, ...: rate-limited
        logged_errors = n;
        options_.log(absl::StrCat("XID events: ", got.status().ToString(), " (", n,
                                  " failed waits so far)"));
      }
      // Sleep in slices so that stopping stays quick.
      const absl::Time until = absl::Now() + options_.error_pause;
      while (!stop_.load(std::memory_order_acquire) && absl::Now() < until) {
        absl::SleepFor(absl::Milliseconds(20));
      }
      continue;
    }
    if (got->empty()) continue;
    // The event's time is when NVML handed it over (NVML gives none): restamp at arrival.
    const absl::Time at = options_.clock ? options_.clock() : absl::Now();
    for (collectors::LinkEvent& e : *got) e.time = at;
    xids_.fetch_add(got->size(), std::memory_order_relaxed);
    log_->Append(*std::move(got));
  }
}

}  // namespace ringside::daemon
