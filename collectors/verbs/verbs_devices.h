// The seam between the verbs port watcher and libibverbs: list RDMA devices, open one, read its
// async events. The real implementation (MakeLibibverbsDevices) goes through ibv_get_device_list /
// ibv_open_device / ibv_get_async_event; tests pass a fake whose devices disappear and come back.
//
// What a disappearing device looks like (kernel >= 5.7, uverbs_main.c ib_uverbs_event_poll): once
// a device is disassociated (hot-unplug, driver reload, mlx5 firmware reset or health recovery) its
// async fd polls POLLERR forever and read() fails with EIO. The device may later reappear under
// the same name, but only a fresh ibv_open_device() sees it.
#ifndef RINGSIDE_COLLECTORS_VERBS_VERBS_DEVICES_H_
#define RINGSIDE_COLLECTORS_VERBS_VERBS_DEVICES_H_

#include <memory>
#include <string>
#include <vector>

#include "collectors/common/link_event.h"

namespace ringside::collectors {

struct VerbsAsyncEvent {
  int type = 0;  // enum ibv_event_type
  int port = 0;  // for port events; 0 otherwise
};

class VerbsDevice {
 public:
  enum class ReadResult { kEvent, kNone, kGone };
  virtual ~VerbsDevice() = default;  // closes the device
  // Non-blocking descriptor that becomes readable when an event is queued.
  virtual int fd() const = 0;
  // One pending event (kEvent, acknowledged), nothing pending (kNone), or the device is gone (the
  // read failed with anything but EAGAIN/EINTR: EIO once disassociated).
  virtual ReadResult Read(VerbsAsyncEvent* event) = 0;
  virtual int port_count() const = 0;
  // Current state of a port (1-based), kUnknown when it cannot be queried.
  virtual LinkState PortState(int port) const = 0;
};

class VerbsDevices {
 public:
  virtual ~VerbsDevices() = default;
  // Names of the RDMA devices present now.
  virtual std::vector<std::string> List() = 0;
  // Opens a device by name; null when it cannot be opened (gone again, no permission).
  virtual std::unique_ptr<VerbsDevice> Open(const std::string& name) = 0;
};

std::unique_ptr<VerbsDevices> MakeLibibverbsDevices();

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_VERBS_VERBS_DEVICES_H_
