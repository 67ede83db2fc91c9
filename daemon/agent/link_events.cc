#include "daemon/agent/link_events.h"

#include <poll.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/time/clock.h"

namespace ringside::daemon {

void LinkEventLog::Append(std::vector<collectors::LinkEvent> events) {
  if (events.empty()) return;
  {
    absl::MutexLock lock(&mu_);
    for (collectors::LinkEvent& e : events) {
      ++counts_[Key{e.source, e.device, e.port, e.to}];
      ring_.push_back(Entry{++seq_, std::move(e)});
      if (ring_.size() > capacity_) {
        ring_.pop_front();
        ++evicted_;
      }
    }
  }
  absl::MutexLock lock(&listeners_mu_);
  for (const auto& [id, listener] : listeners_) listener();
}

uint64_t LinkEventLog::AddListener(std::function<void()> listener) const {
  absl::MutexLock lock(&listeners_mu_);
  const uint64_t id = next_listener_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void LinkEventLog::RemoveListener(uint64_t id) const {
  absl::MutexLock lock(&listeners_mu_);
  listeners_.erase(id);
}

std::vector<LinkEventLog::Entry> LinkEventLog::Since(uint64_t after) const {
  absl::MutexLock lock(&mu_);
  std::vector<Entry> out;
  for (const Entry& e : ring_) {
    if (e.seq > after) out.push_back(e);
  }
  return out;
}

std::vector<LinkEventLog::Count> LinkEventLog::Counts() const {
  absl::MutexLock lock(&mu_);
  std::vector<Count> out;
  for (const auto& [key, n] : counts_) {
    out.push_back(Count{std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key), n});
  }
  return out;
}

uint64_t LinkEventLog::evicted() const {
  absl::MutexLock lock(&mu_);
  return evicted_;
}

uint64_t LinkEventLog::last_seq() const {
  absl::MutexLock lock(&mu_);
  return seq_;
}

LinkEventReader::LinkEventReader(LinkEventLog* log,
                                 std::unique_ptr<collectors::NetlinkLinkWatcher> netlink,
                                 std::unique_ptr<collectors::VerbsPortWatcher> verbs,
                                 Options options)
    : log_(log),
      options_(options),
      clock_(options_.clock ? options_.clock : std::make_shared<ForwardClock>()),
      netlink_(std::move(netlink)),
      verbs_(std::move(verbs)) {
  if (::pipe2(stop_pipe_, O_CLOEXEC) != 0) stop_pipe_[0] = stop_pipe_[1] = -1;
  has_netlink_ = netlink_ != nullptr;
  has_verbs_ = verbs_ != nullptr;
  if (netlink_) {
    nl_rcvbuf_ = netlink_->receive_buffer_bytes();
    nl_rcvbuf_wanted_ = netlink_->receive_buffer_wanted();
  }
}

LinkEventReader::~LinkEventReader() {
  if (stop_pipe_[1] >= 0) (void)!::write(stop_pipe_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  for (int fd : stop_pipe_) {
    if (fd >= 0) ::close(fd);
  }
}

void LinkEventReader::WatchPortStates(std::unique_ptr<collectors::PortStateWatcher> watcher,
                                      absl::Duration period,
                                      std::function<void()> on_counters_moved) {
  port_states_ = std::move(watcher);
  on_counters_moved_ = std::move(on_counters_moved);
  port_state_period_ = std::max(period, absl::Milliseconds(1));
}

void LinkEventReader::Start() { thread_ = std::thread([this] { Loop(); }); }

void LinkEventReader::Loop() {
  constexpr short kFailed = POLLERR | POLLHUP | POLLNVAL;
  // Schedules on the monotonic clock; events stamped by clock_ (never going back).
  absl::Time next_rescan = SteadyNow() + options_.verbs_rescan;
  absl::Time next_port_states = absl::InfinitePast();  // the first poll sets the ports' states
  std::vector<pollfd> fds;
  for (;;) {
    // Rebuilt every pass: the verbs watcher drops devices that fail and adds ones that come back.
    fds.clear();
    fds.push_back(pollfd{stop_pipe_[0], POLLIN, 0});
    if (netlink_) fds.push_back(pollfd{netlink_->fd(), POLLIN, 0});
    const size_t first_verbs = fds.size();
    if (verbs_) {
      for (int fd : verbs_->fds()) fds.push_back(pollfd{fd, POLLIN, 0});
    }
    int timeout_ms = 1000;
    if (verbs_) {
      const int64_t until = absl::ToInt64Milliseconds(next_rescan - SteadyNow());
      timeout_ms = static_cast<int>(std::clamp<int64_t>(until, 0, timeout_ms));
    }
    if (netlink_ && netlink_->resync_owed()) timeout_ms = std::min(timeout_ms, 200);
    if (port_states_) {
      // Rounded up, so the poll never returns a millisecond early and spins.
      const absl::Duration until = next_port_states - SteadyNow();
      const int64_t ms = until <= absl::ZeroDuration()
                             ? 0
                             : absl::ToInt64Milliseconds(until + absl::Milliseconds(1) -
                                                         absl::Nanoseconds(1));
      timeout_ms = static_cast<int>(std::min<int64_t>(timeout_ms, ms));
    }
    polls_.fetch_add(1, std::memory_order_relaxed);
    const int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;  // stop
    const absl::Time steady = SteadyNow();
    const absl::Time received = clock_->Now();
    std::vector<collectors::LinkEvent> events;
    if (n > 0) {
      if (netlink_) netlink_->Drain(received, events);
      if (verbs_) {
        // A disassociated device's async fd polls POLLERR forever (and read() gives EIO): close
        // it, or this loop never blocks again.
        for (size_t i = first_verbs; i < fds.size(); ++i) {
          if (fds[i].revents & kFailed) verbs_->Lost(fds[i].fd, received, events);
        }
        verbs_->Drain(received, events);
      }
    }
    if (netlink_) {
      netlink_->Tick(received);  // a refused resync dump, asked again
      nl_overflows_.store(netlink_->overflows(), std::memory_order_relaxed);
      nl_dump_errors_.store(netlink_->dump_errors(), std::memory_order_relaxed);
      nl_vanished_.store(netlink_->vanished(), std::memory_order_relaxed);
    }
    if (verbs_ && steady >= next_rescan) {
      verbs_->Rescan(received, events);
      next_rescan = steady + options_.verbs_rescan;
    }
    if (port_states_ && steady >= next_port_states) {
      port_states_->Poll(received, events);
      if (port_states_->TakeCountersMoved() && on_counters_moved_) on_counters_moved_();
      // On a fixed schedule; after a stall, from now (no burst of polls to catch up).
      next_port_states += port_state_period_;
      if (next_port_states <= steady) next_port_states = steady + port_state_period_;
      ps_ports_.store(port_states_->ports(), std::memory_order_relaxed);
      ps_failures_.store(port_states_->read_failures(), std::memory_order_relaxed);
    }
    if (verbs_) {
      verbs_removals_.store(verbs_->removals(), std::memory_order_relaxed);
      verbs_reopens_.store(verbs_->reopens(), std::memory_order_relaxed);
    }
    if (!events.empty()) log_->Append(std::move(events));
  }
}

}  // namespace ringside::daemon
