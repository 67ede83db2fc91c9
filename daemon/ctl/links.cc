// `ringside links`: the state of every port, netdev and NVLink the aggregator knows (ListLinks).
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "daemon/ctl/fleet.h"
#include "daemon/ctl/fleet_merge.h"
#include "daemon/ctl/link_text.h"
#include "daemon/ctl/query_client.h"
#include "daemon/ctl/query_commands.h"
#include "daemon/ctl/query_json.h"
#include "daemon/ctl/relative_time.h"

namespace ringside::daemon::ctl {
namespace {

constexpr char kName[] = "links";

const std::vector<FlagSpec>& Specs() {
  static const auto* specs = new std::vector<FlagSpec>{
      {"unhealthy", "", false, "", "only links that are down or have an open incident", ""},
      {"flapping", "", false, "", "only links with down→up cycles in the flapping window", ""},
      {"node", "", true, "NODE", "only links of this node", ""},
  };
  return *specs;
}

constexpr char kUsage[] =
    "Usage: ringside links [--unhealthy] [--flapping] [--node N]\n"
    "\n"
    "Lists links (InfiniBand ports, netdevs, NVLinks): state, down→up cycles in the flapping\n"
    "window, last state change, last sample, and the open incidents on each.\n"
    "\n"
    "Exit codes: 0 listed (none found, when --unhealthy or --flapping); 1 with --unhealthy or\n"
    "--flapping, when any link matched; 2 usage error or the aggregator could not be asked.\n";

}  // namespace

int RunLinks(const std::vector<std::string>& argv, CommandContext& ctx) {
  QueryInvocation q;
  if (auto code = PrepareQueryCommand(kName, kUsage, Specs(), argv, ctx, q)) return *code;
  if (!q.args.positional.empty()) {
    return FailCommand(
        ctx, kName,
        absl::StrCat("unexpected argument \"", q.args.positional[0], "\" (see --help)"));
  }
  v1::ListLinksRequest req;
  req.set_unhealthy_only(q.args.Flag("unhealthy"));
  req.set_flapping_only(q.args.Flag("flapping"));
  req.set_node(q.args.Get("node"));
  auto answers = Gather(
      q.fleet->All<v1::ListLinksResponse>([&req](QueryClient& c) { return c.ListLinks(req); }),
      ctx.err);
  if (!answers.ok()) return FailCommand(ctx, kName, std::string(answers.status().message()));
  v1::ListLinksResponse merged;
  if (answers->size() == 1) {
    merged = std::move(answers->front().value);  // as the aggregator ordered them
  } else {
    std::vector<const google::protobuf::RepeatedPtrField<v1::LinkStatus>*> lists;
    for (const auto& a : *answers) lists.push_back(&a.value.links());
    *merged.mutable_links() = MergeLinks(lists);
  }
  const v1::ListLinksResponse* resp = &merged;
  const bool asked_for_problems = req.unhealthy_only() || req.flapping_only();
  if (q.format == OutputFormat::kJson) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::LinkStatus& l : resp->links()) out.push_back(LinkJson(l));
    WriteJson(out, ctx.out);
  } else if (resp->links().empty()) {
    ctx.out << (req.unhealthy_only()  ? "No unhealthy links.\n"
                : req.flapping_only() ? "No flapping links.\n"
                                      : "No links.\n");
  } else {
    LinksTable(resp->links(), absl::Now(), /*with_node=*/true).Render(ctx.out);
  }
  ctx.out.flush();
  return asked_for_problems && !resp->links().empty() ? kExitProblems : kExitOk;
}

}  // namespace ringside::daemon::ctl
