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
  std::optional<UploaderStats> up;
  if (options_.upload_stats) up = options_.upload_stats();
  absl::MutexLock lock(&mu_);
  if (cycles_ == 0) return {false, "first sampling cycle not done yet"};
  if (!up.has_value()) return {true, "ok"};
  uint64_t drops = 0;
  for (const UploadBuffer::Drops& d : up->dropped) drops += d.messages;
  // Drops seen at the first check count as recent: when they happened is not known.
  if (drops > seen_drops_.value_or(0)) last_drop_ = now;
  seen_drops_ = drops;
  if (up->connected) return {true, "ok: connected to the aggregator"};
  if (now - last_drop_ <= options_.drop_window) {
    return {false, absl::StrCat("aggregator not connected and the upload buffer is full: "
                                "dropping messages (",
                                drops, " dropped since start)")};
  }
  const double fill = up->buffer_capacity > 0 ? 100.0 * static_cast<double>(up->buffer_bytes) /
                                                    static_cast<double>(up->buffer_capacity)
                                              : 0;
  return {true, absl::StrCat("ok: aggregator not connected, buffering (", static_cast<int>(fill),
                             "% of the upload buffer)")};
}

}  // namespace ringside::daemon
