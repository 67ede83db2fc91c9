#include "sim/sweep.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/stats.h"

namespace ringside::sim {
namespace {

using nlohmann::json;

bool Negative(const std::string& fault_class) {
  return fault_class == "counter_reset" || fault_class == "agent_crash";
}

json EntityJson(const std::map<std::string, std::string>& e) {
  json j = json::object();
  for (const auto& [k, v] : e) j[k] = v;
  return j;
}

std::map<std::string, std::string> EntityFrom(const json& j) {
  std::map<std::string, std::string> e;
  if (!j.is_object()) return e;
  for (const auto& [k, v] : j.items()) {
    if (v.is_string()) e[k] = v.get<std::string>();
  }
  return e;
}

void Add(ClassScore& t, const ClassScore& c) {
  t.faults += c.faults;
  t.expected += c.expected;
  t.detected += c.detected;
  t.entity_ok += c.entity_ok;
  t.cause_expected += c.cause_expected;
  t.cause_ok += c.cause_ok;
  t.raised += c.raised;
  t.raised_ok += c.raised_ok;
  t.false_alarms += c.false_alarms;
  t.ttd_seconds.insert(t.ttd_seconds.end(), c.ttd_seconds.begin(), c.ttd_seconds.end());
}

// "0.97 (34/35) ≥ 0.85": the rate, the counts and the Wilson 95 % lower bound.
std::string Rate(int num, int den) {
  if (den == 0) return "—";
  return absl::StrFormat("%.2f (%d/%d) ≥ %.2f", static_cast<double>(num) / den, num, den,
                         WilsonInterval(num, den).lower);
}

std::string Ttd(const std::vector<double>& v) {
  if (v.empty()) return "—";
  return absl::StrFormat("%.1f / %.1f / %.1f s", NearestRankQuantile(v, 0.5),
                         NearestRankQuantile(v, 0.95), *std::max_element(v.begin(), v.end()));
}

// What went wrong in a run, in a few words per expectation.
std::string Misses(const SweepRun& r) {
  std::vector<std::string> out;
  if (!r.error.empty()) out.push_back(r.error);
  if (r.interrupted) out.push_back("interrupted");
  for (const ExpectationResult& e : r.score.expectations) {
    const std::string want = absl::StrCat(e.expect.kind, " ", EntityText(e.expect.entity));
    if (!e.detected) {
      out.push_back(absl::StrCat(want, ": not raised"));
    } else if (!e.entity_ok) {
      out.push_back(absl::StrCat(want, ": got ", e.got));
    } else if (!e.expect.cause.empty() && !e.cause_ok) {
      out.push_back(absl::StrCat(want, ": cause not ", e.expect.cause));
    }
  }
  for (const SimIncident& fa : r.score.false_alarms) {
    out.push_back(absl::StrCat("false alarm ", fa.kind, " ", EntityText(fa.entity)));
  }
  for (const std::string& p : r.problems) out.push_back(p);
  return absl::StrJoin(out, "; ");
}

}  // namespace

std::vector<uint64_t> SweepSeeds(uint64_t first, int n) {
  std::vector<uint64_t> seeds;
  for (int i = 0; i < std::max(1, n); ++i) seeds.push_back(first + static_cast<uint64_t>(i));
  return seeds;
}

bool SweepRun::passed() const {
  return error.empty() && !interrupted && score.all_detected() && score.false_alarms.empty();
}

std::string SweepRunToJson(const SweepRun& r) {
  json j;
  j["wall_seconds"] = r.wall_seconds;
  j["cpu_seconds"] = r.cpu_seconds;
  j["interrupted"] = r.interrupted;
  j["error"] = r.error;
  j["problems"] = r.problems;
  j["node_hours"] = r.score.node_hours;
  json ex = json::array();
  for (const ExpectationResult& e : r.score.expectations) {
    ex.push_back({{"fault", e.fault},
                  {"kind", e.expect.kind},
                  {"entity", EntityJson(e.expect.entity)},
                  {"cause", e.expect.cause},
                  {"incident", e.incident},
                  {"detected", e.detected},
                  {"entity_ok", e.entity_ok},
                  {"cause_ok", e.cause_ok},
                  {"ttd_seconds", e.detected ? absl::ToDoubleSeconds(e.time_to_detect) : -1.0},
                  {"got", e.got}});
  }
  j["expectations"] = ex;
  json cl = json::object();
  for (const auto& [name, c] : r.score.classes) {
    cl[name] = {{"faults", c.faults},           {"expected", c.expected},
                {"detected", c.detected},       {"entity_ok", c.entity_ok},
                {"cause_expected", c.cause_expected}, {"cause_ok", c.cause_ok},
                {"raised", c.raised},           {"raised_ok", c.raised_ok},
                {"false_alarms", c.false_alarms}, {"ttd_seconds", c.ttd_seconds}};
  }
  j["classes"] = cl;
  json fa = json::array();
  for (const SimIncident& i : r.score.false_alarms) {
    fa.push_back({{"id", i.id},
                  {"kind", i.kind},
                  {"severity", i.severity},
                  {"entity", EntityJson(i.entity)},
                  {"opened_ns", absl::ToUnixNanos(i.opened)},
                  {"summary", i.summary}});
  }
  j["false_alarms"] = fa;
  return j.dump();
}

absl::Status SweepRunFromJson(const std::string& text, SweepRun* r) {
  try {
    const json j = json::parse(text);
    r->wall_seconds = j.at("wall_seconds").get<double>();
    r->cpu_seconds = j.at("cpu_seconds").get<double>();
    r->interrupted = j.at("interrupted").get<bool>();
    r->error = j.at("error").get<std::string>();
    r->problems = j.at("problems").get<std::vector<std::string>>();
    ScoreReport& s = r->score;
    s = ScoreReport();
    s.node_hours = j.at("node_hours").get<double>();
    for (const json& e : j.at("expectations")) {
      ExpectationResult x;
      x.fault = e.at("fault").get<int>();
      x.expect.kind = e.at("kind").get<std::string>();
      x.expect.entity = EntityFrom(e.at("entity"));
      x.expect.cause = e.at("cause").get<std::string>();
      x.incident = e.at("incident").get<uint64_t>();
      x.detected = e.at("detected").get<bool>();
      x.entity_ok = e.at("entity_ok").get<bool>();
      x.cause_ok = e.at("cause_ok").get<bool>();
      const double ttd = e.at("ttd_seconds").get<double>();
      x.time_to_detect = x.detected ? absl::Seconds(ttd) : absl::InfiniteDuration();
      x.got = e.at("got").get<std::string>();
      s.expectations.push_back(std::move(x));
    }
    for (const auto& [name, c] : j.at("classes").items()) {
      ClassScore& k = s.classes[name];
      k.fault_class = name;
      k.faults = c.at("faults").get<int>();
      k.expected = c.at("expected").get<int>();
      k.detected = c.at("detected").get<int>();
      k.entity_ok = c.at("entity_ok").get<int>();
      k.cause_expected = c.at("cause_expected").get<int>();
      k.cause_ok = c.at("cause_ok").get<int>();
      k.raised = c.at("raised").get<int>();
      k.raised_ok = c.at("raised_ok").get<int>();
      k.false_alarms = c.at("false_alarms").get<int>();
      k.ttd_seconds = c.at("ttd_seconds").get<std::vector<double>>();
    }
    for (const json& f : j.at("false_alarms")) {
      SimIncident i;
      i.id = f.at("id").get<uint64_t>();
      i.kind = f.at("kind").get<std::string>();
      i.severity = f.at("severity").get<std::string>();
      i.entity = EntityFrom(f.at("entity"));
      i.opened = absl::FromUnixNanos(f.at("opened_ns").get<int64_t>());
      i.summary = f.at("summary").get<std::string>();
      s.false_alarms.push_back(std::move(i));
    }
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("run result: ", e.what()));
  }
  return absl::OkStatus();
}

