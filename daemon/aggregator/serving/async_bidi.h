// A bidirectional raw (ByteBuffer) stream on gRPC's completion-queue API, shaped like the
// callback API's ServerBidiReactor: StartRead, StartWrite and Finish, with OnReadDone,
// OnWriteDone, OnCancel and OnDone as reactions (async_stream_call.h has the rules they keep). One
// read in flight at a time. The call is requested with context() and stream(); if that request
// fails (the server is shutting down) no reaction comes.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_BIDI_H_
#define RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_BIDI_H_

#include "daemon/aggregator/serving/async_op.h"
#include "daemon/aggregator/serving/async_stream_call.h"
#include "grpcpp/support/async_stream.h"
#include "grpcpp/support/byte_buffer.h"

namespace ringside::daemon {

class AsyncBidi
    : public AsyncStreamCall<grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>,
                             grpc::ByteBuffer> {
 public:
  explicit AsyncBidi(LiveCalls* live) : AsyncStreamCall(live, 0) {}

  void StartRead(grpc::ByteBuffer* buf) {
    Begin();
    stream()->Read(buf, &read_op_);
  }

  virtual void OnReadDone(bool ok) = 0;

 private:
  void ReadDone(bool ok) {
    OnReadDone(ok);
    Settle();
  }

  MemberOp<AsyncBidi, &AsyncBidi::ReadDone> read_op_{this};
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_BIDI_H_
