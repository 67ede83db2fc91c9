#include "collectors/verbs/port_events.h"

#include <infiniband/verbs.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringside::collectors {

std::optional<LinkEvent> TranslateVerbsEvent(const std::string& device, int event_type,
                                             int port_num, absl::Time when) {
  LinkEvent e;
  e.time = when;
  e.source = "verbs";
  e.device = device;
  switch (static_cast<ibv_event_type>(event_type)) {
    case IBV_EVENT_PORT_ERR:
      e.port = std::to_string(port_num);
      e.from = LinkState::kUp;
      e.to = LinkState::kDown;
      e.detail = "IBV_EVENT_PORT_ERR";
      return e;
    case IBV_EVENT_PORT_ACTIVE:
      e.port = std::to_string(port_num);
      e.from = LinkState::kDown;
      e.to = LinkState::kUp;
      e.detail = "IBV_EVENT_PORT_ACTIVE";
      return e;
    case IBV_EVENT_DEVICE_FATAL:
      e.from = LinkState::kUnknown;
      e.to = LinkState::kDown;
      e.detail = "IBV_EVENT_DEVICE_FATAL";
      return e;
    default:
      return std::nullopt;  // QP/CQ/SRQ events, LID/GID/PKey changes: not link transitions
  }
}

absl::StatusOr<std::unique_ptr<VerbsPortWatcher>> VerbsPortWatcher::Open() {
  return Open(MakeLibibverbsDevices());
}

std::unique_ptr<VerbsPortWatcher> VerbsPortWatcher::Open(std::unique_ptr<VerbsDevices> source) {
  auto w = std::unique_ptr<VerbsPortWatcher>(new VerbsPortWatcher(std::move(source)));
  for (const std::string& name : w->source_->List()) {
    if (auto d = w->source_->Open(name)) w->open_.push_back(Device{name, std::move(d)});
  }
  return w;
}

VerbsPortWatcher::~VerbsPortWatcher() = default;

std::vector<int> VerbsPortWatcher::fds() const {
  std::vector<int> out;
  for (const Device& d : open_) out.push_back(d.device->fd());
  return out;
}

void VerbsPortWatcher::Remove(size_t index, absl::string_view why, absl::Time received,
                              std::vector<LinkEvent>& out) {
  Device& d = open_[index];
  // Ports cannot be queried any more; the count is from when the device was opened.
  const int ports = d.device->port_count();
  for (int p = 1; p <= std::max(ports, 1); ++p) {
    LinkEvent e;
    e.time = received;
    e.source = "verbs";
    e.device = d.name;
    e.port = ports > 0 ? std::to_string(p) : "";
    e.from = LinkState::kUnknown;
    e.to = LinkState::kDown;
    e.detail = absl::StrCat("device removed (", why, ")");
    out.push_back(std::move(e));
  }
  removed_.insert(d.name);
  ++removals_;
  open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(index));  // closes the device
}

void VerbsPortWatcher::Drain(absl::Time received, std::vector<LinkEvent>& out) {
  for (size_t i = 0; i < open_.size();) {
    Device& d = open_[i];
    bool gone = false;
    for (int n = 0; n < 1000; ++n) {  // bounded; the fd is non-blocking
      VerbsAsyncEvent ev;
      const VerbsDevice::ReadResult r = d.device->Read(&ev);
      if (r == VerbsDevice::ReadResult::kNone) break;
      if (r == VerbsDevice::ReadResult::kGone) {
        gone = true;
        break;
      }
      if (auto e = TranslateVerbsEvent(d.name, ev.type, ev.port, received)) {
        out.push_back(std::move(*e));
      }
    }
    if (gone) {
      Remove(i, "async event read failed", received, out);
    } else {
      ++i;
    }
  }
}

void VerbsPortWatcher::Lost(int fd, absl::Time received, std::vector<LinkEvent>& out) {
  for (size_t i = 0; i < open_.size(); ++i) {
    if (open_[i].device->fd() == fd) {
      Remove(i, "async fd POLLERR", received, out);
      return;
    }
  }
}

void VerbsPortWatcher::Rescan(absl::Time received, std::vector<LinkEvent>& out) {
  for (const std::string& name : source_->List()) {
    const bool is_open = std::any_of(open_.begin(), open_.end(),
                                     [&](const Device& d) { return d.name == name; });
    if (is_open) continue;
    std::unique_ptr<VerbsDevice> dev = source_->Open(name);
    if (dev == nullptr) continue;
    if (removed_.erase(name) > 0) {
      ++reopens_;
      for (int p = 1; p <= dev->port_count(); ++p) {
        if (dev->PortState(p) != LinkState::kUp) continue;  // still down, as last reported
        LinkEvent e;
        e.time = received;
        e.source = "verbs";
        e.device = name;
        e.port = std::to_string(p);
        e.from = LinkState::kDown;
        e.to = LinkState::kUp;
        e.detail = "device back, port active";
        out.push_back(std::move(e));
      }
    }
    open_.push_back(Device{name, std::move(dev)});
  }
}

}  // namespace ringside::collectors
