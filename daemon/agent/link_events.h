// The agent's link-transition log: events from netlink and libibverbs, read by one thread that
// blocks on their descriptors (so each event is stamped as it arrives), kept in a bounded ring
// with sequence numbers for the uploader, and counted per link for /metrics.
//
// A verbs device whose async fd polls POLLERR/POLLHUP (disassociated: unplug, driver reload,
// firmware reset) is closed and its ports logged down, so the thread blocks again instead of
// spinning; the verbs watcher looks for new or returning devices every `verbs_rescan`.
#ifndef RINGSIDE_DAEMON_AGENT_LINK_EVENTS_H_
#define RINGSIDE_DAEMON_AGENT_LINK_EVENTS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectors/common/link_event.h"
#include "collectors/infiniband/port_state_watch.h"
#include "collectors/netlink/link_watcher.h"
#include "collectors/verbs/port_events.h"
#include "daemon/common/forward_clock.h"

namespace ringside::daemon {

class LinkEventLog {
 public:
  struct Entry {
    uint64_t seq;
    collectors::LinkEvent event;
  };
  // Transitions per link and direction since the agent started.
  struct Count {
    std::string source, device, port;
    collectors::LinkState to;
    uint64_t count;
  };

  explicit LinkEventLog(size_t capacity = 4096) : capacity_(capacity) {}

  void Append(std::vector<collectors::LinkEvent> events) ABSL_LOCKS_EXCLUDED(mu_);
  // Entries with seq > `after`, oldest first (what the ring still holds).
  std::vector<Entry> Since(uint64_t after) const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<Count> Counts() const ABSL_LOCKS_EXCLUDED(mu_);
  // Events pushed out of the ring before anyone read them past it.
  uint64_t evicted() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t last_seq() const ABSL_LOCKS_EXCLUDED(mu_);

  // Called (on the appending thread, after the events are in) whenever events are appended: an
  // uploader forwards them at once instead of at its next poll. A listener must only note it
  // and return. Returns an id for RemoveListener, which waits for a running call to end.
  uint64_t AddListener(std::function<void()> listener) const ABSL_LOCKS_EXCLUDED(listeners_mu_);
  void RemoveListener(uint64_t id) const ABSL_LOCKS_EXCLUDED(listeners_mu_);

 private:
  using Key = std::tuple<std::string, std::string, std::string, collectors::LinkState>;
  mutable absl::Mutex listeners_mu_;  // held while listeners run (after mu_ is released)
  mutable std::map<uint64_t, std::function<void()>> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  mutable uint64_t next_listener_ ABSL_GUARDED_BY(listeners_mu_) = 1;
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<Entry> ring_ ABSL_GUARDED_BY(mu_);
  std::map<Key, uint64_t> counts_ ABSL_GUARDED_BY(mu_);
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evicted_ ABSL_GUARDED_BY(mu_) = 0;
};

// Owns the event sources and the thread that waits on them (and, between waits, polls the port
// state attributes: collectors/infiniband/port_state_watch.h).
class LinkEventReader {
 public:
  struct Options {
    // How often the verbs watcher looks for RDMA devices that appeared or came back after a
    // removal (unplug, driver reload, firmware reset).
    absl::Duration verbs_rescan = absl::Seconds(10);
    // Stamps the events: the sample times' clock (Sampler::clock()), so that after a step back of
    // the wall clock an event is not older than the state sampled before it. Null: a ForwardClock
    // of the reader's own on absl::Now. The reader's own schedules are on SteadyNow().
    std::shared_ptr<ForwardClock> clock;
  };
  // Either source may be null (not available on this host).
  LinkEventReader(LinkEventLog* log, std::unique_ptr<collectors::NetlinkLinkWatcher> netlink,
                  std::unique_ptr<collectors::VerbsPortWatcher> verbs, Options options);
  LinkEventReader(LinkEventLog* log, std::unique_ptr<collectors::NetlinkLinkWatcher> netlink,
                  std::unique_ptr<collectors::VerbsPortWatcher> verbs)
      : LinkEventReader(log, std::move(netlink), std::move(verbs), Options()) {}
  ~LinkEventReader();  // stops and joins the thread
  // Also polls InfiniBand/RoCE port `state` attributes every `period` (before Start()), and
  // calls `on_counters_moved` (on this thread; it must only note it) after a poll that saw a
  // watched counter move.
  void WatchPortStates(std::unique_ptr<collectors::PortStateWatcher> watcher,
                       absl::Duration period, std::function<void()> on_counters_moved = {});
  void Start();

  // Netlink receive-queue overflows (ENOBUFS), resync dumps the kernel refused, interfaces
  // forgotten because a resync dump no longer listed them.
  uint64_t netlink_overflows() const { return nl_overflows_.load(std::memory_order_relaxed); }
  uint64_t netlink_dump_errors() const { return nl_dump_errors_.load(std::memory_order_relaxed); }
  uint64_t netlink_vanished() const { return nl_vanished_.load(std::memory_order_relaxed); }
  // The netlink receive buffer granted and asked for (0 without netlink); capped by rmem_max when
  // granted < wanted. Fixed at construction.
  int netlink_receive_buffer_bytes() const { return nl_rcvbuf_; }
  int netlink_receive_buffer_wanted() const { return nl_rcvbuf_wanted_; }
  bool has_netlink() const { return has_netlink_; }
  bool has_verbs() const { return has_verbs_; }
  // poll() calls the thread has made: a handful per second when idle, whatever the descriptors do.
  uint64_t polls() const { return polls_.load(std::memory_order_relaxed); }
  // RDMA devices closed after their async fd failed, and reopened when they came back.
  uint64_t verbs_removals() const { return verbs_removals_.load(std::memory_order_relaxed); }
  uint64_t verbs_reopens() const { return verbs_reopens_.load(std::memory_order_relaxed); }
  bool has_port_states() const { return port_states_ != nullptr; }
  // Ports whose state attribute is polled, and its reads that failed.
  uint64_t port_state_ports() const { return ps_ports_.load(std::memory_order_relaxed); }
  uint64_t port_state_read_failures() const {
    return ps_failures_.load(std::memory_order_relaxed);
  }

 private:
  void Loop();

  LinkEventLog* log_;
  const Options options_;
  const std::shared_ptr<ForwardClock> clock_;
  std::unique_ptr<collectors::NetlinkLinkWatcher> netlink_;
  std::unique_ptr<collectors::VerbsPortWatcher> verbs_;
  int stop_pipe_[2] = {-1, -1};
  std::thread thread_;
  std::atomic<uint64_t> polls_{0};
  std::atomic<uint64_t> nl_overflows_{0};
  std::atomic<uint64_t> nl_dump_errors_{0};
  std::atomic<uint64_t> nl_vanished_{0};
  int nl_rcvbuf_ = 0;
  int nl_rcvbuf_wanted_ = 0;
  bool has_netlink_ = false;
  bool has_verbs_ = false;
  std::atomic<uint64_t> verbs_removals_{0};
  std::atomic<uint64_t> verbs_reopens_{0};
  std::unique_ptr<collectors::PortStateWatcher> port_states_;
  absl::Duration port_state_period_ = absl::Milliseconds(100);
  std::function<void()> on_counters_moved_;
  std::atomic<uint64_t> ps_ports_{0};
  std::atomic<uint64_t> ps_failures_{0};
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_LINK_EVENTS_H_
