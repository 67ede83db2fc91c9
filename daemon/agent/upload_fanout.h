// Streams to every replica of the agent's aggregator shard (issue #14, docs/scale.md): one
// Uploader per replica, each with its own buffer, acknowledgements, backoff and agent epoch, so a
// replica that is down or slow never blocks or drops data for the others; what a replica missed
// while down is resent from its own buffer when it comes back (beyond the buffer's bound it is
// dropped and counted there, as with one aggregator). Every replica gets everything: samples,
// link events and collective records, and runs every detector on its own.
//
// Producers (the sampler thread, the collective listener) call it as they would one Uploader and
// never block on the network.
#ifndef RINGSIDE_DAEMON_AGENT_UPLOAD_FANOUT_H_
#define RINGSIDE_DAEMON_AGENT_UPLOAD_FANOUT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/agent/uploader.h"

namespace ringside::daemon {

// "a:9472,b:9472" → {"a:9472", "b:9472"}: comma-separated, spaces ignored; an empty entry or the
// same address twice is an error.
absl::StatusOr<std::vector<std::string>> ParseAggregatorList(absl::string_view list);

class UploadFanout {
 public:
  // One Uploader per target, each made from `base` with its target set (and its own epoch).
  static absl::StatusOr<std::unique_ptr<UploadFanout>> Create(
      const UploaderOptions& base, const std::vector<std::string>& targets,
      const LinkEventLog* links = nullptr);
  ~UploadFanout();  // Shutdown(0) unless done
  UploadFanout(const UploadFanout&) = delete;
  UploadFanout& operator=(const UploadFanout&) = delete;

  void OnSnapshot(const AgentSnapshot& snap);
  void EnqueueCollectives(v1::CollectiveBatch batch);

  // Flushes every replica at once (in parallel), each bounded by `flush_timeout`, so stopping
  // takes one timeout, not one per replica. True if every replica acknowledged everything.
  bool Shutdown(absl::Duration flush_timeout);

  // ringside_agent_upload_* of every replica, each series labelled aggregator="host:port".
  std::vector<prometheus::MetricFamily> MetricFamilies() const;

  size_t size() const { return uploaders_.size(); }
  const Uploader& replica(size_t i) const { return *uploaders_[i]; }
  // Connected to at least one replica.
  bool AnyConnected() const;

 private:
  explicit UploadFanout(std::vector<std::unique_ptr<Uploader>> uploaders)
      : uploaders_(std::move(uploaders)) {}
  std::vector<std::unique_ptr<Uploader>> uploaders_;
  bool shut_down_ = false;
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGENT_UPLOAD_FANOUT_H_
