#include "collectors/nccl_plugin/sender.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "collectors/nccl_plugin/identity.h"
#include "collectors/nccl_plugin/plugin_state.h"

namespace ringside::collectors {

constinit Sender g_sender;

namespace {
// The batch being written (only the sender thread touches it).
alignas(64) uint8_t frame_[kMaxFrameSize];

// The version to try after an agent refused `version`: version 2 only carries the pod, so without
// one it is skipped.
uint16_t OlderVersion(uint16_t version) noexcept {
  if (version == kFormatVersion4) return kFormatVersion3;
  if (version == kFormatVersion3 && !g_shared.pod.empty()) return kFormatVersion2;
  return kFormatVersion1;
}

// The sender's identity in a header of `header.version`: the pod (2 on), the cgroup and the GPU
// table (4 on).
void FillIdentity(BatchHeaderFields& header) noexcept {
  if (header.version >= kFormatVersion2) {
    header.pod = g_shared.pod;
    header.pod_namespace = g_shared.pod_namespace;
  }
  if (header.version >= kFormatVersion4) {
    header.cgroup = g_shared.cgroup;
    for (size_t i = 0; i < kMaxGpuSlots; ++i) {
      header.gpus[i] = UnpackGpuSlot(g_shared.gpu_slots[i].load(std::memory_order_relaxed));
    }
  }
}
}  // namespace

bool Sender::SetSocketPath(const char* path) noexcept {
  const size_t len = path == nullptr ? 0 : ::strnlen(path, sizeof(path_));
  path_ok_ = len > 0 && len < sizeof(path_);
  std::memset(path_, 0, sizeof(path_));
  if (path_ok_) std::memcpy(path_, path, len);
  return path_ok_;
}

bool Sender::Start() noexcept {
  if (running_) return true;
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return false;
  stop_.store(false, std::memory_order_relaxed);
  flush_requested_.store(0, std::memory_order_relaxed);
  flush_done_.store(0, std::memory_order_relaxed);
  next_connect_ns_ = 0;
  backoff_ns_ = timings_.connect_backoff_min_ns;
  next_clock_check_ns_ = 0;

  // The thread takes no signals: the training process's handlers run on its own threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  const int rc = pthread_create(&thread_, &attr, &Sender::ThreadMain, this);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    ::close(wake_fd_);
    wake_fd_ = -1;
    return false;
  }
  running_ = true;
  return true;
}

void Sender::Stop() noexcept {
  if (!running_) return;
  stop_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  pthread_join(thread_, nullptr);
  running_ = false;
  ::close(wake_fd_);
  wake_fd_ = -1;
}

void Sender::Flush(int64_t timeout_ns) noexcept {
  if (!running_) return;
  const uint32_t ticket = flush_requested_.fetch_add(1, std::memory_order_acq_rel) + 1;
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  const int64_t deadline = MonotonicNanos() + timeout_ns;
  while (static_cast<int32_t>(flush_done_.load(std::memory_order_acquire) - ticket) < 0) {
    if (MonotonicNanos() >= deadline) return;
    struct timespec ts = {0, 1'000'000};
    ::nanosleep(&ts, nullptr);
  }
}

