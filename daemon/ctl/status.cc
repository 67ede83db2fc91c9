// `ringside status`: one screen of cluster health (GetStatus): nodes, links, jobs, open incidents
// and a verdict.
#include <map>
#include <ostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

constexpr char kName[] = "status";

const std::vector<FlagSpec>& Specs() {
  static const auto* specs = new std::vector<FlagSpec>{};
  return *specs;
}

constexpr char kUsage[] =
    "Usage: ringside status\n"
    "\n"
    "One screen of cluster health: nodes (and how many are stale: no data from their agent\n"
    "within the aggregator's --stale-after), links (and how many are unhealthy), jobs, open\n"
    "incidents by kind, the most severe open incidents, and a verdict.\n"
    "\n"
    "Exit codes: 0 healthy; 1 problems: an open critical incident or a stale node; 2 usage\n"
    "error or the aggregator could not be asked.\n"
    "With several aggregators: incidents are counted once each (by key); nodes and links are\n"
    "added up over aggregators whose counts differ (equal ones are taken for replicas).\n";

// With several aggregators, how many open incidents are asked of each.
constexpr uint32_t kOpenIncidentsLimit = 100000;

std::string Plural(uint64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

}  // namespace

int RunStatus(const std::vector<std::string>& argv, CommandContext& ctx) {
  QueryInvocation q;
  if (auto code = PrepareQueryCommand(kName, kUsage, Specs(), argv, ctx, q)) return *code;
  if (!q.args.positional.empty()) {
    return FailCommand(
        ctx, kName,
        absl::StrCat("unexpected argument \"", q.args.positional[0], "\" (see --help)"));
  }
  struct Answer {
    v1::ClusterStatus status;
    v1::ListIncidentsResponse open;  // with several aggregators: every open incident
  };
  const bool many = q.fleet->many();
  auto answers = Gather(q.fleet->All<Answer>([many](QueryClient& c) -> absl::StatusOr<Answer> {
    Answer a;
    absl::StatusOr<v1::ClusterStatus> s = c.GetStatus();
    if (!s.ok()) return s.status();
    a.status = *std::move(s);
    if (!many) return a;
    v1::ListIncidentsRequest req;
    req.set_open_only(true);
    req.set_limit(kOpenIncidentsLimit);
    absl::StatusOr<v1::ListIncidentsResponse> open = c.ListIncidents(req);
    if (!open.ok()) return open.status();
    a.open = *std::move(open);
    return a;
  }),
                        ctx.err);
  if (!answers.ok()) return FailCommand(ctx, kName, std::string(answers.status().message()));
  v1::ClusterStatus merged;
  std::vector<std::string> answered;
  for (const auto& a : *answers) answered.push_back(q.fleet->target(a.index));
  if (!many) {
    merged = std::move(answers->front().value.status);
  } else {
    std::vector<const v1::ClusterStatus*> statuses;
    std::vector<const Incidents*> lists;
    for (const auto& a : *answers) {
      statuses.push_back(&a.value.status);
      lists.push_back(&a.value.open.incidents());
    }
    merged = MergeStatus(statuses, MergeIncidents(lists, 0));
  }
  const v1::ClusterStatus* s = &merged;

  uint32_t critical = 0;
  for (const v1::Incident& i : s->open_incidents()) {
    if (i.severity() == "critical") ++critical;
  }
  const bool problems = critical > 0 || s->stale_nodes() > 0;

  if (q.format == OutputFormat::kJson) {
    WriteJson(StatusJson(*s), ctx.out);
    ctx.out.flush();
    return problems ? kExitProblems : kExitOk;
  }
  // Ages against the aggregator's clock, so a skewed laptop clock does not distort them.
  const absl::Time now =
      s->now_unix_nanos() != 0 ? absl::FromUnixNanos(s->now_unix_nanos()) : absl::Now();
  std::ostream& out = ctx.out;
  out << "Cluster status at "
      << Rfc3339(absl::ToUnixNanos(now) - absl::ToUnixNanos(now) % 1'000'000'000)
      << (answered.size() > 1 ? " (aggregators " : " (aggregator ")
      << absl::StrJoin(answered, ", ");
  if (!s->aggregator_version().empty()) out << ", version " << s->aggregator_version();
  out << ")\n\n";

  uint32_t open_total = 0;
  std::map<std::string, uint32_t> kinds(s->open_incidents_by_kind().begin(),
                                        s->open_incidents_by_kind().end());
  std::vector<std::string> kind_parts;
  for (const auto& [k, n] : kinds) {
    open_total += n;
    kind_parts.push_back(absl::StrCat(k, " ", n));
  }
  Table t({"", ""});
  t.AddRow({"Nodes:", absl::StrCat(s->nodes(), s->stale_nodes() > 0
                                                   ? absl::StrCat(" (", s->stale_nodes(), " STALE)")
                                                   : " (all current)")});
  t.AddRow({"Links:",
            absl::StrCat(s->links(), s->unhealthy_links() > 0
                                         ? absl::StrCat(" (", s->unhealthy_links(), " unhealthy)")
                                         : " (all healthy)")});
  t.AddRow({"Jobs:", s->jobs().empty() ? "none" : absl::StrJoin(s->jobs(), ", ")});
  t.AddRow(
      {"Open incidents:",
       open_total == 0 ? "none" : absl::StrCat(open_total, ": ", absl::StrJoin(kind_parts, ", "))});
  std::ostringstream h;
  t.Render(h);
  const std::string head = h.str();
  out << head.substr(head.find('\n') + 1);

  if (!s->open_incidents().empty()) {
    out << "\n";
    if (static_cast<uint32_t>(s->open_incidents_size()) < open_total) {
      out << "Most severe " << s->open_incidents_size()
          << " (ringside incidents --open for all):\n";
    }
    IncidentsTable(s->open_incidents(), now, /*with_key=*/many).Render(out);
  }

  out << "\n";
  if (!problems) {
    out << "Verdict: OK" << (open_total > 0 ? " (no critical incident, no stale node)" : "")
        << "\n";
  } else {
    std::vector<std::string> why;
    if (critical > 0)
      why.push_back(Plural(critical, "open critical incident", "open critical incidents"));
    if (s->stale_nodes() > 0) why.push_back(Plural(s->stale_nodes(), "stale node", "stale nodes"));
    out << "Verdict: PROBLEMS: " << absl::StrJoin(why, ", ") << "\n";
  }
  out.flush();
  return problems ? kExitProblems : kExitOk;
}

}  // namespace ringside::daemon::ctl
