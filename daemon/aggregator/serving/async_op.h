// The aggregator's gRPC server runs on gRPC's completion-queue API (docs/aggregator.md, "The gRPC
// server's threads"): every tag put on its completion queues is an AsyncOp, which the thread that
// drains the queue completes. LiveCalls counts the call objects that may still start an operation,
// so that the queues are shut down only once none can (an operation started on a shut-down queue
// aborts the process).
#ifndef RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_OP_H_
#define RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_OP_H_

#include <atomic>
#include <cstdint>

namespace ringside::daemon {

// A completion queue's tag: what to do when the operation completes.
class AsyncOp {
 public:
  virtual void Complete(bool ok) = 0;

 protected:
  ~AsyncOp() = default;
};

// An AsyncOp that calls a member function of its owner.
template <class Owner, void (Owner::*kHandle)(bool)>
class MemberOp final : public AsyncOp {
 public:
  explicit MemberOp(Owner* owner) : owner_(owner) {}
  void Complete(bool ok) override { (owner_->*kHandle)(ok); }

 private:
  Owner* const owner_;
};

// Call objects alive (requested, in progress, or finishing). A call object holds a LiveCall for
// its whole life.
class LiveCalls {
 public:
  int64_t count() const { return n_.load(std::memory_order_acquire); }

 private:
  friend class LiveCall;
  std::atomic<int64_t> n_{0};
};

class LiveCall {
 public:
  explicit LiveCall(LiveCalls* calls) : calls_(calls) {
    if (calls_ != nullptr) calls_->n_.fetch_add(1, std::memory_order_relaxed);
  }
  ~LiveCall() {
    if (calls_ != nullptr) calls_->n_.fetch_sub(1, std::memory_order_release);
  }
  LiveCall(const LiveCall&) = delete;
  LiveCall& operator=(const LiveCall&) = delete;

 private:
  LiveCalls* const calls_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_OP_H_
