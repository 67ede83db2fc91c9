#include "collectors/ibmad/scan_targets.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringside::collectors {
namespace {

constexpr uint32_t kMaxUnicastLid = 0xBFFF;
constexpr uint32_t kMaxPort = 254;  // 255 is PortSelect's "all ports" aggregate

absl::StatusOr<uint32_t> ParseNumber(absl::string_view s, absl::string_view what) {
  uint32_t v = 0;
  bool ok = false;
  if (absl::StartsWithIgnoreCase(s, "0x")) {
    ok = s.size() > 2 && absl::SimpleHexAtoi(s.substr(2), &v);
  } else {
    ok = !s.empty() && std::all_of(s.begin(), s.end(), absl::ascii_isdigit) &&
         absl::SimpleAtoi(s, &v);
  }
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad ", what, " \"", s, "\""));
  return v;
}

absl::StatusOr<uint8_t> ParsePort(absl::string_view s) {
  absl::StatusOr<uint32_t> v = ParseNumber(s, "port");
  if (!v.ok()) return v.status();
  if (*v < 1 || *v > kMaxPort) {
    return absl::InvalidArgumentError(absl::StrCat("port ", s, " out of range 1..", kMaxPort));
  }
  return static_cast<uint8_t>(*v);
}

absl::Status ParsePorts(absl::string_view spec, std::vector<uint8_t>& ports) {
  if (spec == "all" || spec == "*") return absl::OkStatus();
  for (absl::string_view item : absl::StrSplit(spec, ',')) {
    std::vector<absl::string_view> range = absl::StrSplit(item, absl::MaxSplits('-', 1));
    absl::StatusOr<uint8_t> first = ParsePort(range[0]);
    if (!first.ok()) return first.status();
    uint8_t last = *first;
    if (range.size() == 2) {
      absl::StatusOr<uint8_t> l = ParsePort(range[1]);
      if (!l.ok()) return l.status();
      if (*l < *first) return absl::InvalidArgumentError(absl::StrCat("empty port range ", item));
      last = *l;
    }
    for (uint32_t p = *first; p <= last; ++p) {
      if (std::find(ports.begin(), ports.end(), p) == ports.end()) {
        ports.push_back(static_cast<uint8_t>(p));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ScanTarget>> ParseScanTargets(absl::string_view text) {
  std::vector<ScanTarget> targets;
  for (absl::string_view piece :
       absl::StrSplit(text, absl::ByAnyChar("; \t\n"), absl::SkipEmpty())) {
    std::vector<absl::string_view> parts = absl::StrSplit(piece, absl::MaxSplits(':', 1));
    absl::StatusOr<uint32_t> lid = ParseNumber(parts[0], "LID");
    if (!lid.ok()) return lid.status();
    if (*lid < 1 || *lid > kMaxUnicastLid) {
      return absl::InvalidArgumentError(
          absl::StrCat("LID ", parts[0], " is not a unicast LID (1..0xBFFF)"));
    }
    ScanTarget t;
    t.lid = static_cast<uint16_t>(*lid);
    if (parts.size() == 2) {
      if (parts[1].empty()) {
        return absl::InvalidArgumentError(absl::StrCat("no ports after ':' in \"", piece, "\""));
      }
      if (absl::Status s = ParsePorts(parts[1], t.ports); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(s.message(), " in \"", piece, "\""));
      }
    }
    targets.push_back(std::move(t));
  }
  return targets;
}

std::string ScanTargetsToString(const std::vector<ScanTarget>& targets) {
  std::vector<std::string> pieces;
  for (const ScanTarget& t : targets) {
    std::string s = absl::StrCat(t.lid);
    if (!t.ports.empty()) {
      absl::StrAppend(&s, ":", absl::StrJoin(t.ports, ",", [](std::string* out, uint8_t p) {
        absl::StrAppend(out, p);
      }));
    }
    pieces.push_back(std::move(s));
  }
  return absl::StrJoin(pieces, ";");
}

}  // namespace ringside::collectors
