// What the fabric detectors consume, independent of protobuf: the aggregator turns each accepted
// sample of a counter series into a CounterStep (the delta already width-corrected, with its kind),
// each sample of a gauge or state series into a StateSample, and each agent LinkEvent into a
// LinkEvent below. Series and counter names are the kernel's and driver's own, as collected
// (docs/metrics.md): source "infiniband" (PMA counters/), "infiniband_hw" (hw_counters/),
// "infiniband_port" (state, phys_state, rate), "netdev", "ethtool", "nvlink" (device = GPU index,
// port = link index); event sources "netlink", "verbs", "ibmad", "sysfs".
//
// The string fields are views: they only need to stay valid for the duration of the call that
// takes the struct (the aggregator's interned strings, a test's literals). Detectors copy what
// they keep.
//
// PortDirectory names a port the same way whichever source reports it: a RoCE netdev (eth2)
// and its RDMA port (mlx5_2/1) are one wire, so once the aggregator tells the directory about the
// agent's netdev → RDMA port info records, netdev, ethtool and netlink observations of eth2 land on
// mlx5_2 port 1 (and the entity carries both names).
#ifndef RINGSIDE_ANALYSIS_FABRIC_INPUTS_H_
#define RINGSIDE_ANALYSIS_FABRIC_INPUTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/counter_math.h"

namespace ringside::analysis {

// The increase of one counter series between two consecutive samples.
// Where a caller keeps, per series, the detector record that series' last step went to, so that
// the next step needs no port lookup and the caller can prefetch the record a few steps ahead
// (the aggregator keeps one per node and series slot). A detector trusts it only while it has
// erased no record and the port directory is unchanged (analysis/last_port.h checks both); it is
// refreshed by every step that carries it.
//
// `quiet`, set by the detector after each counter step: the next step of this series, if it is
// a normal step counting nothing (Δ 0), would change nothing in the detector but the times it was
// last seen (the series and its port are idle, and no finding is open on that port). A caller
// may then leave such steps out, as long as it still delivers one every so often (the aggregator:
// one each time the series' samples cross a 10 s boundary, at the series' own phase, far inside
// every stale_after) so that the port does not look gone.
struct RecordHint {
  void* record = nullptr;
  uint32_t epoch = 0;
  bool quiet = false;
};

struct CounterStep {
  absl::string_view node;
  absl::string_view source;   // infiniband, infiniband_hw, netdev, ethtool, nvlink, ...
  absl::string_view device;   // mlx5_0, eth2, GPU index
  absl::string_view port;     // "1"; the NVLink index; empty for a netdev
  absl::string_view counter;  // symbol_error, tx_prio3_pause_duration, replay_errors, ...
  int32_t priority = -1;      // of a per-priority series (rx_prio3_pause → 3); -1 if none
  absl::Time time;            // the later sample's time
  absl::Duration interval;    // since the earlier sample
  uint64_t delta = 0;         // width-corrected increase (a lower bound when saturated)
  DeltaKind kind = DeltaKind::kNormal;
  // Optional, from a caller that binds each series once (FabricAnalysis::Bind, the aggregator):
  // the routed detector's own reading of (source, counter, priority), and a token naming this
  // (node, source, device, port) — equal tokens, equal port — so a step costs no name parsing and,
  // in a run of one port's series, no port lookup. -1 / 0: work from the names.
  int32_t prepared = -1;
  uint64_t port_token = 0;
  RecordHint* hint = nullptr;  // optional (above)
};

// A sample of a gauge or state series (infiniband_port/state, netdev/operstate, nvlink/link_state,
// nvlink/effective_ber, infiniband_port/rate, ...).
struct StateSample {
  absl::string_view node;
  absl::string_view source;
  absl::string_view device;
  absl::string_view port;
  absl::string_view counter;
  absl::Time time;
  double value = 0;
  // Optional, from a caller that binds each series once (FabricAnalysis::Bind, the aggregator):
  // the routed detector's own reading of (source, counter, priority), and a token naming this
  // (node, source, device, port) — equal tokens, equal port — so a step costs no name parsing and,
  // in a run of one port's series, no port lookup. -1 / 0: work from the names.
  int32_t prepared = -1;
  uint64_t port_token = 0;
  RecordHint* hint = nullptr;  // optional (above)
};

// Same numbering as ringside.v1.LinkState and collectors::LinkState.
enum class LinkState : uint8_t { kUnknown = 0, kDown = 1, kUp = 2 };
absl::string_view LinkStateName(LinkState s);

// A link transition reported by an event source, stamped when it was observed.
struct LinkEvent {
  absl::string_view node;
  absl::string_view source;  // netlink (device = netdev), verbs, ibmad, sysfs; nvml_xid (device =
                             // the NVML index: an XID, analysis/gpu_detector.h)
  absl::string_view device;
  absl::string_view port;
  absl::Time time;
  LinkState from = LinkState::kUnknown;
  LinkState to = LinkState::kUnknown;
  absl::string_view detail;  // the event's text: "XID 79" for source nvml_xid
};

// What kind of port a series or event is about, once netdevs are resolved.
enum class PortClass : uint8_t { kRdma, kNetdev, kNvlink };

// One port named canonically.
struct PortId {
  PortClass cls = PortClass::kRdma;
  std::string device;  // RDMA device (mlx5_0), netdev (eth0) or GPU index
  std::string port;    // RDMA port, NVLink index; empty for an unmapped netdev
  std::string netdev;  // the RoCE netdev of an RDMA port, when known