bool Sender::ForkChild() noexcept {
  const bool was_running = running_;
  running_ = false;
  if (fd_ >= 0) ::close(fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  fd_ = -1;
  wake_fd_ = -1;
  conn_version_ = 0;
  acked_ = false;
  unacked_ = 0;
  connected_.store(false, std::memory_order_relaxed);
  stop_.store(false, std::memory_order_relaxed);
  return was_running;
}

void* Sender::ThreadMain(void* self) noexcept {
  pthread_setname_np(pthread_self(), "ringside-nccl");
  static_cast<Sender*>(self)->Loop();
  return nullptr;
}

void Sender::Loop() noexcept {
  while (!stop_.load(std::memory_order_acquire)) {
    const int64_t now = MonotonicNanos();
    if (now >= next_clock_check_ns_) {
      g_shared.clock_synchronized.store(SystemClockSynchronized(), std::memory_order_relaxed);
      next_clock_check_ns_ = now + timings_.clock_check_interval_ns;
    }
    const uint32_t flush = flush_requested_.load(std::memory_order_acquire);
    const bool flushing = flush != flush_done_.load(std::memory_order_relaxed);
    if (fd_ < 0 && path_ok_ && (now >= next_connect_ns_ || flushing)) {
      if (Connect()) {
        backoff_ns_ = timings_.connect_backoff_min_ns;
      } else {
        next_connect_ns_ = now + backoff_ns_;
        backoff_ns_ = backoff_ns_ * 2 > timings_.connect_backoff_max_ns
                          ? timings_.connect_backoff_max_ns
                          : backoff_ns_ * 2;
      }
    }
    uint64_t sent = 0;
    if (fd_ >= 0 && !SendAvailable(&sent)) {
      ConnectionLost();
      next_connect_ns_ = MonotonicNanos() + backoff_ns_;
    }
    if (flushing) flush_done_.store(flush, std::memory_order_release);

    // Records keep coming: look again soon, so that a burst does not fill the ring.
    int64_t wait = sent > 0 ? timings_.busy_interval_ns : timings_.flush_interval_ns;
    if (fd_ < 0) {
      wait = next_connect_ns_ - MonotonicNanos();
      if (next_clock_check_ns_ - now < wait) wait = next_clock_check_ns_ - now;
      if (wait < 1'000'000) wait = 1'000'000;
    }
    Wait(wait);
  }
  Disconnect();
}

void Sender::Wait(int64_t timeout_ns) noexcept {
  struct pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {fd_, POLLIN, 0}};
  const int n = fd_ >= 0 ? 2 : 1;
  const int timeout_ms = static_cast<int>((timeout_ns + 999'999) / 1'000'000);
  if (::poll(fds, n, timeout_ms) <= 0) return;
  if (fds[0].revents & POLLIN) {
    uint64_t value;
    (void)!::read(wake_fd_, &value, sizeof(value));
  }
  if (n == 2 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
    // The agent writes only the acknowledgement of the connection's version; otherwise readable
    // means it closed the connection (or misbehaves).
    uint8_t scratch[256];
    const ssize_t r = ::recv(fd_, scratch, sizeof(scratch), MSG_DONTWAIT);
    if (r > 0 && conn_version_ >= kFormatVersion2 &&
        std::memchr(scratch, static_cast<uint8_t>(conn_version_), static_cast<size_t>(r)) !=
            nullptr) {
      acked_ = true;
      unacked_ = 0;
    }
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) ConnectionLost();
  }
}

bool Sender::Connect() noexcept {
  uint16_t version = max_version_;
  if (version == kFormatVersion2 && g_shared.pod.empty()) version = kFormatVersion1;
  if (!Open()) return false;
  conn_version_ = version;
  while (conn_version_ >= kFormatVersion2) {
    const HelloResult hello = Hello();
    if (hello == HelloResult::kAcked) {
      acked_ = true;
      break;
    }
    if (hello == HelloResult::kNoAnswer) break;  // a slow agent: records go out, counted as
                                                 // dropped if it refuses them later
    // An agent that does not speak this version: nothing but the hello was lost. The next older
    // version on a new connection, at once.
    version = OlderVersion(conn_version_);
    Disconnect();
    max_version_ = version;
    if (!Open()) return false;
    conn_version_ = version;
  }
  connected_.store(true, std::memory_order_release);
  return true;
}

bool Sender::Open() noexcept {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_, sizeof(addr.sun_path));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return false;
  }
  fd_ = fd;
  acked_ = false;
  unacked_ = 0;
  return true;
}

