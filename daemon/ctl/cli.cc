#include "daemon/ctl/cli.h"

#include <algorithm>
#include <ostream>

#ifndef RINGSIDE_VERSION
#define RINGSIDE_VERSION "unknown"
#endif

namespace ringside::daemon::ctl {
namespace {

void Usage(std::ostream& out) {
  out << "ringside: the command line of ringside (GPU cluster network and straggler monitor).\n"
         "\n"
         "Usage: ringside COMMAND [flags] [args]\n"
         "\n"
         "Commands:\n";
  size_t width = 4;
  for (const Command& c : Commands()) width = std::max(width, std::string(c.name).size());
  for (const Command& c : Commands()) {
    out << "  " << c.name << std::string(width + 2 - std::string(c.name).size(), ' ') << c.summary
        << "\n";
  }
  out << "  help" << std::string(width - 2, ' ') << "Show a command's help: ringside help COMMAND\n"
      << "\n"
         "Run 'ringside COMMAND --help' for its flags. --version prints the version.\n"
         "Exit codes: 0 ok, 1 problems found, 2 error.\n";
}

const Command* Find(const std::string& name) {
  for (const Command& c : Commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

}  // namespace

int RunCli(const std::vector<std::string>& args, CommandContext& ctx) {
  if (args.empty()) {
    Usage(ctx.err);
    return kExitError;
  }
  const std::string& name = args[0];
  if (name == "-h" || name == "--help") {
    Usage(ctx.out);
    return kExitOk;
  }
  if (name == "--version" || name == "version") {
    ctx.out << "ringside " << RINGSIDE_VERSION << "\n";
    return kExitOk;
  }
  if (name == "help") {
    if (args.size() < 2) {
      Usage(ctx.out);
      return kExitOk;
    }
    const Command* c = Find(args[1]);
    if (c == nullptr) {
      ctx.err << "ringside: unknown command \"" << args[1] << "\"\n";
      return kExitError;
    }
    return c->run({"--help"}, ctx);
  }
  const Command* c = Find(name);
  if (c == nullptr) {
    ctx.err << "ringside: unknown command \"" << name << "\"\n\n";
    Usage(ctx.err);
    return kExitError;
  }
  return c->run(std::vector<std::string>(args.begin() + 1, args.end()), ctx);
}

}  // namespace ringside::daemon::ctl
