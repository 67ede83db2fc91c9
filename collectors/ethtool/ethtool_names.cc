#include "collectors/ethtool/ethtool_names.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ringside::collectors {
namespace {

// Where a "prio<N>" token starts and how long it is, if the name has one.
struct PrioToken {
  size_t pos = absl::string_view::npos;
  size_t len = 0;
  int value = -1;
};

PrioToken FindPrioToken(absl::string_view name) {
  constexpr absl::string_view kPrio = "prio";
  for (size_t pos = name.find(kPrio); pos != absl::string_view::npos;
       pos = name.find(kPrio, pos + 1)) {
    if (pos != 0 && name[pos - 1] != '_') continue;
    size_t end = pos + kPrio.size();
    int value = 0;
    size_t digits = 0;
    while (end < name.size() && absl::ascii_isdigit(name[end]) && digits < 3) {
      value = value * 10 + (name[end] - '0');
      ++end;
      ++digits;
    }
    if (digits == 0 || digits > 2 || value > 15) continue;
    if (end != name.size() && name[end] != '_') continue;
    return PrioToken{pos, end - pos, value};
  }
  return PrioToken{};
}

// "<rx|tx>_prio<p>_<suffix>" with p in 0..7: the priority, else -1.
int PfcPriority(absl::string_view name, absl::string_view suffix) {
  if (!absl::StartsWith(name, "rx_prio") && !absl::StartsWith(name, "tx_prio")) return -1;
  if (!absl::EndsWith(name, suffix)) return -1;
  PrioToken t = FindPrioToken(name);
  if (t.pos != 3 || t.value > 7) return -1;
  // Nothing between the priority and the suffix: "rx_prio3_pause" but not "rx_prio3_xpause".
  if (t.pos + t.len + suffix.size() != name.size()) return -1;
  return t.value;
}

bool IsRingEcnMark(absl::string_view name) {
  // rx<i>_ecn_mark
  if (!absl::StartsWith(name, "rx") || !absl::EndsWith(name, "_ecn_mark")) return false;
  absl::string_view ring = name.substr(2, name.size() - 2 - 9);
  return !ring.empty() && std::all_of(ring.begin(), ring.end(), absl::ascii_isdigit);
}

std::string PriorityList(uint8_t mask) {
  std::string out;
  for (int p = 0; p < 8; ++p) {
    if ((mask & (1u << p)) == 0) continue;
    if (!out.empty()) out += ",";
    absl::StrAppend(&out, p);
  }
  return out.empty() ? "none" : out;
}

const char* Bool(bool b) { return b ? "true" : "false"; }

}  // namespace

int8_t EthtoolPriority(absl::string_view name) {
  return static_cast<int8_t>(FindPrioToken(name).value);
}

std::string EthtoolNameTemplate(absl::string_view name) {
  PrioToken t = FindPrioToken(name);
  if (t.value < 0) return std::string(name);
  return absl::StrCat(name.substr(0, t.pos), "prio<N>", name.substr(t.pos + t.len));
}

Unit EthtoolUnit(absl::string_view name) {
  if (absl::EndsWith(name, "_pause_duration")) return Unit::kMicroseconds;
  absl::string_view stem = name;
  if (absl::ConsumeSuffix(&stem, "_bytes_phy") || absl::ConsumeSuffix(&stem, "_bytes")) {
    // A size bin (rx_64_bytes_phy, rx_65_to_127_bytes_phy, ... rx_8192_to_10239_bytes_phy)
    // counts packets of that size, not bytes.
    // Its last word is a number ("rx_prio3_bytes" has "prio3": bytes).
    const size_t word = stem.rfind('_');
    const absl::string_view last = word == absl::string_view::npos ? stem : stem.substr(word + 1);
    if (!last.empty() && std::all_of(last.begin(), last.end(), [](char ch) {
          return absl::ascii_isdigit(static_cast<unsigned char>(ch));
        })) {
      return Unit::kPackets;
    }
    return Unit::kBytes;
  }
  if (absl::EndsWith(name, "_packets") || absl::EndsWith(name, "_packets_phy")) {
    return Unit::kPackets;
  }
  return Unit::kCount;
}

SeriesKind EthtoolKind(absl::string_view name) {
  if (name == "peer_ifindex" || name == "outbound_pci_stalled_rd" ||
      name == "outbound_pci_stalled_wr") {
    return SeriesKind::kGauge;
  }
  return SeriesKind::kCounter;
}

