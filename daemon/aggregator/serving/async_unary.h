// A unary method on gRPC's completion-queue API: one call requested on a queue at a time; when it
// arrives the next is requested, the handler runs on a WorkQueue (never on the polling thread),
// and its answer is sent from there. The handler is a plain function of the request:
//
//   AsyncUnary<Req, Resp>::Method m{
//       .request = [svc](auto* ctx, auto* req, auto* writer, auto* cq, void* tag) {
//         svc->RequestFoo(ctx, req, writer, cq, cq, tag);
//       },
//       .handle = [svc](const grpc::ServerContext& ctx, const Req& req, Resp* resp) { ... },
//       .work = &queue, .live = &live};
//   AsyncUnary<Req, Resp>::Arm(std::make_shared<const Method>(m), cq);
#ifndef RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_UNARY_H_
#define RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_UNARY_H_

#include <functional>
#include <memory>
#include <utility>

#include "daemon/aggregator/serving/async_op.h"
#include "daemon/aggregator/serving/work_queue.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/async_unary_call.h"
#include "grpcpp/support/status.h"

namespace ringside::daemon {

template <class Req, class Resp>
class AsyncUnary final : public AsyncOp {
 public:
  struct Method {
    std::function<void(grpc::ServerContext*, Req*, grpc::ServerAsyncResponseWriter<Resp>*,
                       grpc::ServerCompletionQueue*, void*)>
        request;
    std::function<grpc::Status(const grpc::ServerContext&, const Req&, Resp*)> handle;
    WorkQueue* work = nullptr;
    LiveCalls* live = nullptr;
  };

  // Requests one call of the method on `cq`.
  static void Arm(std::shared_ptr<const Method> method, grpc::ServerCompletionQueue* cq) {
    auto* call = new AsyncUnary(std::move(method), cq);
    call->method_->request(&call->context_, &call->request_, &call->writer_, cq, call);
  }

  void Complete(bool ok) override {
    if (arrived_ || !ok) {  // answered, or the server is shutting down
      delete this;
      return;
    }
    arrived_ = true;
    Arm(method_, cq_);
    method_->work->Push([this] {
      const grpc::Status status = method_->handle(context_, request_, &response_);
      if (status.ok()) {
        writer_.Finish(response_, status, this);
      } else {
        writer_.FinishWithError(status, this);
      }
    });
  }

 private:
  AsyncUnary(std::shared_ptr<const Method> method, grpc::ServerCompletionQueue* cq)
      : method_(std::move(method)), cq_(cq), live_(method_->live), writer_(&context_) {}

  const std::shared_ptr<const Method> method_;
  grpc::ServerCompletionQueue* const cq_;
  LiveCall live_;
  grpc::ServerContext context_;
  Req request_;
  Resp response_;
  grpc::ServerAsyncResponseWriter<Resp> writer_;
  bool arrived_ = false;  // on the queue's thread only
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_UNARY_H_
