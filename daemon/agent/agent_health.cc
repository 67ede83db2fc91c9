#include "daemon/agent/agent_health.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringside::daemon {

AgentHealth::AgentHealth(AgentHealthOptions options) : options_(std::move(options)) {
  if (!options_.now) options_.now = absl::Now;
}

absl::Duration AgentHealth::stale_after() const {
  return std::max(options_.interval * options_.stale_cycles, options_.min_stale_after);
}

void AgentHealth::OnCycle() {
  const absl::Time now = options_.now();
  absl::MutexLock lock(&mu_);
  last_cycle_ = now;
  ++cycles_;
}

HealthVerdict AgentHealth::Live() const {
  const absl::Time now = options_.now();
  absl::MutexLock lock(&mu_);
  if (cycles_ == 0) return {false, "no sampling cycle completed yet"};
  const absl::Duration since = now - last_cycle_;
  if (since > stale_after()) {
    return {false, absl::StrCat("sampler stuck: last cycle completed ",
                                absl::FormatDuration(absl::Trunc(since, absl::Milliseconds(1))),
                                " ago (limit ", absl::FormatDuration(stale_after()), ")")};
  }
  return {true, "ok"};
}

HealthVerdict AgentHealth::Ready() {
  const absl::Time now = options_.now();
  std::optional<std::vector<ReplicaUploadStats>> up;
  if (options_.upload_stats) up = options_.upload_stats();
  absl::MutexLock lock(&mu_);
  if (cycles_ == 0) return {false, "first sampling cycle not done yet"};
  if (!up.has_value() || up->empty()) return {true, "ok"};
  // One verdict per replica; the agent is ready while any replica gets its data (connected, or
  // buffered within bound): the replicas of a shard stand in for each other.
  std::vector<HealthVerdict> each;
  for (const ReplicaUploadStats& r : *up) {
    uint64_t drops = 0;
    for (const UploadBuffer::Drops& d : r.stats.dropped) drops += d.messages;
    DropWatch& w = drops_[r.target];
    // Drops seen at the first check count as recent: when they happened is not known.
    if (drops > w.seen.value_or(0)) w.last = now;
    w.seen = drops;
    if (r.stats.connected) {
      each.push_back({true, "connected to the aggregator"});
    } else if (now - w.last <= options_.drop_window) {
      each.push_back({false, absl::StrCat("aggregator not connected and the upload buffer is full: "
                                          "dropping messages (",
                                          drops, " dropped since start)")});
    } else {
      const double fill =
          r.stats.buffer_capacity > 0
              ? 100.0 * static_cast<double>(r.stats.buffer_bytes) /
                    static_cast<double>(r.stats.buffer_capacity)
              : 0;
      each.push_back({true, absl::StrCat("aggregator not connected, buffering (",
                                         static_cast<int>(fill), "% of the upload buffer)")});
    }
  }
  bool any = false;
  for (const HealthVerdict& v : each) any = any || v.ok;
  if (each.size() == 1) return {any, absl::StrCat(any ? "ok: " : "", each[0].reason)};
  std::string reason = any ? "ok:" : "no aggregator replica gets the data:";
  for (size_t i = 0; i < each.size(); ++i) {
    absl::StrAppend(&reason, i ? ";" : "", " ", (*up)[i].target, " ", each[i].reason);
  }
  return {any, reason};
}

}  // namespace ringside::daemon
