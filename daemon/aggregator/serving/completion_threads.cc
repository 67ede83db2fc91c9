#include "daemon/aggregator/serving/completion_threads.h"

#include <pthread.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringside::daemon {

CompletionThreads::CompletionThreads(
    std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues)
    : queues_(std::move(queues)) {
  for (const auto& q : queues_) raw_.push_back(q.get());
}

CompletionThreads::~CompletionThreads() { Stop(); }

void CompletionThreads::Start() {
  for (grpc::ServerCompletionQueue* q : raw_) {
    threads_.emplace_back([q, n = threads_.size()] {
      // "rs-grpc-0", ...: what `top -H` shows when the shard's ingest is flat out.
      pthread_setname_np(pthread_self(), absl::StrCat("rs-grpc-", n).substr(0, 15).c_str());
      void* tag = nullptr;
      bool ok = false;
      while (q->Next(&tag, &ok)) static_cast<AsyncOp*>(tag)->Complete(ok);
    });
  }
}

bool CompletionThreads::Stop(absl::Duration grace) {
  if (stopped_) return true;
  stopped_ = true;
  bool drained = true;
  if (!threads_.empty()) {
    const absl::Time deadline = absl::Now() + grace;
    while (live_.count() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    drained = live_.count() == 0;
  }
  for (grpc::ServerCompletionQueue* q : raw_) q->Shutdown();
  if (threads_.empty()) {  // never started: drain here (the queues must be empty to be destroyed)
    for (grpc::ServerCompletionQueue* q : raw_) {
      void* tag = nullptr;
      bool ok = false;
      while (q->Next(&tag, &ok)) static_cast<AsyncOp*>(tag)->Complete(ok);
    }
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  return drained;
}

}  // namespace ringside::daemon
