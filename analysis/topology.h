// The fabric's shape, as far as correlation needs it: which leaf switch (and switch port) each
// host's HCA is cabled to. Parsed from
//  - `ibnetdiscover` output (default, `-f` full and `-p`/`--ports` forms; infiniband-diags from
//    2007 to today, and ibsim's hand-written net files), where a host is named by its CA's node
//    description — "a08-p1-dgx-04-c01 mlx5_5", "stage114 mlx4_0", "compute-00-01 HCA-1": the host,
//    then the device; CAs left with a vendor default ("MT4129 ConnectX7 Mellanox Technologies",
//    "Mellanox Technologies Aggregation Node") or named "localhost" have no host and are only
//    counted;
//  - a two-column `node switch` map (`#` comments, blank lines), for RoCE fabrics or hand-kept
//    inventories.
// The switch a CA port is cabled to is that port's leaf. In a rail-optimised fabric (DGX SuperPOD)
// a host's HCAs sit on different leaves, so leaves are per (host, device).
//
// Truncated output (a record with no port lines, a port line outside any record) is rejected with
// DataLoss naming the line; text that is none of the formats with InvalidArgument. Pure parsing:
// the caller reads the file.
#ifndef RINGSIDE_ANALYSIS_TOPOLOGY_H_
#define RINGSIDE_ANALYSIS_TOPOLOGY_H_

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside::analysis {

struct LeafPort {
  std::string id;    // switch GUID "0x2c5eab0300b87b40", or the switch name of a node→switch map
  std::string name;  // its node description ("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"), or the id
  int port = 0;      // the switch port the HCA is cabled to; 0 when unknown
  // The switch port's name when it has no number (LLDP's port id: "Ethernet12", "swp3"); "".
  std::string port_name;
  bool operator==(const LeafPort&) const = default;
};

struct HcaAttachment {
  std::string host;         // empty for a CA without a host name
  std::string device;       // "mlx5_5", "HCA-6", "ibp11s0f0"; empty when the description has none
  std::string description;  // the CA's node description as given
  std::string ca_guid;      // "0xe09d7303007a4bd8"; empty in a node→switch map
  int ca_port = 0;          // 0 when unknown
  LeafPort leaf;
  // A host-level entry (a `node switch` line, an LLDP neighbour): LeafOf answers with it for any
  // device of the host that no entry names exactly.
  bool any_device = false;
  bool operator==(const HcaAttachment&) const = default;
};

// A cable between two switches (a switch record's port line to another switch), by switch id
// (as LeafPort::id) and port, the lower (id, port) first. Kept from ibnetdiscover output (records
// and -p) and subnet discovery; not used by the detectors, written back by FormatIbnetdiscover.
struct SwitchLink {
  std::string a_id;
  int a_port = 0;
  std::string b_id;
  int b_port = 0;
  auto operator<=>(const SwitchLink&) const = default;
};

class Topology {
 public:
  enum class Format { kAuto, kIbnetdiscover, kIbnetdiscoverPorts, kNodeSwitchMap };

  Topology() = default;
  static absl::StatusOr<Topology> Parse(absl::string_view text, Format format = Format::kAuto);
  // From attachments already known (a merge, the Query API's reply). `switches` maps switch id to
  // name; every attachment's leaf is added to it. `cas`: CA nodes, at least the named attachments'.
  // `switch_links`: cables between switches; their ends are added to `switches` too.
  // `switch_ports`: switch id → its port count, where known.
  static Topology FromAttachments(Format format, std::vector<HcaAttachment> attachments,
                                  std::map<std::string, std::string> switches = {},
                                  std::vector<SwitchLink> switch_links = {},
                                  std::map<std::string, int> switch_ports = {});

  Format format() const { return format_; }

  // Lookups. A host matches exactly, else by its short name (up to the first '.') on either side.
  std::vector<const HcaAttachment*> HcasOf(absl::string_view host) const;
  // The leaf id of a host's device (and port, when given); "" when unknown. A node→switch map
  // answers for any device of the node.
  std::string LeafOf(absl::string_view host, absl::string_view device,
                     absl::string_view port = {}) const;
  // Every leaf of a host (sorted, unique).
  std::vector<std::string> LeavesOf(absl::string_view host) const;
  // Hosts with an HCA on a leaf (sorted).
  std::vector<std::string> HostsOn(absl::string_view leaf) const;
  // A leaf's description, or its id when it has none; "" for an unknown id.
  std::string LeafName(absl::string_view leaf) const;

  const std::vector<HcaAttachment>& attachments() const { return attachments_; }
  const std::map<std::string, std::string>& switch_names() const { return switches_; }  // id → name
  // Switch-to-switch cables (sorted, unique); ports per switch as its record's header gives them
  // (ibnetdiscover records only; absent: unknown).
  const std::vector<SwitchLink>& switch_links() const { return switch_links_; }
  const std::map<std::string, int>& switch_ports() const { return switch_ports_; }
  size_t hosts() const { return hosts_.size(); }
  size_t switches() const { return switches_.size(); }
  size_t leaves() const { return leaf_hosts_.size(); }
  size_t cas() const { return cas_; }                  // CA nodes (ibnetdiscover)
  size_t unnamed_cas() const { return unnamed_cas_; }  // of which without a host name
  // Lines skipped outside any record (tool warnings on stdout, stray text), with their number.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  friend class TopologyBuilder;
  void Index();
  const std::vector<size_t>* Find(absl::string_view host) const;

  Format format_ = Format::kAuto;
  std::vector<HcaAttachment> attachments_;
  std::map<std::string, std::string> switches_;  // id → name
  std::vector<SwitchLink> switch_links_;
  std::map<std::string, int> switch_ports_;
  std::set<std::string> hosts_;
  absl::flat_hash_map<std::string, std::vector<size_t>> by_host_;   // full name → attachments
  absl::flat_hash_map<std::string, std::vector<size_t>> by_short_;  // short name → attachments
  std::map<std::string, std::set<std::string>> leaf_hosts_;
  size_t cas_ = 0;
  size_t unnamed_cas_ = 0;
  std::vector<std::string> warnings_;
};

// Splits a CA node description into host and device: "a08-p1-dgx-04-c01 mlx5_5" → {host, mlx5_5};
// "node17" → {node17, ""}; vendor defaults and "localhost ..." → {"", ""}.
struct HostDevice {
  std::string host;
  std::string device;
};
HostDevice SplitNodeDescription(absl::string_view description);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_TOPOLOGY_H_
