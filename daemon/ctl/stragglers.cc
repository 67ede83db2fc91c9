// `ringside stragglers`: the ranks that most often arrive last at their collectives
// (TopStragglers), culprit first.
#include <algorithm>
#include <cmath>
#include <ostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/ctl/fleet.h"
#include "daemon/ctl/fleet_merge.h"
#include "daemon/ctl/incident_text.h"
#include "daemon/ctl/query_client.h"
#include "daemon/ctl/query_commands.h"
#include "daemon/ctl/query_json.h"
#include "daemon/ctl/relative_time.h"
#include "daemon/ctl/table.h"

namespace ringside::daemon::ctl {
namespace {

constexpr char kName[] = "stragglers";

const std::vector<FlagSpec>& Specs() {
  static const auto* specs = new std::vector<FlagSpec>{
      {"job", "", true, "JOB", "only ranks of this job", "every job"},
      {"limit", "", true, "N", "at most N ranks", "10"},
  };
  return *specs;
}

constexpr char kUsage[] =
    "Usage: ringside stragglers [--job J] [--limit N]\n"
    "\n"
    "Ranks by how often they arrive late at their collectives (everyone else waits for them),\n"
    "over the straggler detector's window (its last straggler.window instances):\n"
    "  POD        the Kubernetes pod running the rank (namespace/pod), when the plugin knew it\n"
    "  SCORE      share of recent collectives in which the rank arrived late\n"
    "  MARGIN     median lag behind the median rank, as a share of the collective\n"
    "  WAIT       share of the collective the rank spent waiting (low = the culprit)\n"
    "  WHERE      where its lateness was when late: host (enqueued late), gpu (enqueued on\n"
    "             time, kernel started late) or unknown (clocks not comparable); \"shared N\"\n"
    "             when N ranks time-share its GPU (their scheduling is not held against it)\n"
    "  INCIDENT   the open straggler incident that names the rank, if any\n"
    "\n"
    "Exit codes: 0 listed, no rank flagged; 1 a listed rank is flagged by an open straggler\n"
    "incident; 2 usage error or the aggregator could not be asked.\n";

std::string Percent(double v) {
  if (!std::isfinite(v)) return "-";
  return absl::StrFormat("%.0f%%", v * 100);
}

std::string WhereText(const v1::RankScore& r) {
  std::string where = r.where().empty() || r.score() <= 0 ? "-" : r.where();
  if (r.gpu_sharing_ranks() > 1) absl::StrAppend(&where, " (shared ", r.gpu_sharing_ranks(), ")");
  return where;
}

}  // namespace

int RunStragglers(const std::vector<std::string>& argv, CommandContext& ctx) {
  QueryInvocation q;
  if (auto code = PrepareQueryCommand(kName, kUsage, Specs(), argv, ctx, q)) return *code;
  if (!q.args.positional.empty()) {
    return FailCommand(
        ctx, kName,
        absl::StrCat("unexpected argument \"", q.args.positional[0], "\" (see --help)"));
  }
  v1::TopStragglersRequest req;
  req.set_job(q.args.Get("job"));
  if (q.args.Has("limit")) {
    uint32_t limit = 0;
    if (!absl::SimpleAtoi(q.args.Get("limit"), &limit) || limit == 0) {
      return FailCommand(ctx, kName,
                         absl::StrCat("--limit \"", q.args.Get("limit"), "\" is not a count > 0"));
    }
    req.set_limit(limit);
  }
  auto answers = Gather(q.fleet->All<v1::TopStragglersResponse>(
                            [&req](QueryClient& c) { return c.TopStragglers(req); }),
                        ctx.err);
  if (!answers.ok()) return FailCommand(ctx, kName, std::string(answers.status().message()));
  v1::TopStragglersResponse merged;
  if (answers->size() == 1) {
    merged = std::move(answers->front().value);
  } else {
    std::vector<const google::protobuf::RepeatedPtrField<v1::RankScore>*> lists;
    for (const auto& a : *answers) lists.push_back(&a.value.ranks());
    *merged.mutable_ranks() = MergeStragglers(lists, req.limit() == 0 ? 10 : req.limit());
  }
  const v1::TopStragglersResponse* resp = &merged;
  bool flagged = false;
  for (const v1::RankScore& r : resp->ranks()) flagged = flagged || r.flagged();

  if (q.format == OutputFormat::kJson) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::RankScore& r : resp->ranks()) out.push_back(RankScoreJson(r));
    WriteJson(out, ctx.out);
  } else if (resp->ranks().empty()) {
    ctx.out << "No collective records in the window"
            << (req.job().empty() ? "" : absl::StrCat(" for job ", req.job())) << ".\n";
  } else {
    Table t({"JOB", "RANK", "NODE", "POD", "COMM", "SCORE", "MARGIN", "WAIT", "WHERE",
             "INSTANCES", "INCIDENT"});
    for (size_t c : {1, 5, 6, 7, 9}) t.RightAlign(c);
    for (const v1::RankScore& r : resp->ranks()) {
      t.AddRow({r.job(), absl::StrCat(r.rank()), r.node().empty() ? "-" : r.node(),
                PodText(r.pod_namespace(), r.pod()), r.comm().empty() ? "-" : r.comm(),
                Percent(r.score()), Percent(r.margin()),
                Percent(r.wait_fraction()), WhereText(r), absl::StrCat(r.instances()),
                r.flagged() ? absl::StrCat("#", r.incident_id(), " straggler") : "-"});
    }
    t.Render(ctx.out);
  }
  ctx.out.flush();
  return flagged ? kExitProblems : kExitOk;
}

}  // namespace ringside::daemon::ctl
