// A gRPC service on the aggregator's completion-queue server (completion_threads.h): registered
// with the server builder, then, once the server is built and before its threads start, asked to
// request its first calls on each of the server's queues.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_GRPC_SERVICE_H_
#define RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_GRPC_SERVICE_H_

#include "daemon/aggregator/serving/async_op.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/impl/service_type.h"

namespace ringside::daemon {

class AsyncGrpcService {
 public:
  virtual ~AsyncGrpcService() = default;
  // What to register with the grpc::ServerBuilder.
  virtual grpc::Service* grpc_service() = 0;
  // Requests one call of each method on `cq`; every call object holds a LiveCall on `live`.
  virtual void Arm(grpc::ServerCompletionQueue* cq, LiveCalls* live) = 0;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_SERVING_ASYNC_GRPC_SERVICE_H_
