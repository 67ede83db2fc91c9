// RDMA device removal through the verbs seam: a fake device source whose devices disappear the way
// the kernel's do (uverbs_main.c ib_uverbs_event_poll: the async fd of a disassociated device polls
// POLLERR forever, read() fails with EIO) and come back under the same name.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "collectors/verbs/port_events.h"
#include "collectors/verbs/verbs_devices.h"
#include "daemon/agent/link_events.h"
#include "tests/testing/eventually.h"

namespace ringside::collectors {
namespace {

using ::ringside::testing::Eventually;

// Devices live here; the watcher gets handles through FakeVerbsDevices. Each open device's fd is
// the read end of a non-blocking pipe that Send() writes events to. Remove() replaces that fd
// (dup2) with the write end of a pipe without readers, which the kernel reports as POLLERR on
// every poll, and makes Read() fail like EIO.
class FakeVerbsHub {
 public:
  ~FakeVerbsHub() {
    absl::MutexLock lock(&mu_);
    for (auto& [name, d] : devices_) {
      if (d.write_fd >= 0) ::close(d.write_fd);
    }
  }

  void Add(const std::string& name, int ports, LinkState state) {
    absl::MutexLock lock(&mu_);
    Dev& d = devices_[name];
    d.present = true;
    d.ports = ports;
    d.state = state;
  }

  void Send(const std::string& name, int type, int port) {
    absl::MutexLock lock(&mu_);
    Dev& d = devices_.at(name);
    ASSERT_GE(d.write_fd, 0) << name << " is not open";
    VerbsAsyncEvent ev{type, port};
    ASSERT_EQ(::write(d.write_fd, &ev, sizeof(ev)), static_cast<ssize_t>(sizeof(ev)));
  }

  // Hot-unplug: the device leaves the list, its open handle turns into a POLLERR fd.
  void Remove(const std::string& name) {
    absl::MutexLock lock(&mu_);
    Dev& d = devices_.at(name);
    d.present = false;
    d.gone_generation = d.generation;
    if (d.read_fd >= 0) {
      int p[2];
      ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
      ::close(p[0]);
      ASSERT_GE(::dup2(p[1], d.read_fd), 0);
      ::close(p[1]);
    }
    if (d.write_fd >= 0) ::close(d.write_fd);
    d.write_fd = -1;
  }

  int open_count() const {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const auto& [name, d] : devices_) n += d.read_fd >= 0;
    return n;
  }
  int opens(const std::string& name) const {
    absl::MutexLock lock(&mu_);
    return devices_.at(name).generation;
  }

  std::vector<std::string> List() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out;
    for (const auto& [name, d] : devices_) {
      if (d.present) out.push_back(name);
    }
    return out;
  }

  std::unique_ptr<VerbsDevice> Open(const std::string& name);

  VerbsDevice::ReadResult Read(const std::string& name, int generation, int fd,
                               VerbsAsyncEvent* ev) {
    absl::MutexLock lock(&mu_);
    if (devices_.at(name).gone_generation >= generation) return VerbsDevice::ReadResult::kGone;
    const ssize_t n = ::read(fd, ev, sizeof(*ev));
    if (n == static_cast<ssize_t>(sizeof(*ev))) return VerbsDevice::ReadResult::kEvent;
    return VerbsDevice::ReadResult::kNone;
  }

  void Close(const std::string& name, int fd) {
    absl::MutexLock lock(&mu_);
    ::close(fd);
    Dev& d = devices_.at(name);
    if (d.read_fd == fd) d.read_fd = -1;
  }

  int ports(const std::string& name) const {
    absl::MutexLock lock(&mu_);
    return devices_.at(name).ports;
  }
  LinkState state(const std::string& name) const {
    absl::MutexLock lock(&mu_);
    return devices_.at(name).state;
  }

