#include "daemon/aggregator/serving/work_queue.h"

#include <pthread.h>

#include <utility>

namespace ringside::daemon {

WorkQueue::WorkQueue() : thread_([this] { Loop(); }) {}

WorkQueue::~WorkQueue() { Stop(); }

void WorkQueue::Push(std::function<void()> work) {
  absl::MutexLock l(&mu_);
  queue_.push_back(std::move(work));
}

void WorkQueue::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void WorkQueue::Loop() {
  pthread_setname_np(pthread_self(), "rs-query");
  for (;;) {
    std::function<void()> next;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(
          +[](WorkQueue* q)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) { return q->stop_ || !q->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // stopped, and all done
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    next();
  }
}

}  // namespace ringside::daemon
