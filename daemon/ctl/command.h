// The `ringside` CLI is a dispatcher over subcommands, one file each (import_trace.cc, ...),
// listed in commands.cc. A subcommand parses its own flags (args.h), prints its own --help, and
// returns one of the exit codes below.
#ifndef RINGSIDE_DAEMON_CTL_COMMAND_H_
#define RINGSIDE_DAEMON_CTL_COMMAND_H_

#include <iosfwd>
#include <string>
#include <vector>

namespace ringside::daemon::ctl {

// Exit codes of every subcommand.
inline constexpr int kExitOk = 0;        // done, nothing to report
inline constexpr int kExitProblems = 1;  // done, and found problems (incidents, bad input rows)
inline constexpr int kExitError = 2;     // could not do it (usage, unreadable input, RPC failure)

struct CommandContext {
  std::ostream& out;
  std::ostream& err;
};

struct Command {
  const char* name;
  const char* summary;  // one line, for `ringside --help`
  // `args` are the arguments after the subcommand's name.
  int (*run)(const std::vector<std::string>& args, CommandContext& ctx);
};

// Every subcommand, in the order `ringside --help` lists them.
const std::vector<Command>& Commands();

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_COMMAND_H_
