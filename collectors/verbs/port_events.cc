#include "collectors/verbs/port_events.h"

#include <fcntl.h>
#include <infiniband/verbs.h>

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
  auto w = std::unique_ptr<VerbsPortWatcher>(new VerbsPortWatcher());
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return w;  // no RDMA subsystem here
  for (int i = 0; i < n; ++i) {
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) continue;
    int flags = fcntl(ctx->async_fd, F_GETFL);
    fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
    w->contexts_.push_back(Device{ibv_get_device_name(list[i]), ctx});
  }
  ibv_free_device_list(list);
  return w;
}

VerbsPortWatcher::~VerbsPortWatcher() {
  for (Device& d : contexts_) ibv_close_device(d.context);
}

std::vector<int> VerbsPortWatcher::fds() const {
  std::vector<int> out;
  for (const Device& d : contexts_) out.push_back(d.context->async_fd);
  return out;
}

void VerbsPortWatcher::Drain(absl::Time received, std::vector<LinkEvent>& out) {
  for (Device& d : contexts_) {
    for (int i = 0; i < 1000; ++i) {  // bounded; the fd is non-blocking
      ibv_async_event ev;
      if (ibv_get_async_event(d.context, &ev) != 0) break;
      const int port = ev.event_type == IBV_EVENT_PORT_ERR || ev.event_type == IBV_EVENT_PORT_ACTIVE
                           ? ev.element.port_num
                           : 0;
      if (auto e = TranslateVerbsEvent(d.name, ev.event_type, port, received)) {
        out.push_back(std::move(*e));
      }
      ibv_ack_async_event(&ev);
    }
  }
}

}  // namespace ringside::collectors
