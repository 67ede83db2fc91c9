// `ringside node NAME`: one node as the aggregator sees it (GetNode): freshness, open incidents,
// links and the latest counter rates.
#include <algorithm>
#include <cmath>
#include <ostream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "daemon/ctl/fleet.h"
#include "daemon/ctl/incident_text.h"
#include "daemon/ctl/link_text.h"
#include "daemon/ctl/query_client.h"
#include "daemon/ctl/query_commands.h"
#include "daemon/ctl/query_json.h"
#include "daemon/ctl/relative_time.h"

namespace ringside::daemon::ctl {
namespace {

constexpr char kName[] = "node";

const std::vector<FlagSpec>& Specs() {
  static const auto* specs = new std::vector<FlagSpec>{
      {"rates", "", true, "N", "show the first N series rates (nonzero first; 0: all)", "20"},
  };
  return *specs;
}

constexpr char kUsage[] =
    "Usage: ringside node NAME\n"
    "\n"
    "Shows one node: whether its agent is current or stale (and when it was last heard from),\n"
    "its agent version, its open incidents, its links, and the latest rate of its counters\n"
    "(nonzero first).\n"
    "\n"
    "Exit codes: 0 the node is current and has no open incident; 1 it is stale or has open\n"
    "incidents; 2 usage error, unknown node, or the aggregator could not be asked.\n";

std::string Number(double v) {
  if (!std::isfinite(v)) return "-";
  return absl::StrFormat("%.6g", v);
}

}  // namespace

int RunNode(const std::vector<std::string>& argv, CommandContext& ctx) {
  QueryInvocation q;
  if (auto code = PrepareQueryCommand(kName, kUsage, Specs(), argv, ctx, q)) return *code;
  if (q.args.positional.size() != 1 || q.args.positional[0].empty()) {
    return FailCommand(ctx, kName, "give one node NAME (see --help)");
  }
  int max_rates = 20;
  if (q.args.Has("rates") &&
      (!absl::SimpleAtoi(q.args.Get("rates"), &max_rates) || max_rates < 0)) {
    return FailCommand(ctx, kName,
                       absl::StrCat("--rates \"", q.args.Get("rates"), "\" is not a count"));
  }
  // The node lives on one shard: the first aggregator (in --aggregator order) that knows it.
  const std::string name = q.args.positional[0];
  auto answers = Gather(
      q.fleet->All<v1::NodeStatus>([&name](QueryClient& c) { return c.GetNode(name); }), ctx.err,
      /*not_found_is_no_answer=*/true);
  if (!answers.ok()) {
    if (q.fleet->many() && absl::IsNotFound(answers.status())) {
      return FailCommand(ctx, kName,
                         absl::StrCat("none of the ", q.fleet->size(),
                                      " aggregators has heard of node \"", name, "\""));
    }
    return FailCommand(ctx, kName, std::string(answers.status().message()));
  }
  const v1::NodeStatus* node = &answers->front().value;
  const bool problems = node->stale() || !node->open_incidents().empty();
  const absl::Time now = absl::Now();
  if (q.format == OutputFormat::kJson) {
    WriteJson(NodeJson(*node), ctx.out);
    ctx.out.flush();
    return problems ? kExitProblems : kExitOk;
  }
  std::ostream& out = ctx.out;
  out << "Node " << Cell(node->node()) << "  " << (node->stale() ? "STALE" : "current") << "\n";
  Table head({"", ""});
  head.AddRow(
      {"Last seen:", node->last_seen_unix_nanos() == 0
                         ? "never"
                         : absl::StrCat(Rfc3339(node->last_seen_unix_nanos() -
                                                node->last_seen_unix_nanos() % 1'000'000'000),
                                        " (", Ago(node->last_seen_unix_nanos(), now), ")")});
  head.AddRow({"Agent:", node->agent_version().empty() ? "-" : node->agent_version()});
  head.AddRow({"Series:", absl::StrCat(node->series())});
  std::ostringstream h;
  head.Render(h);
  const std::string text = h.str();
  out << text.substr(text.find('\n') + 1);

  out << "\nOpen incidents (" << node->open_incidents_size() << "):\n";
  if (node->open_incidents().empty()) {
    out << "  none\n";
  } else {
    IncidentsTable(node->open_incidents(), now, /*with_key=*/q.fleet->many()).Render(out);
  }
  out << "\nLinks (" << node->links_size() << "):\n";
  if (node->links().empty()) {
    out << "  none\n";
  } else {
    LinksTable(node->links(), now, /*with_node=*/false).Render(out);
  }
  const int shown = max_rates == 0 ? node->rates_size() : std::min(max_rates, node->rates_size());
  out << "\nRates (" << shown << " of " << node->rates_size() << ", nonzero first):\n";
  if (node->rates().empty()) {
    out << "  none\n";
  } else {
    Table t({"SOURCE", "DEVICE", "PORT", "COUNTER", "PRIO", "RATE/S", "VALUE", "UNIT"});
    t.RightAlign(5);
    t.RightAlign(6);
    for (int k = 0; k < shown; ++k) {
      const v1::SeriesRate& r = node->rates(k);
      t.AddRow({r.source(), r.device(), r.port().empty() ? "-" : r.port(), r.counter(),
                r.priority() < 0 ? "-" : absl::StrCat(r.priority()),
                r.is_counter() ? Number(r.rate_per_second()) : "-", Number(r.value()), r.unit()});
    }
    t.Render(out);
    if (shown < node->rates_size()) {
      out << "  (" << node->rates_size() - shown << " more: --rates 0 or -o json)\n";
    }
  }
  out.flush();
  return problems ? kExitProblems : kExitOk;
}

}  // namespace ringside::daemon::ctl
