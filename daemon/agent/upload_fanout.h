// Streams to every replica of the agent's aggregator shard (issue #14, docs/scale.md): one
// Uploader per replica, each with its own buffer, acknowledgements, backoff and agent epoch, so a
// replica that is down or slow never blocks or drops data for the others; what a replica missed
// while down is resent from its own buffer when it comes back (beyond the buffer's bound it is
// dropped and counted there, as with one aggregator). Every replica gets everything: samples,
// link events and collective records, and runs every detector on its own.
//
// With shards (analysis::ShardMap), counters and link events go to the replicas of the node's shard
// and each job's collective records to the replicas of the job's shard, so all ranks of a job meet
// in one place: a job whose shard is not the node's gets an uploader of its own per replica, made
// when its first record comes, that offers only collectives in its Hello (the aggregator then does
// not judge the node stale when the job ends). A replica both roles point at gets one uploader.
//
// A node can move to another shard while the agent runs (its leaf switch changed: recabling, or
// LLDP naming a leaf after the start; daemon/agent/shard_placement.h). MoveNodeTo then gives each
// new replica a new Uploader; a replica in both the old and the new shard keeps its uploader and
// session; each old replica's uploader is retired on a thread of its own: it flushes what it holds
// for at most the flush timeout, closes its session (a half-close when everything was
// acknowledged) and is freed; then, unless the node came back to that replica meanwhile, a
// collectives-only uploader is opened to it at once (not at the first record of one of its jobs):
// its Hello tells the old shard that the node's counters went elsewhere, so it does not judge the
// node stale. Collective records meant for a replica being retired still go to its
// uploader until it is gone, and so may link events logged meanwhile (it forwards the link log
// until it stops). A new replica's uploader forwards the link events still in the agent's ring. A collectives-only uploader whose replica joins the node's shard is
// retired the same way (the new uploader carries the collectives from then on).
//
// Producers (the sampler thread, the collective listener) call it as they would one Uploader and
// never block on the network.
#ifndef RINGSIDE_DAEMON_AGENT_UPLOAD_FANOUT_H_
#define RINGSIDE_DAEMON_AGENT_UPLOAD_FANOUT_H_

#include <functional>
#include <list>
#include <map>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/agent/uploader.h"

namespace ringside::daemon {

// "a:9472,b:9472" → {"a:9472", "b:9472"}: comma-separated, spaces ignored; an empty entry or the
// same address twice is an error.
absl::StatusOr<std::vector<std::string>> ParseAggregatorList(absl::string_view list);

// Where a job's collective records go: the replicas (host:port) of its shard.
using JobReplicas = std::function<std::vector<std::string>(absl::string_view job)>;

class UploadFanout {
 public:
  // One Uploader per target, each made from `base` with its target set (and its own epoch).
  // Without `job_replicas`, collective records go to the same targets as everything else.
  static absl::StatusOr<std::unique_ptr<UploadFanout>> Create(
      const UploaderOptions& base, const std::vector<std::string>& targets,
      const LinkEventLog* links = nullptr, JobReplicas job_replicas = nullptr);
  ~UploadFanout();  // Shutdown(0) unless done
  UploadFanout(const UploadFanout&) = delete;
  UploadFanout& operator=(const UploadFanout&) = delete;

  void OnSnapshot(const AgentSnapshot& snap) ABSL_LOCKS_EXCLUDED(mu_);
  void EnqueueCollectives(v1::CollectiveBatch batch) ABSL_LOCKS_EXCLUDED(mu_);

  // The node's counters and link events go to `targets` (the replicas of its new shard) from the
  // next OnSnapshot on; the old replicas' uploaders are retired in the background, each flushing
  // for at most `flush_timeout`. Never blocks on the network. An error (an empty or unusable
  // target list) leaves everything as it was.
  absl::Status MoveNodeTo(const std::vector<std::string>& targets, absl::Duration flush_timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Flushes every replica at once (in parallel), each bounded by `flush_timeout`, so stopping
  // takes one timeout, not one per replica; then waits for uploaders still being retired (each
  // bounded by its own timeout). True if every replica acknowledged everything.
  bool Shutdown(absl::Duration flush_timeout) ABSL_LOCKS_EXCLUDED(mu_);

  // ringside_agent_upload_* of every replica, each series labelled aggregator="host:port".
  std::vector<prometheus::MetricFamily> MetricFamilies() const ABSL_LOCKS_EXCLUDED(mu_);

  // The replicas of the node's shard (counters, link events), in the order given.
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<const Uploader> replica(size_t i) const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::string> Targets() const ABSL_LOCKS_EXCLUDED(mu_);
  // Connected to at least one replica of the node's shard.
  bool AnyConnected() const ABSL_LOCKS_EXCLUDED(mu_);
  // Targets of the collectives-only uploaders made so far (other shards' replicas), sorted.
  std::vector<std::string> JobTargets() const ABSL_LOCKS_EXCLUDED(mu_);
  // Uploaders of former replicas still flushing after a move.
  size_t Retiring() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Retiree {
    std::string target;
    std::shared_ptr<Uploader> uploader;
    std::thread thread;
    bool done = false;
  };

  UploadFanout(UploaderOptions base, const LinkEventLog* links,
               std::vector<std::shared_ptr<Uploader>> uploaders, JobReplicas job_replicas)
      : base_(std::move(base)),
        links_(links),
        job_replicas_(std::move(job_replicas)),
        uploaders_(std::move(uploaders)) {}
  // Opens the gate of a node uploader held back by MoveNodeTo.
  using Gate = std::shared_ptr<std::atomic<bool>>;
  // `gate` (optional): the uploader opens no session before it is set. `replicas`: how many
  // aggregators get the node's counters; from 2, its Hello says so ("replicas=N" among its
  // capabilities), so that a replica started without --peers can warn (docs/deploy.md).
  static absl::StatusOr<std::shared_ptr<Uploader>> MakeNodeUploader(const UploaderOptions& base,
                                                                    const std::string& target,
                                                                    const LinkEventLog* links,
                                                                    size_t replicas,
                                                                    Gate gate = nullptr);
  // The uploader for `target`: one of the node's shard, one being retired, else a
  // collectives-only one (made now).
  std::shared_ptr<Uploader> ForTarget(const std::string& target) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::shared_ptr<Uploader>> Nodes() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::shared_ptr<Uploader>> All() const ABSL_LOCKS_EXCLUDED(mu_);
  // `gate` (optional) is opened once `up` has closed its session.
  void RetireLocked(std::string target, std::shared_ptr<Uploader> up, absl::Duration flush_timeout,
                    Gate gate = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Joins the retirement threads that finished (all of them with `all`, waiting).
  void JoinRetired(bool all) ABSL_LOCKS_EXCLUDED(mu_);

  const UploaderOptions base_;
  const LinkEventLog* const links_;
  const JobReplicas job_replicas_;
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<Uploader>> uploaders_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Uploader>> job_uploaders_ ABSL_GUARDED_BY(mu_);
  std::list<Retiree> retiring_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_UPLOAD_FANOUT_H_
