// Parser for the text `ethtool -S <if>` prints, for replaying captured data and for the simulator.
//
// The format: an optional "NIC statistics:" header, then one "     <name>: <value>" line per driver
// statistic, in the driver's order. Captures seen in the wild vary, and the parser takes them all:
// - the header and the indentation may be missing (some tools strip them);
// - "# ..." lines are comments (a capture often starts with the command that made it);
// - a name may contain spaces or ": " ("Tx LPI entry count", "[3]: tx_bytes"), so the value is what
//   follows the *last* ": ";
// - a line "ERROR: <errno>" records that the capture failed for this interface (the convention of
//   node_exporter's fixtures); parsing stops there and the stats before it are kept;
// - the same name twice keeps the first value (the driver's order is stable, so the first is
//   always the same counter) and lists the name in `duplicates`;
// - "no stats available" (what ethtool prints for a device without statistics) means no stats;
// - any other line is counted in `malformed` (e.g. the cut-off last line of a dump caught while
//   being written), never guessed at.
#ifndef RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_TEXT_H_
#define RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_TEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ringside::collectors {

struct EthtoolText {
  std::vector<std::string> names;       // in the capture's order, duplicates removed
  std::vector<uint64_t> values;         // parallel to names
  std::vector<std::string> duplicates;  // names seen again after their first line
  size_t malformed = 0;                 // lines that are none of the above
  std::string first_malformed;          // the first of them, cut to 80 characters
  std::optional<int> error;             // errno of an "ERROR: <n>" line
};

// Never fails: what it cannot read it counts in `malformed`.
EthtoolText ParseEthtoolText(absl::string_view text);

// The text `ethtool -S` prints for these stats (header and 5-space indentation), for writers of
// dumps (the simulator, tests).
std::string FormatEthtoolText(const std::vector<std::string>& names,
                              const std::vector<uint64_t>& values);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_ETHTOOL_ETHTOOL_TEXT_H_
