// A server-streaming call on gRPC's completion-queue API, shaped like the callback API's
// ServerWriteReactor: StartWrite and Finish, with OnWriteDone, OnCancel and OnDone
// (async_stream_call.h has the rules they keep). The call is requested with context(), request()
// and stream(), and arrival() as the tag; OnArrived(ok) comes when it has (ok false: it never
// will, the server is shutting down; no other reaction comes then, and OnArrived may free this).
#ifndef RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_WRITER_H_
#define RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_WRITER_H_

#include "daemon/aggregator/serving/async_op.h"
#include "daemon/aggregator/serving/async_stream_call.h"
#include "grpcpp/support/async_stream.h"

namespace ringside::daemon {

template <class Req, class Resp>
class AsyncWriter : public AsyncStreamCall<grpc::ServerAsyncWriter<Resp>, Resp> {
 public:
  // The arrival is held from the start: OnDone cannot come before the call has arrived.
  explicit AsyncWriter(LiveCalls* live)
      : AsyncStreamCall<grpc::ServerAsyncWriter<Resp>, Resp>(live, 1) {}

  Req* request() { return &request_; }
  AsyncOp* arrival() { return &arrival_op_; }

  virtual void OnArrived(bool ok) = 0;

 private:
  void Arrived(bool ok) {
    if (!ok) {
      OnArrived(false);  // may free this
      return;
    }
    OnArrived(true);
    this->Settle();
  }

  Req request_;
  MemberOp<AsyncWriter, &AsyncWriter::Arrived> arrival_op_{this};
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_WRITER_H_
