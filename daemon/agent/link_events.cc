#include "daemon/agent/link_events.h"

#include <poll.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/time/clock.h"

namespace ringside::daemon {

void LinkEventLog::Append(std::vector<collectors::LinkEvent> events) {
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
                                 std::unique_ptr<collectors::VerbsPortWatcher> verbs)
    : log_(log), netlink_(std::move(netlink)), verbs_(std::move(verbs)) {
  if (::pipe2(stop_pipe_, O_CLOEXEC) != 0) stop_pipe_[0] = stop_pipe_[1] = -1;
}

LinkEventReader::~LinkEventReader() {
  if (stop_pipe_[1] >= 0) (void)!::write(stop_pipe_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  for (int fd : stop_pipe_) {
    if (fd >= 0) ::close(fd);
  }
}

void LinkEventReader::Start() { thread_ = std::thread([this] { Loop(); }); }

uint64_t LinkEventReader::netlink_overflows() const {
  return netlink_ ? netlink_->overflows() : 0;
}

void LinkEventReader::Loop() {
  std::vector<pollfd> fds;
  fds.push_back(pollfd{stop_pipe_[0], POLLIN, 0});
  if (netlink_) fds.push_back(pollfd{netlink_->fd(), POLLIN, 0});
  if (verbs_) {
    for (int fd : verbs_->fds()) fds.push_back(pollfd{fd, POLLIN, 0});
  }
  for (;;) {
    for (pollfd& p : fds) p.revents = 0;
    int n = ::poll(fds.data(), fds.size(), 1000);
    if (n < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;  // stop
    if (n <= 0) continue;
    const absl::Time received = absl::Now();
    std::vector<collectors::LinkEvent> events;
    if (netlink_) netlink_->Drain(received, events);
    if (verbs_) verbs_->Drain(received, events);
    if (!events.empty()) log_->Append(std::move(events));
  }
}

}  // namespace ringside::daemon
