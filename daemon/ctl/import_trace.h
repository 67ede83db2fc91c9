// `ringside import-trace`: reads offline traces into collective records and prints them.
#ifndef RINGSIDE_DAEMON_CTL_IMPORT_TRACE_H_
#define RINGSIDE_DAEMON_CTL_IMPORT_TRACE_H_

#include <string>
#include <vector>

#include "daemon/ctl/command.h"

namespace ringside::daemon::ctl {

int RunImportTrace(const std::vector<std::string>& args, CommandContext& ctx);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_IMPORT_TRACE_H_
