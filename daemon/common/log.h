// One log line to stderr: "<program> <UTC time> <message>". Rate limiting is the caller's job.
#ifndef RINGSIDE_DAEMON_COMMON_LOG_H_
#define RINGSIDE_DAEMON_COMMON_LOG_H_

#include "absl/strings/string_view.h"

namespace ringside::daemon {

void SetLogProgram(absl::string_view program);
void LogLine(absl::string_view message);

}  // namespace ringside::daemon

#endif  // RINGSIDE_DAEMON_COMMON_LOG_H_
