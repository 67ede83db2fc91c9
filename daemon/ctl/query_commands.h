// The on-call subcommands of `ringside`, clients of the aggregator's Query API (query.proto), one
// file each: incidents.cc, incident.cc, links.cc, node.cc, stragglers.cc, watch.cc, status.cc,
// topology.cc.
// Their shared pieces: query_client.h (flags, connection, errors), table.h, relative_time.h,
// incident_text.h, cause_chain.h, query_json.h.
#ifndef RINGSIDE_DAEMON_CTL_QUERY_COMMANDS_H_
#define RINGSIDE_DAEMON_CTL_QUERY_COMMANDS_H_

#include <string>
#include <vector>

#include "daemon/ctl/command.h"

namespace ringside::daemon::ctl {

int RunIncidents(const std::vector<std::string>& args, CommandContext& ctx);
int RunIncident(const std::vector<std::string>& args, CommandContext& ctx);
int RunLinks(const std::vector<std::string>& args, CommandContext& ctx);
int RunNode(const std::vector<std::string>& args, CommandContext& ctx);
int RunStragglers(const std::vector<std::string>& args, CommandContext& ctx);
int RunWatch(const std::vector<std::string>& args, CommandContext& ctx);
int RunStatus(const std::vector<std::string>& args, CommandContext& ctx);
int RunTopology(const std::vector<std::string>& args, CommandContext& ctx);

}  // namespace ringside::daemon::ctl

#endif  // RINGSIDE_DAEMON_CTL_QUERY_COMMANDS_H_
