// The subcommands of `ringside`. A new subcommand adds its header and one line here.
#include "daemon/ctl/command.h"
#include "daemon/ctl/import_trace.h"

namespace ringside::daemon::ctl {

const std::vector<Command>& Commands() {
  static const auto* commands = new std::vector<Command>{
      {"import-trace",
       "Import a trace (straggler-analysis CSV, PyTorch Flight Recorder JSON) as collective "
       "records",
       &RunImportTrace},
  };
  return *commands;
}

}  // namespace ringside::daemon::ctl