  // A compact key, unique per node: class, device and port.
  std::string Key() const;
  // Entity labels: {node, device, port[, netdev]}, {node, netdev} or {node, gpu, link}.
  std::map<std::string, std::string> Entity(absl::string_view node) const;
  // "mlx5_3", "mlx5_3 port 2", "eth0", "gpu 1 link 4" (port 1 of an RDMA device is implied).
  std::string Describe() const;
};

// The entity a detector's port record names in its findings: its PortId's, made when a finding
// is (findings are rare, records many: a map of four labels kept in each of 625,000 link records
// was 14 bytes a series at 12,500 nodes), or the one an incident restored at startup carried,
// kept as it was so that the finding resolves under the very key it was opened with.
class RecordEntity {
 public:
  std::map<std::string, std::string> Get(const PortId& id, absl::string_view node) const {
    return restored_ != nullptr ? *restored_ : id.Entity(node);
  }
  void Restore(const std::map<std::string, std::string>& entity) {
    restored_ = std::make_unique<std::map<std::string, std::string>>(entity);
  }

 private:
  std::unique_ptr<std::map<std::string, std::string>> restored_;
};

// The canonical port of a series as views (into the inputs or the directory): the detectors'
// per-sample lookup key, built without allocating.
struct PortRef {
  PortClass cls = PortClass::kRdma;
  absl::string_view device;
  absl::string_view port;
};
// Appends the same key PortId::Key() gives.
void AppendPortKey(const PortRef& ref, std::string& out);

// netdev ↔ RDMA port names per node (the agent's netdev info records: rdma_device, rdma_port).
// Thread-compatible.
class PortDirectory {
 public:
  void MapNetdev(absl::string_view node, absl::string_view netdev, absl::string_view device,
                 absl::string_view port);
  // The canonical port of a series or event.
  PortId Resolve(absl::string_view node, absl::string_view source, absl::string_view device,
                 absl::string_view port) const;
  PortRef Canonical(absl::string_view node, absl::string_view source, absl::string_view device,
                    absl::string_view port) const;
  size_t size() const { return size_; }
  // Changes whenever a mapping does (callers that cache canonical ports compare it).
  uint64_t version() const { return version_; }

 private:
  struct Rdma {
    std::string device;
    std::string port;
  };
  // node → netdev → RDMA port, and node → "device\x1fport" → netdev.
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, Rdma>> to_rdma_;
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, std::string>> to_netdev_;
  size_t size_ = 0;
  uint64_t version_ = 0;
};

// Without a directory (null): netdevs stay netdevs.
PortRef CanonicalPort(const PortDirectory* directory, absl::string_view node,
                      absl::string_view source, absl::string_view device, absl::string_view port);

// The port of a series or event without a directory (netdevs stay netdevs).
PortId ResolvePort(const PortDirectory* directory, absl::string_view node, absl::string_view source,
                   absl::string_view device, absl::string_view port);

// The priority in a per-priority ethtool name: PrioOf("rx_prio3_pause_duration", "rx_prio",
// "_pause_duration") == 3; -1 when the name does not have that shape.
int PrioOf(absl::string_view name, absl::string_view prefix, absl::string_view suffix);

// A duration in seconds, through whole nanoseconds (cheaper than absl::ToDoubleSeconds, which
// divides exactly; a sampling interval needs no better).
inline double FastSeconds(absl::Duration d) {
  return static_cast<double>(absl::ToInt64Nanoseconds(d)) * 1e-9;
}

// The class of port a source's series are about before any netdev mapping: nvlink, a netdev
// (netdev, ethtool, netlink) or an RDMA port (everything else).
PortClass SourceClass(absl::string_view source);

// The per-second rate of a step; 0 when the interval is not positive.
double StepRate(const CounterStep& step);

// True when a step's delta counts: normal or wrapped (a reset gives no information about when the
// counts happened, an invalid step is garbage; saturated steps are handled by each detector).
inline bool DeltaUsable(DeltaKind k) { return k == DeltaKind::kNormal || k == DeltaKind::kWrap; }

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_FABRIC_INPUTS_H_
