// Repeatable list flags: Abseil keeps only the last occurrence of a flag, while
// --alertmanager-url and --webhook-url may be given several times (and each may hold a
// comma-separated list). MergeRepeatedFlag joins every occurrence into one before parsing.
#ifndef RINGSIDE_DAEMON_AGGREGATOR_ALERTS_REPEATED_FLAGS_H_
#define RINGSIDE_DAEMON_AGGREGATOR_ALERTS_REPEATED_FLAGS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ringside::daemon {

// In `args` (already through NormalizeFlagNames: underscores), replaces every "--name=v" and
// "--name v" (and single-dash forms) by one "--name=v1,v2,..." at the first one's place. Empty
// values are kept out of the list; arguments after "--" are left alone.
void MergeRepeatedFlag(std::vector<std::string>& args, absl::string_view name);

// "a, b,,c" → {"a", "b", "c"}.
std::vector<std::string> SplitList(absl::string_view list);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_AGGREGATOR_ALERTS_REPEATED_FLAGS_H_
