// One thread that runs what it is given, in order: the Query API's handlers, which read the
// analysis and may take long at thousands of nodes, run here rather than on the thread that polls
// every agent's socket. Stop() runs what is queued, then joins.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_SERVING_WORK_QUEUE_H_
#define RINGSIDE_DAEMON_AGGREGATOR_SERVING_WORK_QUEUE_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringside::daemon {

class WorkQueue {
 public:
  WorkQueue();
  ~WorkQueue();  // Stop()
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Push(std::function<void()> work) ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_SERVING_WORK_QUEUE_H_
