#include "collectors/ethtool/ethtool_text.h"

#include <limits>
#include <unordered_set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "collectors/common/parse.h"

namespace ringside::collectors {
namespace {

bool IsHeader(absl::string_view line) {
  // `ethtool -S` and, with --all-groups, its "Standard stats for <if>:" sections.
  return line == "NIC statistics:" ||
         (absl::StartsWith(line, "Standard stats for ") && absl::EndsWith(line, ":"));
}

}  // namespace

EthtoolText ParseEthtoolText(absl::string_view text) {
  EthtoolText out;
  std::unordered_set<std::string> seen;
  auto malformed = [&out](absl::string_view line) {
    if (out.malformed++ == 0) out.first_malformed = std::string(line.substr(0, 80));
  };
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#' || IsHeader(line) || line == "no stats available") continue;
    const size_t colon = line.rfind(':');
    if (colon == absl::string_view::npos) {
      malformed(line);
      continue;
    }
    absl::string_view name = absl::StripTrailingAsciiWhitespace(line.substr(0, colon));
    absl::string_view value_text = line.substr(colon + 1);
    // ethtool prints ": " before the value; a value glued to the colon is not its output.
    if (name.empty() || value_text.empty() || !absl::ascii_isspace(value_text[0])) {
      malformed(line);
      continue;
    }
    absl::StatusOr<uint64_t> value = ParseUint64(value_text);
    if (!value.ok()) {
      malformed(line);
      continue;
    }
    if (name == "ERROR") {
      out.error = *value > static_cast<uint64_t>(std::numeric_limits<int>::max())
                      ? std::numeric_limits<int>::max()
                      : static_cast<int>(*value);
      break;
    }
    if (!seen.emplace(std::string(name)).second) {
      out.duplicates.emplace_back(name);
      continue;
    }
    out.names.emplace_back(name);
    out.values.push_back(*value);
  }
  return out;
}

std::string FormatEthtoolText(const std::vector<std::string>& names,
                              const std::vector<uint64_t>& values) {
  std::string out = "NIC statistics:\n";
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    absl::StrAppend(&out, "     ", names[i], ": ", values[i], "\n");
  }
  return out;
}

}  // namespace ringside::collectors
