// `ringside incident ID`: one incident in full, with its cause chain (followed through
// GetIncident, cause_chain.h) and, for fabric incidents, the jobs and ranks behind it.
#include <map>
#include <optional>
#include <ostream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "daemon/ctl/cause_chain.h"
#include "daemon/ctl/fleet.h"
#include "daemon/ctl/fleet_merge.h"
#include "daemon/ctl/incident_text.h"
#include "daemon/ctl/query_client.h"
#include "daemon/ctl/query_commands.h"
#include "daemon/ctl/query_json.h"
#include "daemon/ctl/relative_time.h"

namespace ringside::daemon::ctl {
namespace {

constexpr char kName[] = "incident";

const std::vector<FlagSpec>& Specs() {
  static const auto* specs = new std::vector<FlagSpec>{};
  return *specs;
}

constexpr char kUsage[] =
    "Usage: ringside incident ID|KEY\n"
    "\n"
    "Shows one incident in full: kind, severity, entity, times, evidence (the counter deltas and\n"
    "scores that triggered it), summary, resolution, its causes followed to the end (\"straggler\n"
    "rank 5 (job j1) on node-a ← pause_storm node-b mlx5_0 prio 3 (#12)\"), and for a fabric\n"
    "incident the jobs and ranks that run behind it (blast radius). -o json adds\n"
    "\"cause_chains\": one array of steps per path.\n"
    "KEY is the incident's stable key (16 hex digits, the same on every replica). With several\n"
    "aggregators an ID is asked of each; if it names different incidents on different ones, the\n"
    "command says so and lists their keys: give the key instead.\n"
    "\n"
    "Exit codes: 0 shown; 2 usage error, no such incident, or the aggregator could not be asked.\n";

std::string TimeLine(int64_t ns, absl::Time now) {
  if (ns == 0) return "-";
  return absl::StrCat(Rfc3339(ns - ns % 1'000'000'000), " (", Ago(ns, now), ")");
}

nlohmann::json StepJson(const ChainStep& s) {
  nlohmann::json j = CauseLinkJson(s.link);
  if (s.incident.has_value()) {
    j["kind"] = s.incident->kind();
    j["entity"] = IncidentJson(*s.incident)["entity"];
    j["severity"] = s.incident->severity();
    j["open"] = s.incident->open();
    if (j["summary"].get<std::string>().empty()) j["summary"] = s.incident->summary();
  }
  j["note"] = s.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.note);
  j["text"] = StepText(s);
  return j;
}

void WriteText(const v1::Incident& i, const std::vector<CausePath>& chains, absl::Time now,
               std::ostream& out) {
  out << "Incident #" << i.id() << "  " << i.kind() << "  " << i.severity() << "  "
      << (i.open() ? "OPEN" : "RESOLVED") << "\n";
  Table head({"", ""});
  head.AddRow({"Entity:", EntityText(i.entity())});
  if (!i.key().empty()) head.AddRow({"Key:", i.key()});
  head.AddRow({"Opened:", TimeLine(i.opened_unix_nanos(), now)});
  head.AddRow({"Updated:", TimeLine(i.updated_unix_nanos(), now)});
  head.AddRow({"Resolved:", i.open() ? "- (open)" : TimeLine(i.resolved_unix_nanos(), now)});
  if (!i.open() && i.resolved_unix_nanos() != 0 && i.opened_unix_nanos() != 0) {
    head.AddRow({"Duration:", CompactDuration(absl::Nanoseconds(i.resolved_unix_nanos() -
                                                                i.opened_unix_nanos()))});
  }
  head.AddRow({"Summary:", i.summary().empty() ? "-" : i.summary()});
  if (!i.where().empty()) head.AddRow({"Where:", i.where()});
  if (!i.resolution().empty()) head.AddRow({"Resolution:", i.resolution()});
  std::ostringstream h;
  head.Render(h);
  // Drop the empty header line.
  std::string text = h.str();
  out << text.substr(text.find('\n') + 1);

  if (!i.evidence().empty()) {
    out << "\nEvidence:\n";
    std::map<std::string, double> sorted(i.evidence().begin(), i.evidence().end());
    Table t({"  NAME", "VALUE"});
    t.RightAlign(1);
    for (const auto& [k, v] : sorted) t.AddRow({"  " + k, absl::StrFormat("%.6g", v)});
    t.Render(out);
  }

  out << "\nCauses:\n";
  if (i.causes().empty()) {
    out << "  none recorded";
    if (i.kind() == "straggler" || i.kind() == "job_slowdown") {
      out << " (no fabric incident in its window: look at the host — compute, input pipeline)";
    }
    out << "\n";
  } else {
    for (const v1::CauseLink& c : i.causes()) {
      ChainStep s;
      s.link = c;
      out << "  " << (c.scope().empty() ? "" : c.scope() + ": ") << StepText(s);
      if (!c.summary().empty()) out << " — " << c.summary();
      out << "\n";
      if (!c.evidence().empty()) {
        // What was checked to choose it: a GPU's or the host's numbers, or for "host" what was
        // found clean.
        std::map<std::string, double> sorted(c.evidence().begin(), c.evidence().end());
        std::vector<std::string> parts;
        for (const auto& [k, v] : sorted) parts.push_back(absl::StrFormat("%s=%.4g", k, v));
        out << "      " << (c.kind() == "host" ? "checked: " : "evidence: ")
            << absl::StrJoin(parts, " ") << "\n";
      }
    }
    out << "\nCause chain:\n";
    for (const CausePath& p : chains) out << "  " << ChainText(i, p) << "\n";
  }

  if (!i.affected().empty()) {
    out << "\nBlast radius (jobs and ranks behind it):\n";
    bool pods = false;  // a PODS column only when some rank's pod is known
    for (const v1::AffectedJob& a : i.affected()) pods = pods || !a.pods().empty();
    Table t(pods ? std::vector<std::string>{"  JOB", "RANKS", "NODES", "PODS"}
                 : std::vector<std::string>{"  JOB", "RANKS", "NODES"});
    for (const v1::AffectedJob& a : i.affected()) {
      std::vector<std::string> row = {"  " + a.job(), a.ranks().empty() ? "-" : RankRanges(a.ranks()),
                                      a.nodes().empty() ? "-" : absl::StrJoin(a.nodes(), ",")};
      if (pods) row.push_back(a.pods().empty() ? "-" : absl::StrJoin(a.pods(), ","));
      t.AddRow(row);
    }
    t.Render(out);
  }
}

bool IsKey(const std::string& text) {
  if (text.size() != 16) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// How many incidents a key is looked for among, on each aggregator (ListIncidents, newest first).
constexpr uint32_t kKeySearchLimit = 100000;

struct Found {
  v1::Incident incident;
  QueryClient* client = nullptr;  // the aggregator that has it, for its causes' ids
};

// The incident with `key`, the freshest copy among the aggregators that list it.
absl::StatusOr<Found> FindByKey(Fleet& fleet, const std::string& key, std::ostream& err) {
  v1::ListIncidentsRequest req;
  req.set_limit(kKeySearchLimit);
  auto answers = Gather(
      fleet.All<v1::ListIncidentsResponse>([&req](QueryClient& c) { return c.ListIncidents(req); }),
      err);
  if (!answers.ok()) return answers.status();
  std::optional<Found> best;
  for (const auto& a : *answers) {
    for (const v1::Incident& i : a.value.incidents()) {
      if (i.key() != key) continue;
      if (!best.has_value() || i.revision() > best->incident.revision()) {
        best = Found{i, &fleet.at(a.index)};
      }
    }
  }
  if (!best.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("no incident with key ", key, " at ",
                     fleet.many() ? "any aggregator asked" : fleet.target(0)));
  }
  // The full incident, as GetIncident gives it.
  absl::StatusOr<v1::Incident> full = best->client->GetIncident(best->incident.id());
  if (full.ok() && full->key() == key) best->incident = *std::move(full);
  return *best;
}

// The incident with local id `id`: with one aggregator, its answer; with several, the one
// incident that id names on those that have it, else an error listing the keys.
absl::StatusOr<Found> FindById(Fleet& fleet, uint64_t id, std::ostream& err) {
  if (!fleet.many()) {
    absl::StatusOr<v1::Incident> i = fleet.at(0).GetIncident(id);
    if (!i.ok()) return i.status();
    return Found{*std::move(i), &fleet.at(0)};
  }
  auto answers =
      Gather(fleet.All<v1::Incident>([id](QueryClient& c) { return c.GetIncident(id); }), err,
             /*not_found_is_no_answer=*/true);
  if (!answers.ok()) {
    if (absl::IsNotFound(answers.status())) {
      return absl::NotFoundError(
          absl::StrCat("no incident #", id, " at any of the ", fleet.size(), " aggregators"));
    }
    return answers.status();
  }
  std::map<std::string, Found> distinct;
  std::vector<std::string> where;
  for (auto& a : *answers) {
    const std::string identity = IncidentIdentity(a.value);
    where.push_back(absl::StrCat(a.value.key().empty() ? "(no key)" : a.value.key(), " ",
                                 Headline(a.value), " at ", fleet.target(a.index)));
    auto it = distinct.find(identity);
    if (it == distinct.end()) {
      distinct.emplace(identity, Found{a.value, &fleet.at(a.index)});
    } else if (a.value.revision() > it->second.incident.revision()) {
      it->second = Found{a.value, &fleet.at(a.index)};
    }
  }
  if (distinct.size() > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "#", id, " is ambiguous: ", distinct.size(),
        " different incidents have that id on different aggregators; give the key:\n  ",
        absl::StrJoin(where, "\n  ")));
  }
  return distinct.begin()->second;
}

}  // namespace

