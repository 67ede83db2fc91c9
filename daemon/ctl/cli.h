// The `ringside` command line: dispatches to a subcommand (command.h).
#ifndef RINGSIDE_DAEMON_CTL_CLI_H_
#define RINGSIDE_DAEMON_CTL_CLI_H_

#include <string>
#include <vector>

#include "daemon/ctl/command.h"

namespace ringside::daemon::ctl {

// `args` without the program name. Returns the exit code.
int RunCli(const std::vector<std::string>& args, CommandContext& ctx);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_CLI_H_
