// Reads the LLDP neighbours lldpd has learnt, through liblldpctl and lldpd's control socket
// (/run/lldpd.socket, group _lldpd): no raw socket and no capability in the caller.
#ifndef RINGSIDE_COLLECTORS_LLDP_LLDP_CLIENT_H_
#define RINGSIDE_COLLECTORS_LLDP_LLDP_CLIENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringside::collectors {

// One remote port lldpd knows on one local interface. Strings are lldpctl's own renderings
// (a MAC chassis id is "aa:bb:cc:dd:ee:ff"); empty when the neighbour did not send the TLV.
struct LldpNeighbor {
  std::string netdev;              // the local interface
  std::string protocol;            // LLDP, CDPv2, ... (lldpd speaks several)
  std::string chassis_id_subtype;  // mac, ifname, local, ip, ...
  std::string chassis_id;
  std::string chassis_name;        // system name (the switch's host name)
  std::string chassis_descr;
  std::string port_id_subtype;     // ifname, mac, local, ...
  std::string port_id;
  std::string port_descr;
  std::string mgmt_addr;           // the first management address
  long pvid = 0;                   // 802.1 port VLAN id; 0 when not sent
  std::string vlans;               // 802.1 VLAN name TLVs: "100:storage,200:roce"
  int neighbors_on_port = 1;       // how many remote ports lldpd has on this interface

  bool operator==(const LldpNeighbor&) const = default;
};

struct LldpClientOptions {
  std::string socket_path = "/run/lldpd.socket";
  // liblldpctl, loaded at the first read (lldpctl_api.h).
  std::string library = "liblldpctl.so.4";
  // Each send and receive on the control socket; a stopped lldpd cannot hang the caller longer.
  absl::Duration io_timeout = absl::Seconds(2);
};

// Every neighbour of every interface lldpd watches, one entry per (interface, remote port),
// ordered by interface as lldpd lists them. NotFound: no socket or no liblldpctl; Unavailable: lldpd does not
// answer (not running, refused, timed out); PermissionDenied: not in the socket's group.
absl::StatusOr<std::vector<LldpNeighbor>> ReadLldpNeighbors(const LldpClientOptions& options);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_LLDP_LLDP_CLIENT_H_
