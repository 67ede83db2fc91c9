// Runs the collectors every interval and publishes the latest snapshot. Readers (the Prometheus
// exposition, the uploader, the printers) take a shared_ptr to an immutable snapshot and never
// block the collectors.
#ifndef RINGSIDE_DAEMON_AGENT_SAMPLER_H_
#define RINGSIDE_DAEMON_AGENT_SAMPLER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "collectors/common/collector.h"
#include "collectors/common/series.h"
#include "daemon/common/forward_clock.h"

namespace ringside::daemon {

// Cumulative health of one collector, for self-metrics.
struct CollectorHealth {
  std::string name;
  uint64_t cycles = 0;
  uint64_t read_errors_total = 0;
  absl::Duration last_duration;
  size_t series = 0;
  absl::Status availability;  // the collector's Availability(): OK, or why it is off
};

struct AgentSnapshot {
  std::string node;
  absl::Time timestamp;
  uint64_t cycle = 0;
  std::vector<collectors::CollectorSnapshot> collectors;
  // Parallel to collectors: true for a collector an early cycle did not run (its snapshot is the
  // previous cycle's, carried over for readers of the latest snapshot; not a new reading, so the
  // uploader does not send it again under this cycle's time).
  std::vector<bool> carried;
  std::vector<CollectorHealth> health;  // parallel to collectors
  uint64_t overruns_total = 0;          // cycles that started late because the previous overran
  uint64_t early_total = 0;             // cycles run ahead of the schedule (RequestCycle)
};

struct SamplerOptions {
  std::string node;
  absl::Duration interval = absl::Seconds(1);
  // Read errors are logged at most once per collector per this period (with the count).
  absl::Duration error_log_period = absl::Seconds(60);
};

class Sampler {
 public:
  using NowFn = std::function<absl::Time()>;
  using LogFn = std::function<void(const std::string&)>;

  // `now`: the wall clock. Sample times are read from it through a ForwardClock (never back).
  Sampler(SamplerOptions options, std::vector<std::unique_ptr<collectors::Collector>> collectors,
          NowFn now = absl::Now, LogFn log = nullptr);

  // The clock of the sample times, for other times the agent sends that must be in one order
  // with them (link events): a time read from it after a cycle began is not before that cycle's.
  std::shared_ptr<ForwardClock> clock() const { return clock_; }

  // One cycle: every collector once (an early one: those of early_collectors, the others carried
  // over from the previous snapshot); publishes and returns the snapshot.
  std::shared_ptr<const AgentSnapshot> RunOnce(bool early = false);

  // Cycles every interval on a fixed schedule until `stop` is notified. A cycle that overruns its
  // slot makes the next start at once; the missed slots are counted, not queued.
  // `on_cycle` (optional) sees each published snapshot on the sampling thread.
  void Run(absl::Notification& stop,
           const std::function<void(const std::shared_ptr<const AgentSnapshot>&)>& on_cycle = {});

  std::shared_ptr<const AgentSnapshot> Latest() const ABSL_LOCKS_EXCLUDED(mu_);

  // Asks Run() for one cycle now, ahead of the schedule: a watched error counter moved, and its
  // delta should reach the aggregator without waiting for the next slot. The schedule itself is
  // kept, and at most one early cycle runs between two scheduled ones, so a counter that keeps
  // moving costs at most twice the scheduled rate. Thread-safe (and async-signal-safe: one
  // atomic store and one write to an eventfd); a no-op unless EnableEarlyCycles() was called
  // before Run().
  void RequestCycle();
  // `only`: the collectors (by name) an early cycle runs; empty: all. The agent names the one
  // whose error counters its watch follows ("infiniband"): the others keep their cadence, so
  // their steps are not cut into a few-millisecond step and the rest of the interval (a counter
  // updated at its own pace — an `ethtool -S` dump rewritten every second — would show 0 over the
  // first and twice its rate over the second: no three storming samples in a row, issue #25).
  void EnableEarlyCycles(std::vector<std::string> only = {});
  ~Sampler();

 private:
  SamplerOptions options_;
  std::vector<std::unique_ptr<collectors::Collector>> collectors_;
  std::shared_ptr<ForwardClock> clock_;
  LogFn log_;
  std::vector<CollectorHealth> health_;
  std::vector<absl::Time> last_error_log_;
  std::vector<uint64_t> errors_since_log_;
  // Sleeps until `steady_deadline` (SteadyNow()); false when `stop` was notified. With early
  // cycles, returns early (true, `*early` set) on a RequestCycle() when `allow_early`.
  bool SleepUntil(absl::Notification& stop, absl::Time steady_deadline, bool allow_early,
                  bool* early);

  uint64_t cycle_ = 0;
  absl::Time last_steady_start_;  // when the latest cycle began, SteadyNow()
  uint64_t overruns_ = 0;
  uint64_t early_ = 0;
  bool early_enabled_ = false;
  std::vector<std::string> early_collectors_;  // EnableEarlyCycles(only)
  std::atomic<bool> wake_{false};  // a cycle was requested
  int wake_fd_ = -1;               // eventfd written by RequestCycle(), polled by SleepUntil()

  mutable absl::Mutex mu_;
  std::shared_ptr<const AgentSnapshot> latest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_SAMPLER_H_
