#include "daemon/aggregator/alerts/alert_sender.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringside::daemon {

void AlertSender::NoteFailure(const std::string& what) {
  ++failures_in_a_row_;
  stats_.failed.fetch_add(1, std::memory_order_relaxed);
  if ((failures_in_a_row_ & (failures_in_a_row_ - 1)) == 0) {
    Log(absl::StrCat(options_.name, ": delivery failed (", failures_in_a_row_,
                     failures_in_a_row_ == 1 ? " time" : " times in a row", "): ", what));
  }
}

void AlertSender::NoteSuccess() {
  if (failures_in_a_row_ > 0) {
    Log(absl::StrCat(options_.name, ": delivering again after ", failures_in_a_row_,
                     " failed attempts"));
  }
  failures_in_a_row_ = 0;
  stats_.delivered.fetch_add(1, std::memory_order_relaxed);
  stats_.last_delivery_unix_ms.store(absl::ToUnixMillis(options_.now()), std::memory_order_relaxed);
}

absl::Duration MinFiring(const SenderOptions& options, analysis::IncidentKind kind) {
  auto it = options.min_firing_for.find(kind);
  return it != options.min_firing_for.end() ? it->second : options.min_firing;
}

analysis::Incident FiringView(const analysis::Incident& resolved) {
  analysis::Incident inc = resolved;
  if (inc.resolved.has_value()) {
    inc.resolved.reset();
    inc.resolution.clear();
    inc.evidence.erase("unconfirmed_after_restart");
    inc.revision = std::max<uint64_t>(1, inc.revision - 1);
  }
  return inc;
}

bool RetryableHttpStatus(int status) {
  return status >= 500 || status == 408 || status == 429 || status < 200;
}

}  // namespace ringside::daemon
