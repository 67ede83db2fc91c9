#include "collectors/verbs/verbs_devices.h"

#include <fcntl.h>
#include <infiniband/verbs.h>

#include <cerrno>

namespace ringside::collectors {
namespace {

class IbvDevice : public VerbsDevice {
 public:
  IbvDevice(ibv_context* ctx, int ports) : ctx_(ctx), ports_(ports) {}
  ~IbvDevice() override { ibv_close_device(ctx_); }

  int fd() const override { return ctx_->async_fd; }

  ReadResult Read(VerbsAsyncEvent* event) override {
    ibv_async_event ev;
    for (;;) {
      if (ibv_get_async_event(ctx_, &ev) == 0) break;
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? ReadResult::kNone : ReadResult::kGone;
    }
    event->type = ev.event_type;
    event->port = ev.event_type == IBV_EVENT_PORT_ERR || ev.event_type == IBV_EVENT_PORT_ACTIVE
                      ? ev.element.port_num
                      : 0;
    ibv_ack_async_event(&ev);
    return ReadResult::kEvent;
  }

  int port_count() const override { return ports_; }

  LinkState PortState(int port) const override {
    ibv_port_attr attr{};
    if (ibv_query_port(ctx_, static_cast<uint8_t>(port), &attr) != 0) return LinkState::kUnknown;
    return attr.state == IBV_PORT_ACTIVE ? LinkState::kUp : LinkState::kDown;
  }

 private:
  ibv_context* ctx_;
  int ports_;
};

class IbvDevices : public VerbsDevices {
 public:
  std::vector<std::string> List() override {
    std::vector<std::string> out;
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr) return out;  // no RDMA subsystem here
    for (int i = 0; i < n; ++i) out.push_back(ibv_get_device_name(list[i]));
    ibv_free_device_list(list);
    return out;
  }

  std::unique_ptr<VerbsDevice> Open(const std::string& name) override {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr) return nullptr;
    ibv_context* ctx = nullptr;
    for (int i = 0; i < n && ctx == nullptr; ++i) {
      if (name == ibv_get_device_name(list[i])) ctx = ibv_open_device(list[i]);
    }
    ibv_free_device_list(list);
    if (ctx == nullptr) return nullptr;
    const int flags = fcntl(ctx->async_fd, F_GETFL);
    fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
    ibv_device_attr attr{};
    const int ports = ibv_query_device(ctx, &attr) == 0 ? attr.phys_port_cnt : 0;
    return std::make_unique<IbvDevice>(ctx, ports);
  }
};

}  // namespace

std::unique_ptr<VerbsDevices> MakeLibibverbsDevices() { return std::make_unique<IbvDevices>(); }

}  // namespace ringside::collectors
