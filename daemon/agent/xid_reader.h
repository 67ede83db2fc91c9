// The thread that waits for NVML XID events (collectors/nvml/xid_events.h) and puts each into the
// agent's link-event log at once, as netlink and verbs events are, so the uploader streams it to
// the aggregator without waiting for a sampling cycle.
#ifndef RINGSIDE_DAEMON_AGENT_XID_READER_H_
#define RINGSIDE_DAEMON_AGENT_XID_READER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "collectors/nvml/xid_events.h"
#include "daemon/agent/link_events.h"

namespace ringside::daemon {

struct XidReaderOptions {
  // One nvmlEventSetWait_v2 call waits this long at most: also how long stopping may take.
  absl::Duration wait = absl::Milliseconds(500);
  // After a failed wait (a GPU fell off the bus), the pause before the next one.
  absl::Duration error_pause = absl::Seconds(1);
  // Stamps the events (the sample times' clock, as LinkEventReader's); null: absl::Now.
  std::function<absl::Time()> clock;
  std::function<void(const std::string&)> log;
};

class XidReader {
 public:
  // `events` and `log` outlive the reader. Starts the thread.
  XidReader(collectors::XidEvents* events, LinkEventLog* log, XidReaderOptions options);
  ~XidReader();  // stops and joins the thread
  XidReader(const XidReader&) = delete;
  XidReader& operator=(const XidReader&) = delete;

  uint64_t xids() const { return xids_.load(std::memory_order_relaxed); }
  uint64_t wait_errors() const { return wait_errors_.load(std::memory_order_relaxed); }

 private:
  void Loop();

  collectors::XidEvents* events_;
  LinkEventLog* log_;
  const XidReaderOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> xids_{0};
  std::atomic<uint64_t> wait_errors_{0};
  std::thread thread_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_XID_READER_H_
