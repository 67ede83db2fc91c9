// The links /metrics shows (ringside_link_health, ringside_link_flaps_in_window), chosen while
// the analysis lock is held without copying every link: at 12,500 nodes the link detector knows
// 625,000 links, and copying each as a LinkView (four strings) held the lock about a second a
// scrape (docs/benchmarks.md, "Eighth pass"). One pass over the detector's records, by view,
// ranks each link, counts what the gauges need and keeps the `max` worst in a heap; only those are
// then copied.
//
//   LinkFlags flags = ...;                      // from the open incidents, by LinkKeyOf
//   LinkSnapshot s = SnapshotLinks(analysis, now, max_links, flags, topology);  // under the lock
//   std::sort(s.worst.begin(), s.worst.end(), WorseLink);                      // outside it
#ifndef RINGSIDE_DAEMON_AGGREGATOR_METRICS_LINK_SNAPSHOT_H_
#define RINGSIDE_DAEMON_AGGREGATOR_METRICS_LINK_SNAPSHOT_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/fabric_analysis.h"
#include "analysis/fabric_views.h"
#include "daemon/aggregator/analysis_host.h"

namespace ringside::daemon {

// Open link incidents by link key (LinkKeyOf): bit 1 degraded, 2 flapping, 4 down.
using LinkFlags = std::map<std::string, int, std::less<>>;

// One link as /metrics shows it: its view and its ringside_link_health code (LinkHealth).
struct LinkHealthView {
  analysis::LinkView view;
  int health = 0;
};

struct LinkSnapshot {
  std::vector<LinkHealthView> worst;  // at most `max`, unordered (WorseLink orders them)
  size_t total = 0;                   // every link the detector knows
  size_t ports_without_peer = 0;      // InfiniBand/RoCE ports and netdevs the topology can't place
};

// Reads every link of `analysis` as of `now` (call it with the analysis lock held) and keeps the
// `max` worst by (health, flaps in window, last change), as WorseLink orders them; among links
// tied at the cut, the first visited are kept.
LinkSnapshot SnapshotLinks(const analysis::FabricAnalysis& analysis, absl::Time now, size_t max,
                           const LinkFlags& flags, const TopologyState& topology);

// Worst first: higher health code, then more flaps in the window, then the later change.
bool WorseLink(const LinkHealthView& a, const LinkHealthView& b);

// The link a view or an incident's entity is about, as one string: its class (r: an RDMA port,
// e: a netdev, n: an NVLink), node, device and port, separated by \x1f.
std::string LinkKeyOf(absl::string_view source, absl::string_view node, absl::string_view device,
                      absl::string_view port);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_METRICS_LINK_SNAPSHOT_H_
