// ringside: the command-line tool. Thin: the dispatcher and the subcommands live in ringside_ctl.
#include <iostream>
#include <string>
#include <vector>

#include "daemon/ctl/cli.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  std::vector<std::string> args(argv + 1, argv + argc);
  ringside::daemon::ctl::CommandContext ctx{std::cout, std::cerr};
  int code = ringside::daemon::ctl::RunCli(args, ctx);
  std::cout.flush();
  return code;
}
