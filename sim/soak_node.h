// One node of the virtual-clock soak (`ringside-sim soak`, sim/soak.h): the simulated node's sysfs
// tree and `ethtool -S` dumps written by the real SysfsTreeWriter and NodeAnimator, read by the
// agent's real collectors (infiniband with hw_counters, netdev, ethtool from the dump folder)
// inside a real daemon::Sampler whose clock is the soak's virtual clock. Each cycle's snapshot is
// turned into the ringside.v1 messages the agent's Uploader would send (SeriesDefs for new or
// changed series with the info records, then a SampleBatch) using the agent's own SeriesIds —
// the only part of the agent's upload path that is re-done here, since the Uploader does that
// conversion inside its gRPC session — and handed to the aggregator's IngestCore in-process.
#ifndef RINGSIDE_SIM_SOAK_NODE_H_
#define RINGSIDE_SIM_SOAK_NODE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/agent/sampler.h"
#include "daemon/agent/series_ids.h"
#include "daemon/aggregator/ingest/ingest_core.h"
#include "ringside/v1/ingest.pb.h"
#include "sim/node_animator.h"
#include "sim/scenario.h"
#include "sim/sysfs_tree.h"

namespace ringside::sim {

class SoakNode {
 public:
  // `dir` (must exist) gets sys/ and ethtool/. `now` is the virtual clock.
  static absl::StatusOr<std::unique_ptr<SoakNode>> Create(const Scenario& s, int index,
                                                          const std::string& dir,
                                                          daemon::Sampler::NowFn now);

  // The session's Hello to `core` (a new agent epoch, deterministic in the seed and node).
  absl::Status Connect(daemon::IngestCore* core, uint64_t seed);
  // Advances the node's counters to simulation time `t`.
  absl::Status Animate(absl::Duration t);
  // One sampling cycle, its messages sent to the core. Adds the number of values sent to
  // `*samples`.
  absl::Status SampleAndSend(uint64_t* samples);
  // A sequenced message (a CollectiveBatch) to the core.
  absl::Status Send(v1::AgentMessage msg);

  const std::string& name() const { return name_; }
  // Read errors of the collectors so far (a broken tree shows here).
  uint64_t read_errors() const { return read_errors_; }

 private:
  SoakNode() = default;
  absl::Status Apply(const v1::AgentMessage& msg);

  std::string name_;
  std::unique_ptr<SysfsTreeWriter> tree_;
  std::unique_ptr<NodeAnimator> animator_;
  std::unique_ptr<daemon::Sampler> sampler_;
  // Upload state: ids, what this session has defined, the info records last sent.
  daemon::SeriesIds ids_;
  std::vector<bool> defined_;
  std::string info_sent_;  // serialized info records last sent ("" before any)
  bool info_ever_sent_ = false;
  // Session state.
  daemon::IngestCore* core_ = nullptr;
  std::shared_ptr<daemon::IngestCore::NodeEntry> entry_;
  std::shared_ptr<daemon::SessionLink> link_;
  uint64_t epoch_ = 0;
  uint64_t session_id_ = 0;
  uint64_t next_seq_ = 1;
  uint64_t read_errors_ = 0;
};

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_SOAK_NODE_H_
