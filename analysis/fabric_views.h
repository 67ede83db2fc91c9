// Read-only views of the detectors' live state, for the Query API (ringside links, ringside top
// stragglers) and the aggregator's /metrics: what each link and each rank looks like now, whether
// or not an incident is open about it. Plain values, copied out; no references into the detectors.
#ifndef RINGSIDE_ANALYSIS_FABRIC_VIEWS_H_
#define RINGSIDE_ANALYSIS_FABRIC_VIEWS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/fabric_inputs.h"

namespace ringside::analysis {

// One link the link detector knows (a port or NVLink it has seen any input for).
struct LinkView {
  std::string node;
  std::string source;  // infiniband (an RDMA port: InfiniBand or RoCE), netdev, nvlink
  std::string device;  // RDMA device, netdev, or GPU index
  std::string port;    // RDMA port, NVLink index; empty for a netdev
  LinkState state = LinkState::kUnknown;
  uint32_t flaps_in_window = 0;  // down→up cycles completed within LinkOptions::flap_window
  absl::Time last_change = absl::InfinitePast();  // last down or up transition; InfinitePast: none
  absl::Time last_seen = absl::InfinitePast();    // last input of any kind about the link
};

// A LinkView that copies nothing: what a visitor of every link (LinkDetector::VisitLinks) is
// shown, its names viewing the detector's own records — valid only during the visit. For a caller
// that reads every link but keeps few of them (the aggregator's /metrics, at hundreds of thousands
// of links), under the analysis' lock.
struct LinkRef {
  absl::string_view node;
  absl::string_view source;
  absl::string_view device;
  absl::string_view port;
  LinkState state = LinkState::kUnknown;
  uint32_t flaps_in_window = 0;
  absl::Time last_change = absl::InfinitePast();
  absl::Time last_seen = absl::InfinitePast();
  // The detector's record of the link, for LinkDetector::ViewOf: valid while the caller holds
  // what serializes the detector (the aggregator's analysis lock) and no input has reached it.
  const void* record = nullptr;

  LinkView ToView() const;  // the owned copy
};

// One rank of one communicator, as the straggler detector judges it over its window.
struct RankView {
  std::string job;
  int64_t rank = -1;  // the global rank where known, else the rank in the communicator
  std::string node;
  std::string comm;
  std::string pod;            // the Kubernetes pod running the rank, when known
  std::string pod_namespace;
  double score = 0;          // fraction of the window's instances in which it arrived late (behind
                             // the communicator's median arrival by a clear margin)
  double margin = 0;         // median lag behind the median arrival when it was late, as a
                             // fraction of the instance's duration (0 if never late)
  double wait_fraction = 0;  // share of its collective time spent waiting for others (low: culprit)
  uint32_t instances = 0;    // instances in the window
  // Where its lateness was in its late instances: "host", "gpu" or "unknown" (never late, or the
  // clocks did not allow the split); straggler_where.h.
  std::string where = "unknown";
  int32_t gpu_sharers = 1;   // ranks of the communicator on its GPU, itself included
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_FABRIC_VIEWS_H_
