#include "tests/testing/perfquery_text.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringside::testing {
namespace {

// "Lid 18 port 9 (CapMask: 0x1300 ...)" → lid, port, cap mask.
void ParseHeader(absl::string_view h, PerfqueryBlock& b) {
  std::vector<absl::string_view> words =
      absl::StrSplit(h, absl::ByAnyChar(" ():"), absl::SkipEmpty());
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == "Lid") (void)absl::SimpleAtoi(words[i + 1], &b.lid);
    if (words[i] == "port") (void)absl::SimpleAtoi(words[i + 1], &b.port);
    if (words[i] == "CapMask") {
      b.cap_mask =
          static_cast<uint32_t>(std::strtoul(std::string(words[i + 1]).c_str(), nullptr, 0));
    }
  }
}

}  // namespace

std::vector<PerfqueryBlock> ParsePerfquery(absl::string_view text) {
  std::vector<PerfqueryBlock> blocks;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, "# Port ")) {
      PerfqueryBlock b;
      b.extended = absl::StartsWith(line, "extended counters");
      ParseHeader(line, b);
      blocks.push_back(std::move(b));
      continue;
    }
    if (blocks.empty()) continue;
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    absl::string_view name = line.substr(0, colon);
    absl::string_view value = absl::StripLeadingAsciiWhitespace(line.substr(colon + 1));
    while (absl::ConsumePrefix(&value, ".")) {
    }
    if (name.empty() || value.empty()) continue;
    char* end = nullptr;
    const std::string v(absl::StripTrailingAsciiWhitespace(value));
    const uint64_t n = std::strtoull(v.c_str(), &end, 0);
    if (end == v.c_str() || *end != '\0') continue;
    blocks.back().fields[std::string(name)] = n;
  }
  return blocks;
}

absl::string_view ScanCounterOf(absl::string_view f) {
  static const std::pair<absl::string_view, absl::string_view> kNames[] = {
      {"SymbolErrorCounter", "symbol_error"},
      {"LinkErrorRecoveryCounter", "link_error_recovery"},
      {"LinkDownedCounter", "link_downed"},
      {"PortRcvErrors", "port_rcv_errors"},
      {"PortRcvRemotePhysicalErrors", "port_rcv_remote_physical_errors"},
      {"PortRcvSwitchRelayErrors", "port_rcv_switch_relay_errors"},
      {"PortXmitDiscards", "port_xmit_discards"},
      {"PortXmitConstraintErrors", "port_xmit_constraint_errors"},
      {"PortRcvConstraintErrors", "port_rcv_constraint_errors"},
      {"LocalLinkIntegrityErrors", "local_link_integrity_errors"},
      {"ExcessiveBufferOverrunErrors", "excessive_buffer_overrun_errors"},
      {"VL15Dropped", "VL15_dropped"},
      {"PortXmitData", "port_xmit_data"},
      {"PortRcvData", "port_rcv_data"},
      {"PortXmitPkts", "port_xmit_packets"},
      {"PortRcvPkts", "port_rcv_packets"},
      {"PortXmitWait", "port_xmit_wait"},
      {"PortUnicastXmitPkts", "unicast_xmit_packets"},
      {"PortUnicastRcvPkts", "unicast_rcv_packets"},
      {"PortMulticastXmitPkts", "multicast_xmit_packets"},
      {"PortMulticastRcvPkts", "multicast_rcv_packets"},
  };
  for (const auto& [pq, scan] : kNames) {
    if (pq == f) return scan;
  }
  return "";
}

}  // namespace ringside::testing