 private:
  struct Dev {
    bool present = false;
    int ports = 1;
    LinkState state = LinkState::kUp;
    int read_fd = -1, write_fd = -1;
    int generation = 0;       // opens so far
    int gone_generation = 0;  // handles up to this generation are disassociated
  };
  mutable absl::Mutex mu_;
  std::map<std::string, Dev> devices_ ABSL_GUARDED_BY(mu_);
};

class FakeVerbsDevice : public VerbsDevice {
 public:
  FakeVerbsDevice(FakeVerbsHub* hub, std::string name, int generation, int fd)
      : hub_(hub), name_(std::move(name)), generation_(generation), fd_(fd) {}
  ~FakeVerbsDevice() override { hub_->Close(name_, fd_); }
  int fd() const override { return fd_; }
  ReadResult Read(VerbsAsyncEvent* event) override {
    return hub_->Read(name_, generation_, fd_, event);
  }
  int port_count() const override { return hub_->ports(name_); }
  LinkState PortState(int) const override { return hub_->state(name_); }

 private:
  FakeVerbsHub* hub_;
  std::string name_;
  int generation_;
  int fd_;
};

std::unique_ptr<VerbsDevice> FakeVerbsHub::Open(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = devices_.find(name);
  if (it == devices_.end() || !it->second.present) return nullptr;
  Dev& d = it->second;
  int p[2];
  if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) return nullptr;
  d.read_fd = p[0];
  d.write_fd = p[1];
  ++d.generation;
  return std::make_unique<FakeVerbsDevice>(this, name, d.generation, p[0]);
}

class FakeVerbsDevices : public VerbsDevices {
 public:
  explicit FakeVerbsDevices(FakeVerbsHub* hub) : hub_(hub) {}
  std::vector<std::string> List() override { return hub_->List(); }
  std::unique_ptr<VerbsDevice> Open(const std::string& name) override { return hub_->Open(name); }

 private:
  FakeVerbsHub* hub_;
};

// The fake reproduces what the agent saw: after Remove() the old fd polls POLLERR, immediately.
TEST(VerbsRemovalTest, FakeRemovedFdPollsErrorLikeTheKernel) {
  FakeVerbsHub hub;
  hub.Add("rocep1s0f0", 1, LinkState::kUp);
  auto dev = hub.Open("rocep1s0f0");
  ASSERT_NE(dev, nullptr);
  hub.Remove("rocep1s0f0");
  pollfd p{dev->fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 0), 1);
  EXPECT_TRUE(p.revents & POLLERR);
  VerbsAsyncEvent ev;
  EXPECT_EQ(dev->Read(&ev), VerbsDevice::ReadResult::kGone);
}

TEST(VerbsRemovalTest, WatcherClosesAFailedDeviceAndReportsItsPortsDown) {
  FakeVerbsHub hub;
  hub.Add("ibp0s12f4", 2, LinkState::kUp);
  auto w = VerbsPortWatcher::Open(std::make_unique<FakeVerbsDevices>(&hub));
  ASSERT_EQ(w->devices(), 1u);
  hub.Remove("ibp0s12f4");
  std::vector<LinkEvent> out;
  const absl::Time t = absl::FromUnixSeconds(100);
  w->Drain(t, out);  // the read fails (EIO): closed without any poll
  EXPECT_EQ(w->devices(), 0u);
  EXPECT_TRUE(w->fds().empty());
  EXPECT_EQ(hub.open_count(), 0);
  ASSERT_EQ(out.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out[i].source, "verbs");
    EXPECT_EQ(out[i].device, "ibp0s12f4");
    EXPECT_EQ(out[i].port, std::to_string(i + 1));
    EXPECT_EQ(out[i].to, LinkState::kDown);
    EXPECT_EQ(out[i].time, t);
    EXPECT_TRUE(absl::StrContains(out[i].detail, "removed")) << out[i].detail;
  }
  EXPECT_EQ(w->removals(), 1u);
  // Not back yet: a rescan opens nothing.
  out.clear();
  w->Rescan(t, out);
  EXPECT_EQ(w->devices(), 0u);
  EXPECT_TRUE(out.empty());
}

