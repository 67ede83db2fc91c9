// The latest per-port signals the aggregator's /metrics derives from counter steps as they are
// ingested: the fraction of time a port was paused on each PFC priority (ethtool
// rx/tx_prio<N>_pause_duration, µs per second ÷ 1e6, clamped to [0, 1]) and the per-second rates of
// the RoCE congestion counters (hw_counters np_ecn_marked_roce_packets, np_cnp_sent,
// rp_cnp_handled). Each value is the one of the series' latest step ("over the last interval").
//
// Fed from the ingest threads (Observe is cheap: one short lock and one node lookup a batch, then
// an array index per sample — what a series is to the tracker is decided once per series
// identity, and which entry a series updates once per series, kept by the series' slot in its
// node's table); read by the scrape thread as a copy (Snapshot). Entries whose series sent nothing
// for `stale_after` are left out of snapshots and forgotten. Each (node, device, port, priority,
// signal) has one entry, whichever series (a redefined one under a new id) feeds it.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_METRICS_PORT_RATE_TRACKER_H_
#define RINGSIDE_DAEMON_AGGREGATOR_METRICS_PORT_RATE_TRACKER_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "analysis/series_state.h"

namespace ringside::daemon {

enum class PortSignal : uint8_t {
  kRxPausedRatio,   // paused by the peer: could not send (ethtool rx_prio<N>_pause_duration)
  kTxPausedRatio,   // paused the peer (tx_prio<N>_pause_duration)
  kEcnMarkedRate,   // np_ecn_marked_roce_packets per second
  kCnpSentRate,     // np_cnp_sent per second
  kCnpHandledRate,  // rp_cnp_handled per second
};

// Which signal a series feeds, if any; `priority` receives the PFC priority of a pause series.
bool TrackedSignal(absl::string_view source, absl::string_view counter, int32_t def_priority,
                   PortSignal* signal, int32_t* priority);

struct PortSignalValue {
  std::string node;
  std::string device;  // netdev for the PFC ratios, RDMA device for the congestion rates
  std::string port;    // RDMA port ("" for a netdev)
  int32_t priority = -1;
  PortSignal signal = PortSignal::kRxPausedRatio;
  double value = 0;
  absl::Time time;  // of the step (the agent's clock)
};

// The /metrics family a signal is shown in: 0 ringside_pfc_paused_ratio (both directions),
// 1 ringside_roce_ecn_marked_packets_per_second, 2 ..._cnp_sent_..., 3 ..._cnp_handled_....
int PortFamilyOf(PortSignal signal);

class PortRateTracker {
 public:
  explicit PortRateTracker(absl::Duration stale_after = absl::Minutes(2))
      : stale_after_(stale_after) {}

  // One SampleBatch's accepted samples of `node` (IngestObserver::OnSamples), taken in at `now`
  // (the aggregator's clock).
  void Observe(absl::string_view node, absl::Span<const analysis::ObservedSample> samples,
               absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // The entries updated within `stale_after` of `now`, in no order. Forgets the others.
  std::vector<PortSignalValue> Snapshot(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // What /metrics shows of each family (PortFamilyOf): the `max` worst entries — highest value,
  // then by node, device, port, priority and signal, descending — of the live ones, worst first,
  // with how many each family has. Copies only those it keeps (Snapshot copies every entry, all
  // the while holding the lock ingest's Observe waits on). Forgets stale entries.
  struct Worst {
    std::array<std::vector<PortSignalValue>, 4> kept;
    std::array<size_t, 4> live{};
  };
  Worst WorstOf(absl::Time now, size_t max) ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // 40 bytes: names are indexes (node_names_, places_), shared by every entry that has them.
  struct Entry {
    uint32_t serial = 0;  // bumped each time the entry is reused: older links miss
    uint32_t node = 0;    // node_names_
    uint32_t place = 0;   // places_: device and port
    int16_t priority = -1;
    PortSignal signal = PortSignal::kRxPausedRatio;
    bool live = false;
    double value = 0;
    int64_t time_ns = 0;     // of the step (the agent's clock)
    int64_t updated_ns = 0;  // the aggregator's clock when it came
  };
  struct EntryKey {
    uint32_t node = 0;
    uint32_t place = 0;
    int32_t priority = -1;
    PortSignal signal = PortSignal::kRxPausedRatio;
    bool operator==(const EntryKey& o) const {
      return node == o.node && place == o.place && priority == o.priority && signal == o.signal;
    }
    template <typename H>
    friend H AbslHashValue(H h, const EntryKey& k) {
      return H::combine(std::move(h), k.node, k.place, k.priority, static_cast<uint8_t>(k.signal));
    }
  };
  // A tracked series of one node → its entry, with the series identity that made the link (a slot
  // that now holds another series does not update the old entry). A node's links are sorted by
  // slot; a batch lists its series in slot order, so the next link is normally the one wanted.
  struct Link {
    uint32_t slot = 0;
    uint32_t entry = 0;
    uint32_t serial = 0;  // of the entry when linked
    uint32_t identity = 0;
    uint32_t generation = 0;
  };
  struct NodeLinks {
    std::vector<Link> links;
    size_t cursor = 0;  // where the current batch's next tracked sample is looked for first
  };
  static constexpr uint32_t kNoEntry = ~uint32_t{0};
  // What a series is to the tracker, decided once per series identity.
  struct Tracked {
    uint32_t generation = 0;  // of the identity; 0: empty
    bool tracked = false;
    PortSignal signal = PortSignal::kRxPausedRatio;
    int32_t priority = -1;
  };
  const Tracked& TrackedOf(const analysis::ObservedSample& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The entry `s` updates: by its link when linked before, else by key (created if new).
  uint32_t EntryByKey(uint32_t node, const analysis::ObservedSample& s, const Tracked& tr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint32_t EntryOf(NodeLinks* node_links, uint32_t node, const analysis::ObservedSample& s,
                   const Tracked& tr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(uint32_t entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  PortSignalValue ValueOf(const Entry& e) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls fn(index, entry) for each live entry updated within stale_after_ of `now`; forgets the
  // stale ones.
  template <typename Fn>
  void ForEachLive(absl::Time now, Fn fn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration stale_after_;
  mutable absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(mu_);  // indexes of free entries
  size_t live_ ABSL_GUARDED_BY(mu_) = 0;
  // (node, place, priority, signal) → entry: consulted only when a series is first linked.
  absl::flat_hash_map<EntryKey, uint32_t> by_key_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint32_t> node_index_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> node_names_ ABSL_GUARDED_BY(mu_);  // by node index
  std::vector<NodeLinks> links_ ABSL_GUARDED_BY(mu_);        // by node index
  // (device, port) → place: the same few names on every node.
  absl::flat_hash_map<std::pair<std::string, std::string>, uint32_t> place_index_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> places_ ABSL_GUARDED_BY(mu_);
  std::vector<Tracked> by_identity_ ABSL_GUARDED_BY(mu_);
  Tracked scratch_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_METRICS_PORT_RATE_TRACKER_H_
