#include "daemon/aggregator/alerts/repeated_flags.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringside::daemon {

void MergeRepeatedFlag(std::vector<std::string>& args, absl::string_view name) {
  const std::string long_eq = absl::StrCat("--", name, "=");
  const std::string short_eq = absl::StrCat("-", name, "=");
  const std::string long_bare = absl::StrCat("--", name);
  const std::string short_bare = absl::StrCat("-", name);
  std::vector<std::string> out;
  std::vector<std::string> values;
  int first = -1;
  bool seen = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    std::string value;
    bool match = false;
    if (i > 0 && (absl::StartsWith(a, long_eq) || absl::StartsWith(a, short_eq))) {
      value = a.substr(a.find('=') + 1);
      match = true;
    } else if (i > 0 && (a == long_bare || a == short_bare) && i + 1 < args.size()) {
      value = args[++i];
      match = true;
    }
    if (!match) {
      out.push_back(a);
      continue;
    }
    seen = true;
    if (first < 0) {
      first = static_cast<int>(out.size());
      out.push_back("");
    }
    for (std::string& v : SplitList(value)) values.push_back(std::move(v));
  }
  if (seen) out[static_cast<size_t>(first)] = absl::StrCat(long_eq, absl::StrJoin(values, ","));
  args = std::move(out);
}

std::vector<std::string> SplitList(absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (!part.empty()) out.emplace_back(part);
  }
  return out;
}

}  // namespace ringside::daemon
