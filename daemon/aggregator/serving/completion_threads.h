// The threads of the aggregator's gRPC server: one per completion queue, each waiting on its
// queue and completing the AsyncOp tags it returns. The thread that waits is also the one that
// reads the sockets (gRPC's epoll poller), so with one thread every message is read, parsed and
// applied on it with no hand-off between threads; with several, gRPC hands the poller role from
// thread to thread on every event (docs/aggregator.md, "The gRPC server's threads").
//
// Stop() after the server's Shutdown: waits until no call object is alive (LiveCalls: they end
// once the server has cancelled their calls), then shuts the queues down and joins the threads.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_SERVING_COMPLETION_THREADS_H_
#define RINGSIDE_DAEMON_AGGREGATOR_SERVING_COMPLETION_THREADS_H_

#include <memory>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "daemon/aggregator/serving/async_op.h"
#include "grpcpp/completion_queue.h"

namespace ringside::daemon {

class CompletionThreads {
 public:
  explicit CompletionThreads(std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues);
  ~CompletionThreads();  // Stop()
  CompletionThreads(const CompletionThreads&) = delete;
  CompletionThreads& operator=(const CompletionThreads&) = delete;

  const std::vector<grpc::ServerCompletionQueue*>& queues() const { return raw_; }
  LiveCalls* live() { return &live_; }

  // Starts one thread a queue (after the services have requested their first calls).
  void Start();
  // Returns false when call objects were still alive after `grace` (the queues are shut down
  // anyway; a call that then starts an operation would abort the process, so this is a bug).
  bool Stop(absl::Duration grace = absl::Seconds(10));

 private:
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<grpc::ServerCompletionQueue*> raw_;
  std::vector<std::thread> threads_;
  LiveCalls live_;
  bool stopped_ = false;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_SERVING_COMPLETION_THREADS_H_
