// A server-streaming call on gRPC's completion-queue API, shaped like the callback API's
// ServerWriteReactor: StartWrite and Finish, with OnWriteDone, OnCancel and OnDone, run on the
// thread that drains the call's completion queue. The call is requested with context(), request()
// and writer(), and arrival() as the tag; OnArrived(ok) comes when it has (ok false: it never will,
// the server is shutting down; no other reaction comes then).
//
// As with the reactor: one write in flight at a time; Finish may come while a write is in flight
// (it is sent once the write completes); OnCancel comes when the call is over because it was
// cancelled, before OnDone; OnDone comes once, after the call is over and every operation has
// completed, and nothing of this object is touched after it (the reaction may free it).
#ifndef RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_WRITER_H_
#define RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_WRITER_H_

#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/aggregator/serving/async_op.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/async_stream.h"
#include "grpcpp/support/status.h"

namespace ringside::daemon {

template <class Req, class Resp>
class AsyncWriter {
 public:
  explicit AsyncWriter(LiveCalls* live) : live_(live), writer_(&context_) {
    context_.AsyncNotifyWhenDone(&done_op_);
  }
  virtual ~AsyncWriter() = default;
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  grpc::ServerContext* context() { return &context_; }
  Req* request() { return &request_; }
  grpc::ServerAsyncWriter<Resp>* writer() { return &writer_; }
  AsyncOp* arrival() { return &arrival_op_; }

  void StartWrite(const Resp* msg) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    ++in_flight_;
    writing_ = true;
    writer_.Write(*msg, &write_op_);
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

  virtual void OnArrived(bool ok) = 0;
  virtual void OnWriteDone(bool ok) = 0;
  virtual void OnCancel() = 0;
  virtual void OnDone() = 0;

 private:
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++in_flight_;
    writer_.Finish(status, &finish_op_);
  }

  void Arrived(bool ok) {
    if (!ok) {
      OnArrived(false);  // may free this
      return;
    }
    OnArrived(true);
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

  void CallDone(bool) {
    if (context_.IsCancelled()) OnCancel();
    Settle();
  }

  void Settle() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock l(&mu_);
      if (--in_flight_ > 0) return;
    }
    OnDone();  // may free this
  }

  LiveCall live_;
  grpc::ServerContext context_;
  Req request_;
  grpc::ServerAsyncWriter<Resp> writer_;
  MemberOp<AsyncWriter, &AsyncWriter::Arrived> arrival_op_{this};
  MemberOp<AsyncWriter, &AsyncWriter::WriteDone> write_op_{this};
  MemberOp<AsyncWriter, &AsyncWriter::FinishDone> finish_op_{this};
  MemberOp<AsyncWriter, &AsyncWriter::CallDone> done_op_{this};

  absl::Mutex mu_;
  // Operations issued and not yet settled: the arrival's reaction and the call's done
  // notification from the start, so OnDone cannot come before the call has arrived and is over.
  int in_flight_ ABSL_GUARDED_BY(mu_) = 2;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> pending_finish_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_WRITER_H_
