// Command-line conventions shared by the binaries.
#ifndef RINGSIDE_DAEMON_COMMON_FLAGS_H_
#define RINGSIDE_DAEMON_COMMON_FLAGS_H_

#include <string>
#include <vector>

namespace ringside::daemon {

// Abseil flags are spelled with underscores; ringside documents them with dashes
// (--sysfs-root). Returns argv with the dashes inside each flag *name* turned into underscores
// ("--sysfs-root=/a-b" → "--sysfs_root=/a-b"), and so are dots, for the Prometheus spelling
// "--web.config.file" of --web-config-file; values and positional arguments are untouched,
// and everything after "--" is left alone.
std::vector<std::string> NormalizeFlagNames(int argc, char** argv);

// Pointers into `args` for absl::ParseCommandLine. `args` must outlive them.
std::vector<char*> ArgvPointers(std::vector<std::string>& args);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_FLAGS_H_