TEST(VerbsRemovalTest, ReaderDoesNotSpinOnAPollerrFd) {
  FakeVerbsHub hub;
  hub.Add("rocep1s0f0", 1, LinkState::kUp);
  hub.Add("rocep1s0f1", 1, LinkState::kUp);
  daemon::LinkEventLog log;
  daemon::LinkEventReader::Options options;
  options.verbs_rescan = absl::Hours(1);  // no rediscovery in this test
  daemon::LinkEventReader reader(&log, nullptr,
                                 VerbsPortWatcher::Open(std::make_unique<FakeVerbsDevices>(&hub)),
                                 options);
  reader.Start();
  hub.Send("rocep1s0f0", IBV_EVENT_PORT_ERR, 1);
  ASSERT_TRUE(Eventually([&] { return log.last_seq() == 1; }));

  hub.Remove("rocep1s0f0");
  ASSERT_TRUE(Eventually([&] { return reader.verbs_removals() == 1; }));
  ASSERT_TRUE(Eventually([&] { return log.last_seq() == 2; }));
  auto removed = log.Since(1);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].event.device, "rocep1s0f0");
  EXPECT_EQ(removed[0].event.port, "1");
  EXPECT_EQ(removed[0].event.to, LinkState::kDown);
  EXPECT_EQ(hub.open_count(), 1);  // the other device is still watched

  // With the failed fd closed the thread blocks again: over 400 ms, at most a few polls (the idle
  // timeout is 1 s). Polling the POLLERR fd instead returns at once, every time: many thousands.
  const uint64_t before = reader.polls();
  absl::SleepFor(absl::Milliseconds(400));
  EXPECT_LE(reader.polls() - before, 3u);

  // The surviving device still delivers.
  hub.Send("rocep1s0f1", IBV_EVENT_PORT_ACTIVE, 1);
  ASSERT_TRUE(Eventually([&] { return log.last_seq() == 3; }));
  EXPECT_EQ(log.Since(2)[0].event.device, "rocep1s0f1");
}

TEST(VerbsRemovalTest, DeviceThatComesBackIsReopenedAndWatched) {
  FakeVerbsHub hub;
  hub.Add("mlx5_0", 1, LinkState::kUp);
  daemon::LinkEventLog log;
  daemon::LinkEventReader::Options options;
  options.verbs_rescan = absl::Milliseconds(50);
  daemon::LinkEventReader reader(&log, nullptr,
                                 VerbsPortWatcher::Open(std::make_unique<FakeVerbsDevices>(&hub)),
                                 options);
  reader.Start();
  hub.Remove("mlx5_0");
  ASSERT_TRUE(Eventually([&] { return reader.verbs_removals() == 1; }));
  ASSERT_TRUE(Eventually([&] { return hub.open_count() == 0; }));
  // Firmware reset over: the device is listed again, its port active.
  hub.Add("mlx5_0", 1, LinkState::kUp);
  ASSERT_TRUE(Eventually([&] { return reader.verbs_reopens() == 1; }));
  EXPECT_EQ(hub.opens("mlx5_0"), 2);
  ASSERT_TRUE(Eventually([&] { return log.last_seq() == 2; }));
  auto back = log.Since(1);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].event.from, LinkState::kDown);
  EXPECT_EQ(back[0].event.to, LinkState::kUp);
  EXPECT_EQ(back[0].event.port, "1");
  // Events from the new handle arrive.
  hub.Send("mlx5_0", IBV_EVENT_PORT_ERR, 1);
  ASSERT_TRUE(Eventually([&] { return log.last_seq() == 3; }));
  EXPECT_EQ(log.Since(2)[0].event.detail, "IBV_EVENT_PORT_ERR");
}

}  // namespace
}  // namespace ringside::collectors
