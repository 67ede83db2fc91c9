// A small flag parser for the subcommands of `ringside`, so each subcommand owns its flags and its
// --help (Abseil flags are process-global). Accepts --name=value, --name value, -o value, -ojson,
// boolean --name (or --name=true/false), "--" to end flags and "-" as a positional argument
// (stdin). Dashes and underscores in names are the same (--job-id, --job_id).
#ifndef RINGSIDE_DAEMON_CTL_ARGS_H_
#define RINGSIDE_DAEMON_CTL_ARGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringside::daemon::ctl {

struct FlagSpec {
  std::string name;         // long name, with dashes: "job-id"
  std::string short_name;   // "" or one letter: "o"
  bool takes_value = true;  // false: a boolean switch
  std::string value_name;   // for help: "FORMAT"
  std::string help;
  std::string default_value;  // for help only
};

struct ParsedArgs {
  std::map<std::string, std::string> values;  // by long name; the last one given wins
  std::vector<std::string> positional;
  bool help = false;  // -h or --help

  bool Has(const std::string& name) const { return values.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  // A boolean switch: given without a value, or with true/1/yes.
  bool Flag(const std::string& name) const;
};

// InvalidArgument for an unknown flag or a missing value.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& specs);

// The flags section of a --help text.
std::string FlagsHelp(const std::vector<FlagSpec>& specs);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_ARGS_H_