bool EthtoolCounterIs32Bit(absl::string_view name) {
  // mlx5 fills these from 32-bit sources (MLX5_GET of a 32-bit field, READ_CTR32) into the u64
  // ethtool reports: they wrap at 2^32.
  return name == "link_down_events_phy" || absl::EndsWith(name, "_pci_signal_integrity") ||
         (absl::StartsWith(name, "outbound_pci_stalled_") && absl::EndsWith(name, "_events"));
}

SeriesDef EthtoolSeriesDef(const std::string& ifname, const std::string& name) {
  SeriesDef def;
  def.source = "ethtool";
  def.device = ifname;
  def.counter = name;
  def.kind = EthtoolKind(name);
  def.width = def.kind != SeriesKind::kCounter ? 0 : EthtoolCounterIs32Bit(name) ? 32 : 64;
  def.unit = EthtoolUnit(name);
  def.priority = EthtoolPriority(name);
  return def;
}

EthtoolCapabilities EthtoolCapabilitiesFromNames(const std::vector<std::string>& names) {
  EthtoolCapabilities c;
  for (const std::string& n : names) {
    if (int p = PfcPriority(n, "_pause"); p >= 0) c.pfc_pause |= 1u << p;
    if (int p = PfcPriority(n, "_pause_duration"); p >= 0) c.pfc_pause_duration |= 1u << p;
    if (int p = PfcPriority(n, "_pause_transition"); p >= 0) c.pfc_pause_transition |= 1u << p;
    if (absl::StartsWith(n, "rx_")) {
      if (int p = PfcPriority(n, "_marked"); p >= 0) c.ecn_marks |= 1u << p;
    }
    if (n == "rx_global_pause" || n == "tx_global_pause") c.global_pause = true;
    if (n == "rx_global_pause_duration" || n == "tx_global_pause_duration") {
      c.global_pause_duration = true;
    }
    if (n == "tx_pause_storm_warning_events" || n == "tx_pause_storm_error_events") {
      c.pause_storm_events = true;
    }
    if (n == "link_down_events_phy") c.link_down_events = true;
    if (n == "rx_discards_phy") c.rx_discards_phy = true;
    if (n == "tx_discards_phy") c.tx_discards_phy = true;
    if (IsRingEcnMark(n)) c.ring_ecn_marks = true;
  }
  return c;
}

InfoRecord EthtoolCapabilitiesRecord(const std::string& ifname, EthtoolSupport support,
                                     size_t n_stats, const EthtoolCapabilities& caps,
                                     absl::string_view pause_config, size_t duplicate_names) {
  InfoRecord r{"ethtool_caps", ifname, "", {}};
  auto& l = r.labels;
  switch (support) {
    case EthtoolSupport::kSupported:
      l["stats"] = "supported";
      break;
    case EthtoolSupport::kUnsupported:
      l["stats"] = "unsupported";
      break;
    case EthtoolSupport::kError:
      l["stats"] = "error";
      break;
  }
  l["n_stats"] = absl::StrCat(n_stats);
  l["pfc_priorities"] = PriorityList(caps.pfc_pause);
  l["pfc_duration_priorities"] = PriorityList(caps.pfc_pause_duration);
  l["pfc_transition_priorities"] = PriorityList(caps.pfc_pause_transition);
  l["ecn_mark_priorities"] = PriorityList(caps.ecn_marks);
  l["global_pause"] = Bool(caps.global_pause);
  l["global_pause_duration"] = Bool(caps.global_pause_duration);
  l["pause_storm_events"] = Bool(caps.pause_storm_events);
  l["link_down_events"] = Bool(caps.link_down_events);
  l["rx_discards_phy"] = Bool(caps.rx_discards_phy);
  l["tx_discards_phy"] = Bool(caps.tx_discards_phy);
  l["ring_ecn_marks"] = Bool(caps.ring_ecn_marks);
  l["pause_config"] = std::string(pause_config);
  if (duplicate_names > 0) l["duplicate_names"] = absl::StrCat(duplicate_names);
  return r;
}

std::string FormatPauseConfig(const EthtoolPauseParam& p) {
  auto on = [](bool b) { return b ? "on" : "off"; };
  return absl::StrCat("rx=", on(p.rx_pause), ",tx=", on(p.tx_pause), ",autoneg=", on(p.autoneg));
}

}  // namespace ringside::collectors
