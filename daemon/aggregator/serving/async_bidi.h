// A bidirectional raw (ByteBuffer) stream on gRPC's completion-queue API, shaped like the
// callback API's ServerBidiReactor: StartRead, StartWrite and Finish, with OnReadDone,
// OnWriteDone, OnCancel and OnDone as reactions, run on the thread that drains the call's
// completion queue.
//
// As with the reactor: one read and one write in flight at a time; Finish may come while a write
// is in flight (it is sent once the write completes) and ends the call; OnCancel comes when the
// call is over because it was cancelled (the client went away), before OnDone; OnDone comes once,
// after the call is over and every operation has completed, and nothing of this object is
// touched after it (the reaction may free it). The call is requested with context() and stream();
// if that request fails (the server is shutting down) no reaction comes.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_BIDI_H_
#define RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_BIDI_H_

#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/aggregator/serving/async_op.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/async_stream.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"

namespace ringside::daemon {

class AsyncBidi {
 public:
  explicit AsyncBidi(LiveCalls* live) : live_(live), stream_(&context_) {
    context_.AsyncNotifyWhenDone(&done_op_);
  }
  virtual ~AsyncBidi() = default;
  AsyncBidi(const AsyncBidi&) = delete;
  AsyncBidi& operator=(const AsyncBidi&) = delete;

  grpc::ServerContext* context() { return &context_; }
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream() { return &stream_; }

  void StartRead(grpc::ByteBuffer* buf) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    ++in_flight_;
    stream_.Read(buf, &read_op_);
  }

  void StartWrite(const grpc::ByteBuffer* buf) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    ++in_flight_;
    writing_ = true;
    stream_.Write(*buf, &write_op_);
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

  virtual void OnReadDone(bool ok) = 0;
  virtual void OnWriteDone(bool ok) = 0;
  virtual void OnCancel() = 0;
  virtual void OnDone() = 0;

 private:
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++in_flight_;
    stream_.Finish(status, &finish_op_);
  }

  void ReadDone(bool ok) {
    OnReadDone(ok);
    Settle();
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

  // The call is over: finished, or cancelled (then the reads and writes in flight complete
  // unsuccessfully). IsCancelled may be asked from here on.
  void CallDone(bool) {
    if (context_.IsCancelled()) OnCancel();
    Settle();
  }

  // An operation has completed and its reaction has run: OnDone if it was the last one.
  void Settle() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock l(&mu_);
      if (--in_flight_ > 0) return;
    }
    OnDone();  // may free this
  }

  LiveCall live_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_;
  MemberOp<AsyncBidi, &AsyncBidi::ReadDone> read_op_{this};
  MemberOp<AsyncBidi, &AsyncBidi::WriteDone> write_op_{this};
  MemberOp<AsyncBidi, &AsyncBidi::FinishDone> finish_op_{this};
  MemberOp<AsyncBidi, &AsyncBidi::CallDone> done_op_{this};

  absl::Mutex mu_;
  // Operations issued and not yet settled. The call's done notification is one from the start,
  // so OnDone cannot come before the call is over.
  int in_flight_ ABSL_GUARDED_BY(mu_) = 1;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> pending_finish_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_BIDI_H_