int RunIncident(const std::vector<std::string>& argv, CommandContext& ctx) {
  QueryInvocation q;
  if (auto code = PrepareQueryCommand(kName, kUsage, Specs(), argv, ctx, q)) return *code;
  if (q.args.positional.size() != 1) {
    return FailCommand(ctx, kName, "give one incident ID (see --help)");
  }
  std::string id_text = q.args.positional[0];
  absl::StatusOr<Found> found;
  if (IsKey(id_text)) {
    found = FindByKey(*q.fleet, id_text, ctx.err);
  } else {
    if (!id_text.empty() && id_text[0] == '#') id_text = id_text.substr(1);
    uint64_t id = 0;
    if (!absl::SimpleAtoi(id_text, &id) || id == 0) {
      return FailCommand(
          ctx, kName, absl::StrCat("\"", q.args.positional[0], "\" is not an incident id or key"));
    }
    found = FindById(*q.fleet, id, ctx.err);
  }
  if (!found.ok()) return FailCommand(ctx, kName, std::string(found.status().message()));
  const v1::Incident* incident = &found->incident;
  QueryClient* client = found->client;
  std::vector<CausePath> chains = ResolveCauseChains(
      *incident, [client](uint64_t cause) { return client->GetIncident(cause); });
  const absl::Time now = absl::Now();
  if (q.format == OutputFormat::kJson) {
    nlohmann::json out = IncidentJson(*incident);
    nlohmann::json paths = nlohmann::json::array();
    for (const CausePath& p : chains) {
      nlohmann::json steps = nlohmann::json::array();
      for (const ChainStep& s : p) steps.push_back(StepJson(s));
      paths.push_back(std::move(steps));
    }
    out["cause_chains"] = std::move(paths);
    WriteJson(out, ctx.out);
  } else {
    WriteText(*incident, chains, now, ctx.out);
  }
  ctx.out.flush();
  return kExitOk;
}

}  // namespace ringside::daemon::ctl