Sender::HelloResult Sender::Hello() noexcept {
  // A header of the connection's version (2, 3 or 4) with no records and no drops: the pod, and a
  // question.
  BatchHeaderFields header;
  header.version = conn_version_;
  header.job_id = g_shared.batch_job;
  FillIdentity(header);
  uint8_t hello[kMaxBatchHeaderSize];
  EncodeBatchHeader(header, hello);
  if (!WriteAll(hello, header.header_size())) return HelloResult::kRefused;
  const int64_t deadline = MonotonicNanos() + timings_.hello_timeout_ns;
  for (;;) {
    const int64_t left = deadline - MonotonicNanos();
    if (left <= 0 || stop_.load(std::memory_order_acquire)) return HelloResult::kNoAnswer;
    struct pollfd p = {fd_, POLLIN, 0};
    const int64_t slice = left < 50'000'000 ? left : 50'000'000;  // notice a stop request
    if (::poll(&p, 1, static_cast<int>(slice / 1'000'000) + 1) <= 0) continue;
    uint8_t scratch[64];
    const ssize_t r = ::recv(fd_, scratch, sizeof(scratch), MSG_DONTWAIT);
    if (r > 0 && std::memchr(scratch, static_cast<uint8_t>(conn_version_),
                             static_cast<size_t>(r)) != nullptr) {
      return HelloResult::kAcked;
    }
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) return HelloResult::kRefused;
  }
}

void Sender::ConnectionLost() noexcept {
  if (conn_version_ >= kFormatVersion2 && !acked_) {
    // Most likely an agent that does not speak this version and cut us off at the first header:
    // what it was sent is lost, and the next connection speaks an older version.
    max_version_ = OlderVersion(conn_version_);
    g_shared.dropped.fetch_add(unacked_, std::memory_order_acq_rel);
  } else if (conn_version_ != 0 && conn_version_ < kRecordFormatVersion) {
    max_version_ = kRecordFormatVersion;  // the agent went away: the next one may speak the newest
  }
  Disconnect();
}

void Sender::Disconnect() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  conn_version_ = 0;
  acked_ = false;
  unacked_ = 0;
  connected_.store(false, std::memory_order_release);
}

bool Sender::SendAvailable(uint64_t* sent) noexcept {
  const size_t header_size = BatchHeaderSize(conn_version_);
  for (;;) {
    uint32_t count = 0;
    while (count < kMaxRecordsPerBatch &&
           g_shared.ring.TryPop(frame_ + header_size + count * kRecordSize)) {
      ++count;
    }
    const uint64_t dropped = g_shared.dropped.exchange(0, std::memory_order_acq_rel);
    if (count == 0 && dropped == 0) return true;
    if (conn_version_ < kRecordFormatVersion) {
      // The ring holds records of the newest version: an older agent gets them as it knows them.
      for (uint32_t i = 0; i < count; ++i) {
        DowngradeRecord(frame_ + header_size + i * kRecordSize, conn_version_);
      }
    }
    BatchHeaderFields header;
    header.version = conn_version_;
    header.record_count = count;
    header.dropped = dropped;
    header.job_id = g_shared.batch_job;
    FillIdentity(header);
    EncodeBatchHeader(header, frame_);
    if (!WriteAll(frame_, header_size + count * kRecordSize)) {
      // Whatever part of it the agent got is a truncated frame it discards: all of it is lost.
      g_shared.dropped.fetch_add(count + dropped, std::memory_order_acq_rel);
      return false;
    }
    if (conn_version_ >= kFormatVersion2 && !acked_) unacked_ += count + dropped;
    *sent += count;
    if (count < kMaxRecordsPerBatch) return true;
  }
}

bool Sender::WriteAll(const uint8_t* data, size_t size) noexcept {
  const int64_t deadline = MonotonicNanos() + timings_.stall_timeout_ns;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::send(fd_, data + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    // The agent is slow: wait for room, but not past the deadline or a stop request.
    const int64_t left = deadline - MonotonicNanos();
    if (left <= 0 || stop_.load(std::memory_order_acquire)) return false;
    struct pollfd fds[2] = {{fd_, POLLOUT, 0}, {wake_fd_, POLLIN, 0}};
    const int r = ::poll(fds, 2, static_cast<int>(left / 1'000'000) + 1);
    if (r > 0 && (fds[0].revents & (POLLERR | POLLHUP))) return false;
    if (r > 0 && (fds[1].revents & POLLIN)) {
      uint64_t value;
      (void)!::read(wake_fd_, &value, sizeof(value));
    }
  }
  return true;
}

}  // namespace ringside::collectors
