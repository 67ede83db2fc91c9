// Subnet discovery: walks an InfiniBand subnet with directed-route SMP Gets from a local CA port
// and returns its graph — every node by GUID, its ports, and every link with both ends.
//
// What it sends (all SMP Gets, class 0x81, answered by each node's SMA; nothing is Set):
//  - NodeInfo (0x11) once per port that leads somewhere: the node at the far end, its GUID and
//    the port it was entered by (the start node: once, with an empty path);
//  - NodeDescription (0x10) once per node;
//  - PortInfo (0x15): every port 1..N of a switch plus port 0 (the switch's LID); a CA's or
//    router's ports by which it was reached (attribute modifier = the port).
// A port is followed when its PortInfo LinkState is INIT or above (the link is physically up;
// a DOWN port has no peer). A link whose far end is already known (a second path into a switch)
// costs one NodeInfo and is recorded once; the link the walk arrived by is not probed again.
// MADs per pass, on a subnet of N nodes (S switches with P ports each, C CAs each cabled by one
// port) and L links: 2 + S·(P+2) + 2·C + 2·L − N (one NodeInfo per link of the walk's spanning
// tree, two per other link). A CA cabled by k ports costs k−1 PortInfo more and k−1 NodeInfo less.
//
// Bounds: MADs are paced to at most `max_mads_per_second` (no bursts; the subnet manager and the
// switches' SMAs see that rate at most from one discoverer), a pass gives up after
// `max_duration` (the graph is then marked incomplete), and paths are at most 63 hops.
#ifndef RINGSIDE_COLLECTORS_IBMAD_SUBNET_DISCOVERY_H_
#define RINGSIDE_COLLECTORS_IBMAD_SUBNET_DISCOVERY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "collectors/ibmad/dr_transport.h"
#include "collectors/ibmad/mad_fields.h"
#include "collectors/ibmad/scan_targets.h"

namespace ringside::collectors {

struct DiscoveredPort {
  uint8_t num = 0;
  uint16_t lid = 0;  // the port's LID (a switch: its port 0 LID, for every port)
  uint8_t lmc = 0;
  uint8_t state = 0;       // PortInfo LinkState: 1 DOWN .. 4 ACTIVE
  uint8_t phys_state = 0;  // PortInfo PortPhysicalState: 2 Polling, 3 Disabled, 5 LinkUp, ...
  uint8_t width_active = 0;      // PortInfo LinkWidthActive (bit: 1 1x, 2 4x, 4 8x, 8 12x, 16 2x)
  uint8_t speed_active = 0;      // PortInfo LinkSpeedActive (1 SDR, 2 DDR, 4 QDR)
  uint8_t speed_ext_active = 0;  // PortInfo LinkSpeedExtActive (1 FDR, 2 EDR, 4 HDR, 8 NDR), 0
                                 // when the port has no extended speeds
  uint64_t port_guid = 0;        // NodeInfo PortGUID seen through this port; 0 when not
};

struct DiscoveredNode {
  NodeInfo info;  // local_port: the port by which the walk first entered it
  std::string description;
  uint16_t lid = 0;           // a switch: port 0's; a CA: the LID of its lowest discovered port
  std::vector<uint8_t> path;  // the directed route the walk reached it by
  std::map<uint8_t, DiscoveredPort> ports;  // the ports whose PortInfo was read
};

// One cable. Ends are ordered: (a_guid, a_port) < (b_guid, b_port).
struct DiscoveredLink {
  uint64_t a_guid = 0;
  uint8_t a_port = 0;
  uint64_t b_guid = 0;
  uint8_t b_port = 0;
  bool operator<(const DiscoveredLink& o) const;
  bool operator==(const DiscoveredLink& o) const;
};

struct SubnetGraph {
  std::map<uint64_t, DiscoveredNode> nodes;  // by node GUID
  std::vector<DiscoveredLink> links;         // sorted, unique
  uint64_t start_guid = 0;                   // the discovering node
  bool complete = false;  // the walk ended (false: stopped by max_duration or a local failure)
};

struct DiscoveryOptions {
  // Pace of the SMPs one pass sends (each attempt of a retried MAD is paced too, at the
  // transport). 0: unpaced (tests, the tool with --rate=0).
  double max_mads_per_second = 500;
  // A pass stops (graph incomplete) when it has run this long.
  absl::Duration max_duration = absl::Seconds(60);
  // Clock and sleep, replaceable by tests.
  std::function<absl::Time()> now = [] { return absl::Now(); };
  std::function<void(absl::Duration)> sleep = [](absl::Duration d) { absl::SleepFor(d); };
  // Checked before each MAD: true stops the pass (incomplete). Empty: never.
  std::function<bool()> cancelled;
};

struct DiscoveryStats {
  uint64_t mads = 0;    // SMPs sent (answered or not)
  uint64_t errors = 0;  // SMPs that failed
  std::vector<std::string> messages;  // the first few failures
  absl::Duration duration;
};

// One pass. Never fails as a whole: failures are counted in `stats`, and a graph that could not
// be walked to its end has complete = false.
SubnetGraph DiscoverSubnet(DrSmpTransport& transport, const DiscoveryOptions& options,
                           DiscoveryStats& stats);

// "4x", "12x", ... from LinkWidthActive; "SDR" .. "NDR" from the active speeds; "?" if unknown.
std::string LinkWidthName(uint8_t width_active);
std::string LinkSpeedName(uint8_t speed_active, uint8_t speed_ext_active);

// The directed route as ibnetdiscover and smpquery -D take it: "0,1,3".
std::string DrPathString(const std::vector<uint8_t>& path);

// What the fabric scan (ibmad_collector.h) should read from a discovered graph: every switch by its
// LID, all ports (a CA is read by its own host's agent). Sorted by LID; switches without a LID
// (not yet configured by the subnet manager) are left out.
std::vector<ScanTarget> SwitchScanTargets(const SubnetGraph& graph);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_IBMAD_SUBNET_DISCOVERY_H_
