// libibverbs asynchronous port events (IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ACTIVE, ...) as
// LinkEvents. Where libibverbs finds devices, the agent reads their async event fds from the same
// thread that reads netlink, so an IB port flap lands in the same transition log.
#ifndef RINGSIDE_COLLECTORS_VERBS_PORT_EVENTS_H_
#define RINGSIDE_COLLECTORS_VERBS_PORT_EVENTS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectors/common/link_event.h"

struct ibv_context;

namespace ringside::collectors {

// The libibverbs event types this translation understands (values of enum ibv_event_type).
// Port errors become down, port active becomes up; LID/GID/PKey changes and client reregistration
// are port events that are not transitions; a fatal device error takes every port down.
std::optional<LinkEvent> TranslateVerbsEvent(const std::string& device, int event_type,
                                             int port_num, absl::Time when);

class VerbsPortWatcher {
 public:
  // Opens every device libibverbs lists. No devices (or no libibverbs provider) is not an error:
  // the watcher is empty.
  static absl::StatusOr<std::unique_ptr<VerbsPortWatcher>> Open();
  ~VerbsPortWatcher();

  // The async event descriptors to wait on, one per device.
  std::vector<int> fds() const;
  size_t devices() const { return contexts_.size(); }
  // Reads every pending event of every device without blocking.
  void Drain(absl::Time received, std::vector<LinkEvent>& out);

 private:
  struct Device {
    std::string name;
    ibv_context* context = nullptr;
  };
  std::vector<Device> contexts_;
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_VERBS_PORT_EVENTS_H_
