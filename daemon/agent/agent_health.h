// The agent's /healthz and /readyz verdicts (docs/agent-upload.md "Health endpoints").
//
//   live  (/healthz): the sampler completed a cycle within max(3 x interval, min_stale_after).
//                     A hung collector (a wedged driver call, a stuck sysfs read) fails it.
//   ready (/readyz):  the first cycle is done, and with an aggregator configured, the upload
//                     stream is connected or buffering within its bound: not ready while the
//                     buffer is dropping (messages dropped within drop_window of the check).
//
// OnCycle() runs on the sampling thread; the verdicts on the HTTP threads.
#ifndef RINGSIDE_DAEMON_AGENT_AGENT_HEALTH_H_
#define RINGSIDE_DAEMON_AGENT_AGENT_HEALTH_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/agent/uploader.h"

namespace ringside::daemon {

struct ReplicaUploadStats {
  std::string target;  // host:port
  UploaderStats stats;
};

struct AgentHealthOptions {
  absl::Duration interval = absl::Seconds(1);  // the sampling interval
  // Live while a cycle completed within max(stale_cycles x interval, min_stale_after).
  int stale_cycles = 3;
  absl::Duration min_stale_after = absl::Seconds(10);
  // Not ready while the upload buffer dropped a message within this long.
  absl::Duration drop_window = absl::Seconds(60);
  // Each aggregator replica's uploader stats; unset when the agent uploads nowhere.
  std::function<std::vector<ReplicaUploadStats>()> upload_stats;
  std::function<absl::Time()> now = absl::Now;
};

struct HealthVerdict {
  bool ok = false;
  std::string reason;  // one line: "ok", or why not
};

class AgentHealth {
 public:
  explicit AgentHealth(AgentHealthOptions options);

  // A sampling cycle completed (sampling thread).
  void OnCycle() ABSL_LOCKS_EXCLUDED(mu_);

  HealthVerdict Live() const ABSL_LOCKS_EXCLUDED(mu_);
  HealthVerdict Ready() ABSL_LOCKS_EXCLUDED(mu_);

  // How long after the last completed cycle Live() fails.
  absl::Duration stale_after() const;

 private:
  AgentHealthOptions options_;
  mutable absl::Mutex mu_;
  absl::Time last_cycle_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t cycles_ ABSL_GUARDED_BY(mu_) = 0;
  // Per replica: upload drops as last seen by Ready(), and when they last grew.
  struct DropWatch {
    std::optional<uint64_t> seen;
    absl::Time last = absl::InfinitePast();
  };
  std::map<std::string, DropWatch> drops_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_AGENT_HEALTH_H_
