// ringside.v1 Ingest.Stream on the aggregator's completion-queue server (serving/): one session
// per stream, whose reactions (AsyncBidi) never block. The session protocol (docs/aggregator.md):
//
//   - A message that does not parse as an AgentMessage: INVALID_ARGUMENT.
//   - The first message must be a Hello (else INVALID_ARGUMENT). Protocol version ranges that do
//     not overlap: FAILED_PRECONDITION naming both. With mTLS, the Hello's node must match the
//     client certificate (else PERMISSION_DENIED). A Hello past --max-nodes: RESOURCE_EXHAUSTED.
//     No Hello within hello_timeout: DEADLINE_EXCEEDED.
//   - The answer is a HelloAck with the acked seq of (node, agent_epoch); then Acks.
//   - A second session of the same node replaces the first: the newer wins, the older ends with
//     ABORTED ("replaced by a newer session").
//   - Acks carry the highest seq taken in whose payloads are all durable; one write in flight at a
//     time, so acks coalesce under load: an Ack is sent after each message (or journal commit)
//     that moves the watermark, unless a write is in flight, in which case its completion sends
//     the latest.
//
// A session's SeriesDefs after its Hello (a node's definitions, the one heavy message: 1,500 of
// them) is taken in on the service's admission threads, not in the reaction: the server's
// threads are also the ones that read every socket, so with thousands of nodes admitting at once
// (a cluster reconnecting) work queued on them held back every connection's HTTP/2 frames, the
// agents' keepalive pings among them, past the agents' keepalive timeout. The session reads its
// next message once the definitions are in.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_INGEST_INGEST_SERVICE_H_
#define RINGSIDE_DAEMON_AGGREGATOR_INGEST_INGEST_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/aggregator/ingest/definition_catalog.h"
#include "daemon/aggregator/ingest/ingest_core.h"
#include "daemon/aggregator/ingest/ingest_stats.h"
#include "daemon/aggregator/serving/async_grpc_service.h"
#include "daemon/common/grpc_roles.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/support/byte_buffer.h"
#include "ringside/v1/ingest.grpc.pb.h"

namespace ringside::daemon {

struct IngestServiceOptions {
  absl::Duration hello_timeout = absl::Seconds(10);
  size_t max_sessions = 20064;  // open streams, with or without a Hello
  std::string aggregator_version;
  bool check_peer_node = true;  // PeerMayClaimNode (a no-op on plaintext)
  // Who may ingest (grpc_roles.h): an agent certificate, never a reader's or a token. Null: any.
  std::shared_ptr<RoleAuthorizer> roles;
  std::function<absl::Time()> now = absl::Now;  // for the Hello timeout
  // A message over this ends the stream with RESOURCE_EXHAUSTED and is counted
  // (limit_rejections{max_message_bytes}); 0: none. gRPC's own limit should be above it (it cuts
  // a stream off without telling the service why).
  size_t max_message_bytes = 0;
  // Threads that admit definitions (see above); 0: one per four cores, at least one.
  int admission_threads = 0;
  // Definition sets held for Hellos that name them (definitions by reference); max_sets 0: off.
  DefinitionCatalogOptions definition_sets;
};

class IngestSession;

// The raw (ByteBuffer) flavour of the method, so that a message that does not parse is told
// apart from the agent closing its side: it ends the stream with INVALID_ARGUMENT instead of the
// read silently failing.
class IngestService final : public v1::Ingest::WithRawMethod_Stream<v1::Ingest::Service>,
                            public AsyncGrpcService {
 public:
  IngestService(IngestCore* core, IngestStats* stats, IngestServiceOptions options);
  ~IngestService() override;

  // AsyncGrpcService
  grpc::Service* grpc_service() override { return this; }
  void Arm(grpc::ServerCompletionQueue* cq, LiveCalls* live) override ABSL_LOCKS_EXCLUDED(mu_);

  // Ends sessions that said no Hello within the timeout. Called by a housekeeping thread.
  void ExpireHellos(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Refuses new streams and ends every open one with UNAVAILABLE.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);
  size_t open_sessions() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class IngestSession;
  class CallRequest;

  // A new session is counted and kept, or refused (the status to end it with).
  std::optional<grpc::Status> Register(uint64_t id, std::shared_ptr<IngestSession> session)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Remove(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  // Sessions with a SeriesDefs to take in, and the threads that do it (in arrival order).
  class Admission {
   public:
    // `queued` (optional) follows the length of the queue.
    Admission(int threads, std::atomic<int64_t>* queued);
    ~Admission();
    int threads() const { return static_cast<int>(workers_.size()); }
    void Push(std::shared_ptr<IngestSession> session) ABSL_LOCKS_EXCLUDED(mu_);
    // Drops what is queued (those sessions are ending) and joins the threads.
    void Stop() ABSL_LOCKS_EXCLUDED(mu_);

   private:
    void Loop() ABSL_LOCKS_EXCLUDED(mu_);
    absl::Mutex mu_;
    std::deque<std::shared_ptr<IngestSession>> queue_ ABSL_GUARDED_BY(mu_);
    bool stop_ ABSL_GUARDED_BY(mu_) = false;
    std::atomic<int64_t>* queued_;
    std::vector<std::thread> workers_;
  };

  IngestCore* const core_;
  IngestStats* const stats_;
  const IngestServiceOptions options_;
  std::atomic<uint64_t> next_id_{1};

  mutable absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<uint64_t, std::weak_ptr<IngestSession>> sessions_ ABSL_GUARDED_BY(mu_);
  // Sessions that may still be waiting for their Hello: what ExpireHellos visits (the others
  // are dropped from here at its first visit after their Hello), so that a tick costs the streams
  // being opened, not all of them.
  absl::flat_hash_set<uint64_t> awaiting_hello_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<CallRequest>> requests_ ABSL_GUARDED_BY(mu_);  // one a queue
  DefinitionCatalog catalog_;
  Admission admission_;  // last: its threads stop before the rest goes
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_INGEST_INGEST_SERVICE_H_
