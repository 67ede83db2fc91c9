// Cross-shard cause attribution (issue #14, docs/scale.md): this aggregator watches every other
// shard's incidents through the Query API it already serves, so a straggler of a job hosted here
// can be blamed on a pause storm raised by the shard that hosts the node, and that storm can list
// the job as affected. No new protocol, no state replication: one WatchIncidents stream per other
// shard, to one of its replicas at a time.
//
// Per other shard, one thread: connect to a replica (the one that last worked first, then the
// next), open WatchIncidents, take a snapshot with ListIncidents (open, and resolved within
// `recent`) and hand it over as the shard's whole state (Replace), then hand over every change the
// stream brings (Apply). When the stream ends (replica killed, restarted, partitioned: keepalive
// pings detect a silent peer) it reconnects with jittered exponential backoff, to the other
// replica first. What was known of the shard stays in use meanwhile, and the next snapshot
// replaces it.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_SHARDS_SHARD_WATCH_H_
#define RINGSIDE_DAEMON_AGGREGATOR_SHARDS_SHARD_WATCH_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "analysis/incidents.h"
#include "analysis/shard_map.h"
#include "daemon/common/tls.h"
#include "prometheus/collectable.h"

namespace grpc {
class ClientContext;
}

namespace ringside::daemon {

struct ShardWatchOptions {
  std::vector<analysis::Shard> shards;  // the OTHER shards (never this aggregator's own)
  TlsOptions tls;                       // this aggregator's certificate, as the client's
  absl::Duration recent = absl::Minutes(10);  // resolved incidents taken in a snapshot
  absl::Duration rpc_timeout = absl::Seconds(5);  // the snapshot's ListIncidents
  absl::Duration backoff_initial = absl::Milliseconds(500);
  absl::Duration backoff_max = absl::Seconds(30);
  absl::Duration keepalive = absl::Seconds(10);  // pings on an idle stream, to notice a dead peer
  // A stream that ends sooner than this after its snapshot is no proof the replica works (one
  // that accepts and drops streams again and again): the next attempt backs off as after a
  // failure, so the watch never spins.
  absl::Duration healthy_stream = absl::Seconds(2);
  std::function<void(const std::string&)> log;
};

// Where the incidents go (the analysis host; a test's recorder). Called from the watch threads.
struct ShardWatchSink {
  std::function<void(const std::string& shard, const std::vector<analysis::Incident>&)> replace;
  std::function<void(const std::string& shard, const analysis::Incident&)> apply;
};

class ShardWatch {
 public:
  static std::unique_ptr<ShardWatch> Start(ShardWatchOptions options, ShardWatchSink sink);
  ~ShardWatch();  // cancels every stream and joins

  struct ShardState {
    std::string shard;
    std::string replica;  // the one watched now, or last
    bool connected = false;
    uint64_t connects = 0;  // snapshots taken
    uint64_t changes = 0;   // changes applied
    uint64_t failures = 0;  // connection attempts and streams that failed
  };
  std::vector<ShardState> states() const;
  // ringside_aggregator_shard_watch_* (docs/metrics.md).
  std::shared_ptr<prometheus::Collectable> metrics() const { return metrics_; }

 private:
  ShardWatch(ShardWatchOptions options, ShardWatchSink sink);
  void Run(size_t i);
  // One connection to `replica`: snapshot, then changes until the stream ends. True when the
  // snapshot was taken (the connection worked).
  bool WatchOnce(size_t i, const std::string& replica);

  // Shared with the metrics collectable, which may outlive this object.
  struct Shared {
    mutable absl::Mutex mu;
    std::vector<ShardState> states ABSL_GUARDED_BY(mu);
    std::vector<grpc::ClientContext*> live ABSL_GUARDED_BY(mu);  // per shard, to cancel
  };

  const ShardWatchOptions options_;
  const ShardWatchSink sink_;
  std::shared_ptr<Shared> shared_;
  absl::Notification stop_;
  std::vector<std::thread> threads_;
  std::shared_ptr<prometheus::Collectable> metrics_;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_SHARDS_SHARD_WATCH_H_
