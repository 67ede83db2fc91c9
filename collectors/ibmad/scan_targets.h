// What the fabric scan reads: LIDs and their ports, and the text form used on command lines.
#ifndef RINGSIDE_COLLECTORS_IBMAD_SCAN_TARGETS_H_
#define RINGSIDE_COLLECTORS_IBMAD_SCAN_TARGETS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringside::collectors {

struct ScanTarget {
  uint16_t lid = 0;
  // Ports to read. Empty: every port of the node — 1..NumPorts of a switch, or the port the LID
  // belongs to on a CA or router (NodeInfo LocalPortNum; a CA's other ports have LIDs of their
  // own and are targets of their own).
  std::vector<uint8_t> ports;
};

// Parses "LID[:PORTS][;LID[:PORTS]...]": targets separated by ';' or whitespace; PORTS is a
// perfquery-style list of ports and ranges ("1,2,9-12") or "all" (also the meaning of no PORTS).
// LIDs are unicast (1..0xBFFF), decimal or 0x-hex; ports 1..254. Duplicate ports of one target
// are dropped. Errors are InvalidArgument naming the bad piece.
absl::StatusOr<std::vector<ScanTarget>> ParseScanTargets(absl::string_view text);

// The text form ParseScanTargets reads back ("18:1,9;105").
std::string ScanTargetsToString(const std::vector<ScanTarget>& targets);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_IBMAD_SCAN_TARGETS_H_
