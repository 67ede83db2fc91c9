// What a streaming call on gRPC's completion-queue API has in common, whether it also reads
// (AsyncBidi) or only writes (AsyncWriter): its context, the writes and the Finish, the call's
// done notification, and the count of operations in flight that decides when OnDone comes.
//
// As with the callback API's reactors: one write in flight at a time; Finish may come while a
// write is in flight (it is sent once the write completes); OnCancel comes when the call is over
// because it was cancelled, before OnDone; OnDone comes once, after the call is over and every
// operation has completed, and nothing of this object is touched after it (the reaction may free
// it). Reactions run on the thread that drains the call's completion queue.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_STREAM_CALL_H_
#define RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_STREAM_CALL_H_

#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/aggregator/serving/async_op.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace ringside::daemon {

// `Stream` is grpc::ServerAsyncReaderWriter<R, W> or grpc::ServerAsyncWriter<W>.
template <class Stream, class W>
class AsyncStreamCall {
 public:
  // `holds`: operations counted as in flight from the start besides the done notification (a
  // reaction the subclass settles itself).
  AsyncStreamCall(LiveCalls* live, int holds)
      : live_(live), stream_(&context_), in_flight_(1 + holds) {
    context_.AsyncNotifyWhenDone(&done_op_);
  }
  virtual ~AsyncStreamCall() = default;
  AsyncStreamCall(const AsyncStreamCall&) = delete;
  AsyncStreamCall& operator=(const AsyncStreamCall&) = delete;

  grpc::ServerContext* context() { return &context_; }
  Stream* stream() { return &stream_; }

  void StartWrite(const W* msg) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    ++in_flight_;
    writing_ = true;
    stream_.Write(*msg, &write_op_);
  }

  void Finish(const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    if (finish_called_) return;
    finish_called_ = true;
    if (writing_) {
      pending_finish_ = status;
      return;
    }
    FinishLocked(status);
  }

  virtual void OnWriteDone(bool ok) = 0;
  virtual void OnCancel() = 0;
  virtual void OnDone() = 0;

 protected:
  // An operation the subclass starts on stream() with a tag of its own: counted before it starts.
  void Begin() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    ++in_flight_;
  }
  // That operation has completed and its reaction has run: OnDone if it was the last one.
  void Settle() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock l(&mu_);
      if (--in_flight_ > 0) return;
    }
    OnDone();  // may free this
  }

 private:
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++in_flight_;
    stream_.Finish(status, &finish_op_);
  }

  void WriteDone(bool ok) {
    {
      absl::MutexLock l(&mu_);
      writing_ = false;
      if (pending_finish_) {
        FinishLocked(*pending_finish_);
        pending_finish_.reset();
      }
    }
    OnWriteDone(ok);
    Settle();
  }

  void FinishDone(bool) { Settle(); }

  // The call is over: finished, or cancelled (then the operations in flight complete
  // unsuccessfully). IsCancelled may be asked from here on.
  void CallDone(bool) {
    if (context_.IsCancelled()) OnCancel();
    Settle();
  }

  LiveCall live_;
  grpc::ServerContext context_;
  Stream stream_;
  MemberOp<AsyncStreamCall, &AsyncStreamCall::WriteDone> write_op_{this};
  MemberOp<AsyncStreamCall, &AsyncStreamCall::FinishDone> finish_op_{this};
  MemberOp<AsyncStreamCall, &AsyncStreamCall::CallDone> done_op_{this};

  absl::Mutex mu_;
  // Operations started and not yet settled. The call's done notification is one from the start,
  // so OnDone cannot come before the call is over.
  int in_flight_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> pending_finish_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_STREAM_CALL_H_
