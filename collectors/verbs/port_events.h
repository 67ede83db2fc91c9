// libibverbs asynchronous port events (IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ACTIVE, ...) as
// LinkEvents. Where libibverbs finds devices, the agent reads their async event fds from the same
// thread that reads netlink, so an IB port flap lands in the same transition log.
#ifndef RINGSIDE_COLLECTORS_VERBS_PORT_EVENTS_H_
#define RINGSIDE_COLLECTORS_VERBS_PORT_EVENTS_H_

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collectors/common/link_event.h"
#include "collectors/verbs/verbs_devices.h"

namespace ringside::collectors {

// The libibverbs event types this translation understands (values of enum ibv_event_type).
// Port errors become down, port active becomes up; LID/GID/PKey changes and client reregistration
// are port events that are not transitions; a fatal device error takes every port down.
std::optional<LinkEvent> TranslateVerbsEvent(const std::string& device, int event_type,
                                             int port_num, absl::Time when);

// Watches the async events of every RDMA device. A device whose async fd reports POLLERR/POLLHUP
// or whose read fails (EIO: disassociated by unplug, driver reload or firmware reset) is closed and
// its ports reported down; Rescan() opens devices that appeared or came back since.
class VerbsPortWatcher {
 public:
  // Through libibverbs. No devices (or no libibverbs provider) is not an error: the watcher is
  // empty until a rescan finds some.
  static absl::StatusOr<std::unique_ptr<VerbsPortWatcher>> Open();
  // Through any device source (tests pass a fake). Opens every device listed now.
  static std::unique_ptr<VerbsPortWatcher> Open(std::unique_ptr<VerbsDevices> source);
  ~VerbsPortWatcher();

  // The async event descriptors to wait on, one per open device. Changes after Lost/Drain/Rescan.
  std::vector<int> fds() const;
  size_t devices() const { return open_.size(); }
  // Reads every pending event of every device without blocking. A device whose read fails with
  // anything but EAGAIN is closed and reported as removed.
  void Drain(absl::Time received, std::vector<LinkEvent>& out);
  // The device owning `fd` polled POLLERR/POLLHUP/POLLNVAL: close it, report it removed.
  void Lost(int fd, absl::Time received, std::vector<LinkEvent>& out);
  // Opens listed devices that are not open (new, or back after a removal). A device that comes
  // back reports each port that is up again as a down-to-up transition.
  void Rescan(absl::Time received, std::vector<LinkEvent>& out);

  uint64_t removals() const { return removals_; }
  uint64_t reopens() const { return reopens_; }

 private:
  explicit VerbsPortWatcher(std::unique_ptr<VerbsDevices> source) : source_(std::move(source)) {}
  struct Device {
    std::string name;
    std::unique_ptr<VerbsDevice> device;
  };
  void Remove(size_t index, absl::string_view why, absl::Time received,
              std::vector<LinkEvent>& out);

  std::unique_ptr<VerbsDevices> source_;
  std::vector<Device> open_;
  std::set<std::string> removed_;  // names closed after a removal, not yet back
  uint64_t removals_ = 0;
  uint64_t reopens_ = 0;
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_VERBS_PORT_EVENTS_H_
