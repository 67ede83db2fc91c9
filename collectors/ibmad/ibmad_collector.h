// The fabric scan: PMA PortCounters / PortCountersExtended and PortInfo state of given LIDs and
// ports of the fabric — switch ports included — read with libibmad from a local CA port, so both
// ends of a link and a switch-side flap are seen. An optional mode of the agent.
//
// Series (one set per scanned port):
//   source "ibmad", device = the node GUID as "0x" + 16 hex digits (stable when the SM reassigns
//   LIDs; the spelling of ibstat's "Node GUID"), port = the port number,
//   counter = the sysfs name of the same PMA field (symbol_error, link_downed, port_xmit_data,
//   unicast_rcv_packets, port_xmit_wait, ...) so both ends of a link read alike, plus "state" and
//   "phys_state" (kState, ids as sysfs: 1 DOWN .. 4 ACTIVE; phys 2 Polling, 3 Disabled, 5 LinkUp)
//   from PortInfo.
// Raw values are what the PMA reports: data counters in 4-byte words, widths from the PMA spec
// (32-bit PortCounters data, 64-bit PortCountersExtended), all saturating.
// InfoRecord source "ibmad_node" per node: node_desc, node_guid, lid, node_type (switch / ca /
// router), num_ports, pma_cap_mask, counters (extended / basic).
//
// Link transitions: when a port's state changes between two scans the collector queues a
// LinkEvent (source "ibmad"); the agent drains them with TakeEvents() after each cycle. They are
// seen at scan granularity (see port_transitions.h).
//
// Cost per cycle: 2 MADs per port (PortInfo, PortCounters) plus 1 with extended counters.
// Discovery: NodeInfo, NodeDescription and PMA ClassPortInfo per target. A node that does not
// answer costs timeout × (1 + retries) once per cycle: its remaining queries that cycle are
// skipped and their values marked kError.
#ifndef RINGSIDE_COLLECTORS_IBMAD_IBMAD_COLLECTOR_H_
#define RINGSIDE_COLLECTORS_IBMAD_IBMAD_COLLECTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collectors/common/collector.h"
#include "collectors/common/link_event.h"
#include "collectors/ibmad/mad_fields.h"
#include "collectors/ibmad/mad_transport.h"
#include "collectors/ibmad/port_transitions.h"
#include "collectors/ibmad/scan_targets.h"

namespace ringside::collectors {

struct IbmadOptions {
  std::vector<ScanTarget> targets;
  // Where the targets come from instead, when set (`--fabric-scan=discovered`: the switches of
  // the agent's own subnet discovery). Asked at the start of every cycle; returns the targets
  // and a version that changes when they do. Targets kept across a change keep their discovery.
  std::function<std::vector<ScanTarget>(uint64_t* version)> target_source;
  // The local CA port, MAD timeout and retries.
  MadPortOptions port;
  // Read data and packet counters from PortCountersExtended (64-bit) where the PMA has it.
  bool use_extended = true;
  // Every target's NodeInfo is read again at this interval, so a LID that now belongs to another
  // node (or a node whose port count changed) is seen.
  absl::Duration rediscover_interval = absl::Minutes(1);
  // A target whose discovery failed is tried again after this long.
  absl::Duration retry_interval = absl::Seconds(10);
  // LinkEvents kept until TakeEvents(); beyond that the oldest are dropped and counted.
  size_t max_pending_events = 4096;
};

class IbmadCollector final : public Collector {
 public:
  // Opens the local CA port with libibmad. When that fails the collector is unavailable
  // (Availability() says why) and every cycle is empty.
  static std::unique_ptr<IbmadCollector> Create(IbmadOptions options);
  // On a port shared with the subnet discovery (null: opens its own, as above).
  static std::unique_ptr<IbmadCollector> Create(IbmadOptions options,
                                                std::shared_ptr<SharedIbmadPort> port);

  // With a given transport (tests). A null transport makes the collector unavailable with
  // `availability`.
  IbmadCollector(IbmadOptions options, std::unique_ptr<MadTransport> transport,
                 absl::Status availability = absl::OkStatus());

  absl::string_view name() const override { return "ibmad"; }
  void Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) override;
  absl::Status Availability() const override { return availability_; }

  // The link transitions seen since the last call, oldest first. Like Collect, not thread-safe:
  // call it from the thread that runs Collect (the sampler's per-cycle callback).
  std::vector<LinkEvent> TakeEvents();
  // Events dropped because nobody took them in time.
  uint64_t dropped_events() const { return dropped_events_; }

 private:
  // A target that answered discovery.
  struct Node {
    uint16_t lid = 0;
    NodeInfo info;
    std::string desc;
    uint16_t cap_mask = 0;
    std::string device;             // GuidString(info.node_guid)
    std::vector<uint8_t> ports;     // ports read each cycle
    std::vector<ScanField> fields;  // per port
    size_t first_value = 0;         // index of its first series in the table
    bool operator==(const Node& o) const;
  };
  struct Target {
    ScanTarget spec;
    bool discovered = false;
    absl::Time last_attempt = absl::InfinitePast();
    Node node;
  };

  // Reads NodeInfo, NodeDescription and ClassPortInfo of `t`. Ports the node does not have are
  // reported in `errors` and left out.
  absl::StatusOr<Node> Discover(const ScanTarget& t, CycleErrors& errors);
  // Runs discovery where due; true when the set of nodes changed.
  bool DiscoverDue(absl::Time now, CycleErrors& errors);
  void BuildTable();
  void ReadNode(const Node& node, absl::Time now, std::vector<Value>& values, CycleErrors& errors);
  void QueueEvents(std::vector<LinkEvent>& events);

  IbmadOptions options_;
  std::unique_ptr<MadTransport> transport_;
  absl::Status availability_;
  // Replaces the targets: ones that stay keep their node, new ones are discovered this cycle.
  void SetTargets(const std::vector<ScanTarget>& targets);

  std::vector<Target> targets_;
  uint64_t targets_version_ = 0;
  absl::Time last_rediscovery_ = absl::InfinitePast();
  std::shared_ptr<const SeriesTable> table_;
  // Nodes in table order, with their first_value set; a node whose GUID and ports duplicate an
  // earlier target's is left out.
  std::vector<Node> scanned_;
  PortTransitionTracker transitions_;
  std::vector<LinkEvent> pending_events_;
  uint64_t dropped_events_ = 0;
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_IBMAD_IBMAD_COLLECTOR_H_
