// The subcommands of `ringside`. A new subcommand adds its header and one line here.
#include "daemon/ctl/command.h"
#include "daemon/ctl/import_trace.h"
#include "daemon/ctl/query_commands.h"

namespace ringside::daemon::ctl {

const std::vector<Command>& Commands() {
  static const auto* commands = new std::vector<Command>{
      {"status", "One screen of cluster health: nodes, links, open incidents, verdict", &RunStatus},
      {"incidents", "List incidents (--open, --kind, --node, --job, --since)", &RunIncidents},
      {"incident", "Show one incident in full, with its cause chain and blast radius",
       &RunIncident},
      {"watch", "Print open incidents, then every change as it happens, until Ctrl-C", &RunWatch},
      {"links", "List links and their health (--unhealthy, --flapping, --node)", &RunLinks},
      {"node", "Show one node: freshness, open incidents, links, counter rates", &RunNode},
      {"topology",
       "The fabric's topology: host ports and their switch ports, disagreements, --events",
       &RunTopology},
      {"stragglers", "Ranks that arrive last at their collectives, culprit first", &RunStragglers},
      {"import-trace",
       "Import a trace (straggler-analysis CSV, PyTorch Flight Recorder JSON) as collective "
       "records",
       &RunImportTrace},
  };
  return *commands;
}

}  // namespace ringside::daemon::ctl