std::map<std::string, ClassScore> TotalByClass(const std::vector<SweepRun>& runs,
                                               std::map<std::string, int>* runs_with) {
  std::map<std::string, ClassScore> total;
  for (const SweepRun& r : runs) {
    if (!r.error.empty()) continue;
    for (const auto& [name, c] : r.score.classes) {
      ClassScore& t = total[name];
      t.fault_class = name;
      Add(t, c);
      if (runs_with) ++(*runs_with)[name];
    }
  }
  return total;
}

std::string SweepMarkdown(const std::vector<SweepRun>& runs, const std::string& header) {
  std::string out = header;
  std::map<std::string, int> runs_with;
  const std::map<std::string, ClassScore> total = TotalByClass(runs, &runs_with);
  absl::StrAppend(
      &out, "\n## Per fault class\n\n",
      "Pooled over every run. A rate reads `value (hits/trials) ≥ lower`, the lower end of its "
      "Wilson 95 % interval: what the figure is worth on this many trials. TP: incidents of the "
      "expected kind and entity raised in a fault's window; FP: incidents of an expected kind in "
      "a fault's window naming another entity (for counter_reset and agent_crash: anything the "
      "node raised). Recall and entity count expected incidents; time to detect is from the "
      "fault's start to the incident's `opened` (median / p95 / max, nearest rank).\n\n",
      "| fault class | runs | faults | expected incidents | TP | FP | precision | recall | "
      "correct entity | correct cause | time to detect |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& [name, c] : total) {
    if (Negative(name) || c.expected == 0) {
      absl::StrAppend(&out, absl::StrFormat("| %s | %d | %d | 0 | — | %d | %s | — | — | — | — |\n",
                                            name, runs_with[name], c.faults, c.false_alarms,
                                            c.false_alarms == 0 ? "nothing raised"
                                                                : absl::StrCat(c.false_alarms,
                                                                               " raised")));
      continue;
    }
    absl::StrAppend(&out, absl::StrFormat("| %s | %d | %d | %d | %d | %d | %s | %s | %s | %s | %s |\n",
                                          name, runs_with[name], c.faults, c.expected,
                                          c.raised_ok, c.raised - c.raised_ok,
                                          Rate(c.raised_ok, c.raised), Rate(c.detected, c.expected),
                                          Rate(c.entity_ok, c.expected),
                                          Rate(c.cause_ok, c.cause_expected), Ttd(c.ttd_seconds)));
  }
  // False alarms: incidents no fault explains, over every run and over the fault-free ones.
  double hours = 0, free_hours = 0;
  int alarms = 0, free_alarms = 0;
  std::map<std::string, int> by_kind;
  for (const SweepRun& r : runs) {
    if (!r.error.empty()) continue;
    hours += r.score.node_hours;
    alarms += static_cast<int>(r.score.false_alarms.size());
    for (const SimIncident& fa : r.score.false_alarms) ++by_kind[fa.kind];
    if (r.scenario.faults.empty()) {
      free_hours += r.score.node_hours;
      free_alarms += static_cast<int>(r.score.false_alarms.size());
    }
  }
  auto per1000 = [](int n, double h) { return h > 0 ? 1000.0 * n / h : 0.0; };
  absl::StrAppend(&out, "\n## False alarms\n\n");
  absl::StrAppend(
      &out, absl::StrFormat("Incidents no injected fault explains: %d in %.2f simulated node-hours "
                            "of every run (%.0f per 1,000 node-hours; 95 %% upper bound %.0f).\n",
                            alarms, hours, per1000(alarms, hours),
                            hours > 0 ? 1000.0 * PoissonUpper95(alarms) / hours : 0.0));
  if (free_hours > 0) {
    absl::StrAppend(
        &out, absl::StrFormat("Fault-free scenarios: %d in %.2f node-hours (95 %% upper bound %.0f "
                              "per 1,000 node-hours).\n",
                              free_alarms, free_hours, 1000.0 * PoissonUpper95(free_alarms) / free_hours));
  }
  if (!by_kind.empty()) {
    std::vector<std::string> parts;
    for (const auto& [k, n] : by_kind) parts.push_back(absl::StrCat(k, " ", n));
    absl::StrAppend(&out, "By kind: ", absl::StrJoin(parts, ", "), ".\n");
  }
  // One line per run.
  absl::StrAppend(&out, "\n## Runs\n\n| scenario | seed | wall | CPU (cores) | expected met | "
                        "false alarms | result | what went wrong |\n|---|---|---|---|---|---|---|---|\n");
  int passed = 0;
  for (const SweepRun& r : runs) {
    int met = 0;
    for (const ExpectationResult& e : r.score.expectations) {
      met += e.detected && e.entity_ok && (e.expect.cause.empty() || e.cause_ok);
    }
    passed += r.passed();
    absl::StrAppend(
        &out, absl::StrFormat("| %s | %d | %.0f s | %.2f | %d/%d | %d | %s | %s |\n",
                              r.scenario.name, r.scenario.seed, r.wall_seconds,
                              r.wall_seconds > 0 ? r.cpu_seconds / r.wall_seconds : 0.0, met,
                              r.score.expectations.size(), r.score.false_alarms.size(),
                              r.passed() ? "pass" : "**fail**", Misses(r)));
  }
  absl::StrAppend(&out, absl::StrFormat("\n%d of %d runs passed.\n", passed, runs.size()));
  bool any_failed = false;
  for (const SweepRun& r : runs) {
    if (r.passed() || !r.error.empty()) continue;
    if (!any_failed) absl::StrAppend(&out, "\n## Failed runs\n\n");
    any_failed = true;
    absl::StrAppend(&out, "### ", r.scenario.name, " seed ", r.scenario.seed, "\n\n```\n",
                    FormatScoreTable(r.scenario, r.score), "```\n\n");
  }
  return out;
}

std::string SweepSummary(const std::vector<SweepRun>& runs) {
  std::map<std::string, int> runs_with;
  const std::map<std::string, ClassScore> total = TotalByClass(runs, &runs_with);
  std::string out = absl::StrFormat("%-16s %5s %7s  %-26s %-26s %-26s\n", "fault class", "runs",
                                    "faults", "precision", "recall", "correct entity");
  for (const auto& [name, c] : total) {
    if (Negative(name) || c.expected == 0) {
      absl::StrAppend(&out, absl::StrFormat("%-16s %5d %7d  %d raised\n", name, runs_with[name],
                                            c.faults, c.false_alarms));
      continue;
    }
    absl::StrAppend(&out, absl::StrFormat("%-16s %5d %7d  %-26s %-26s %-26s\n", name,
                                          runs_with[name], c.faults, Rate(c.raised_ok, c.raised),
                                          Rate(c.detected, c.expected),
                                          Rate(c.entity_ok, c.expected)));
  }
  return out;
}

}  // namespace ringside::sim
