// `ringside incidents`: the incident list (ListIncidents), newest first.
#include <ostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/ctl/fleet.h"
#include "daemon/ctl/fleet_merge.h"
#include "daemon/ctl/incident_text.h"
#include "daemon/ctl/query_client.h"
#include "daemon/ctl/query_commands.h"
#include "daemon/ctl/query_json.h"
#include "daemon/ctl/relative_time.h"

namespace ringside::daemon::ctl {
namespace {

constexpr char kName[] = "incidents";

const std::vector<FlagSpec>& Specs() {
  static const auto* specs = new std::vector<FlagSpec>{
      {"open", "", false, "", "only incidents open now", ""},
      {"kind", "", true, "KIND",
       "only this kind: link_down, link_flapping, link_degraded, pause_storm, congestion, "
       "straggler, job_slowdown, gpu_throttled, gpu_xid, gpu_memory_error, gpu_pcie_degraded",
       ""},
      {"node", "", true, "NODE", "only incidents on this node", ""},
      {"job", "", true, "JOB", "only incidents of this job, or that affect it", ""},
      {"since", "", true, "WHEN",
       "only incidents updated since: a duration ago (90m, 2h, 1d) or an RFC 3339 time", ""},
      {"limit", "", true, "N", "at most N incidents", "100"},
  };
  return *specs;
}

constexpr char kUsage[] =
    "Usage: ringside incidents [--open] [--kind K] [--node N] [--job J] [--since WHEN] "
    "[--limit N]\n"
    "\n"
    "Lists incidents, newest first: id, kind, severity, state, entity, when it opened and last\n"
    "changed, and its summary. `ringside incident ID` shows one in full, with its causes.\n"
    "With several aggregators, each incident is listed once (by its key, shown in a KEY column;\n"
    "the ID is the local id of the aggregator whose copy is shown) and --limit applies after the\n"
    "merge.\n"
    "\n"
    "Exit codes: 0 listed (none open, when --open); 1 with --open, when any incident is open;\n"
    "2 usage error or the aggregator could not be asked.\n";

}  // namespace

int RunIncidents(const std::vector<std::string>& argv, CommandContext& ctx) {
  QueryInvocation q;
  if (auto code = PrepareQueryCommand(kName, kUsage, Specs(), argv, ctx, q)) return *code;
  if (!q.args.positional.empty()) {
    return FailCommand(
        ctx, kName,
        absl::StrCat("unexpected argument \"", q.args.positional[0], "\" (see --help)"));
  }
  const absl::Time now = absl::Now();
  v1::ListIncidentsRequest req;
  req.set_open_only(q.args.Flag("open"));
  req.set_kind(q.args.Get("kind"));
  req.set_node(q.args.Get("node"));
  req.set_job(q.args.Get("job"));
  if (q.args.Has("since")) {
    absl::StatusOr<int64_t> since = ParseSince(q.args.Get("since"), now);
    if (!since.ok()) return FailCommand(ctx, kName, std::string(since.status().message()));
    req.set_since_unix_nanos(*since);
  }
  if (q.args.Has("limit")) {
    uint32_t limit = 0;
    if (!absl::SimpleAtoi(q.args.Get("limit"), &limit) || limit == 0) {
      return FailCommand(ctx, kName,
                         absl::StrCat("--limit \"", q.args.Get("limit"), "\" is not a count > 0"));
    }
    req.set_limit(limit);
  }
  auto answers = Gather(q.fleet->All<v1::ListIncidentsResponse>(
                            [&req](QueryClient& c) { return c.ListIncidents(req); }),
                        ctx.err);
  if (!answers.ok()) return FailCommand(ctx, kName, std::string(answers.status().message()));
  std::vector<const Incidents*> lists;
  for (const auto& a : *answers) lists.push_back(&a.value.incidents());
  v1::ListIncidentsResponse merged;
  *merged.mutable_incidents() = MergeIncidents(lists, req.limit() == 0 ? 100 : req.limit());
  const v1::ListIncidentsResponse* resp = &merged;

  if (q.format == OutputFormat::kJson) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::Incident& i : resp->incidents()) out.push_back(IncidentJson(i));
    WriteJson(out, ctx.out);
  } else if (resp->incidents().empty()) {
    ctx.out << (req.open_only() ? "No open incidents.\n" : "No incidents.\n");
  } else {
    IncidentsTable(resp->incidents(), now, /*with_key=*/q.fleet->many()).Render(ctx.out);
  }
  ctx.out.flush();
  return req.open_only() && !resp->incidents().empty() ? kExitProblems : kExitOk;
}

}  // namespace ringside::daemon::ctl
