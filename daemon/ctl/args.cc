#include "daemon/ctl/args.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace ringside::daemon::ctl {
namespace {

const FlagSpec* FindLong(const std::vector<FlagSpec>& specs, const std::string& name) {
  std::string dashed = absl::StrReplaceAll(name, {{"_", "-"}});
  for (const FlagSpec& s : specs) {
    if (s.name == dashed) return &s;
  }
  return nullptr;
}

const FlagSpec* FindShort(const std::vector<FlagSpec>& specs, char c) {
  for (const FlagSpec& s : specs) {
    if (s.short_name.size() == 1 && s.short_name[0] == c) return &s;
  }
  return nullptr;
}

}  // namespace

std::string ParsedArgs::Get(const std::string& name, const std::string& fallback) const {
  auto it = values.find(name);
  return it == values.end() ? fallback : it->second;
}

bool ParsedArgs::Flag(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return false;
  return it->second.empty() || it->second == "true" || it->second == "1" || it->second == "yes";
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& specs) {
  ParsedArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.positional.insert(out.positional.end(), args.begin() + static_cast<long>(i) + 1,
                            args.end());
      break;
    }
    if (a == "-h" || a == "--help") {
      out.help = true;
      continue;
    }
    if (a.size() < 2 || a[0] != '-') {
      out.positional.push_back(a);
      continue;
    }
    const FlagSpec* spec = nullptr;
    std::string value;
    bool has_value = false;
    if (absl::StartsWith(a, "--")) {
      std::string name = a.substr(2);
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
        has_value = true;
      }
      spec = FindLong(specs, name);
      if (spec == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
      }
    } else {
      spec = FindShort(specs, a[1]);
      if (spec == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag ", a));
      if (a.size() > 2) {
        value = a.substr(a[2] == '=' ? 3 : 2);
        has_value = true;
      }
    }
    if (spec->takes_value && !has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", spec->name, " needs a value"));
      }
      value = args[++i];
    }
    if (!spec->takes_value && has_value && value != "true" && value != "false" && value != "1" &&
        value != "0") {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", spec->name, " takes no value (or true/false)"));
    }
    if (!spec->takes_value && (value == "false" || value == "0")) {
      out.values.erase(spec->name);
      continue;
    }
    out.values[spec->name] = value;
  }
  return out;
}

std::string FlagsHelp(const std::vector<FlagSpec>& specs) {
  std::string out = "Flags:\n";
  std::vector<std::string> lefts;
  size_t width = 0;
  for (const FlagSpec& s : specs) {
    std::string left = s.short_name.empty() ? "      " : absl::StrCat("  -", s.short_name, ", ");
    absl::StrAppend(&left, "--", s.name);
    if (s.takes_value) absl::StrAppend(&left, "=", s.value_name.empty() ? "VALUE" : s.value_name);
    width = std::max(width, left.size());
    lefts.push_back(std::move(left));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    absl::StrAppend(&out, lefts[i], std::string(width + 2 - lefts[i].size(), ' '), specs[i].help);
    if (!specs[i].default_value.empty()) {
      absl::StrAppend(&out, " (default: ", specs[i].default_value, ")");
    }
    absl::StrAppend(&out, "\n");
  }
  const std::string help = "  -h, --help";
  absl::StrAppend(&out, help, std::string(std::max(width, help.size()) + 2 - help.size(), ' '),
                  "Show this help\n");
  return out;
}

}  // namespace ringside::daemon::ctl
