// XID events of every GPU through one NVML event set (shared/reference/nvml-nvlink.md §9,
// gpu-causes.md §1.4): nvmlEventSetCreate, nvmlDeviceRegisterEvents with the XID critical error
// bit, and nvmlEventSetWait_v2 called in a loop by a thread of the agent's own
// (daemon/agent/xid_reader.h). Each XID becomes a LinkEvent at once (source "nvml_xid", device =
// the NVML GPU index, detail "XID <n>", no state change) and is tallied per GPU for the series
// xid_events and last_xid (gpu_signals.h). Events before registration are lost (NVML's rule).
#ifndef RINGSIDE_COLLECTORS_NVML_XID_EVENTS_H_
#define RINGSIDE_COLLECTORS_NVML_XID_EVENTS_H_

#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectors/common/link_event.h"
#include "collectors/nvml/gpu_signals.h"
#include "collectors/nvml/nvml_api.h"

namespace ringside::collectors {

inline constexpr char kXidEventSource[] = "nvml_xid";

class XidEvents {
 public:
  // Creates the event set. Unimplemented when the driver lacks the event API.
  static absl::StatusOr<std::unique_ptr<XidEvents>> Create(
      std::shared_ptr<const nvml::NvmlLibrary> lib);
  ~XidEvents();

  // Watches GPU `index` (its handle `dev`); a GPU already watched is left as it is.
  // Unimplemented when the GPU does not support XID events (then it is not retried).
  absl::Status Register(nvml::Device dev, unsigned int index) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits up to `timeout` (ms resolution) for an event. Returns the XIDs that arrived (none on a
  // timeout or an interrupt), stamped with `now()`; an error status for another failure (GPU
  // lost: the caller should pause before waiting again).
  absl::StatusOr<std::vector<LinkEvent>> Wait(absl::Duration timeout, absl::Time now)
      ABSL_LOCKS_EXCLUDED(mu_);

  XidTally TallyOf(unsigned int index) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  XidEvents(std::shared_ptr<const nvml::NvmlLibrary> lib, nvml::EventSet set)
      : lib_(std::move(lib)), set_(set) {}

  const std::shared_ptr<const nvml::NvmlLibrary> lib_;
  const nvml::EventSet set_;
  mutable absl::Mutex mu_;
  std::map<nvml::Device, unsigned int> index_of_ ABSL_GUARDED_BY(mu_);
  std::map<unsigned int, XidTally> tallies_ ABSL_GUARDED_BY(mu_);  // registered or refused
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NVML_XID_EVENTS_H_
