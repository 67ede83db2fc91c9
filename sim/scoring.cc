#include "sim/scoring.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/sim_names.h"

namespace ringside::sim {
namespace {

struct Window {
  absl::Time from, to;
};

Window FaultWindow(const Scenario& s, absl::Time t0, const FaultSpec& f) {
  return {t0 + f.start - absl::Seconds(2), t0 + f.start + f.duration + s.grace};
}

bool In(const Window& w, absl::Time t) { return t >= w.from && t <= w.to; }

bool Negative(FaultKind k) {
  return k == FaultKind::kCounterReset || k == FaultKind::kAgentCrash ||
         k == FaultKind::kGpuPowerCap;
}

}  // namespace

bool EntityMatches(const std::map<std::string, std::string>& want,
                   const std::map<std::string, std::string>& got) {
  for (const auto& [k, v] : want) {
    auto it = got.find(k);
    if (it != got.end() && it->second == v) continue;
    if (k == "device") {  // a RoCE port may be named by its netdev only
      int rail = -1;
      auto nd = got.find("netdev");
      if (ParseRail(v, &rail) && nd != got.end() && nd->second == RailNetdev(rail)) continue;
    }
    return false;
  }
  return true;
}

std::string EntityText(const std::map<std::string, std::string>& entity) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : entity) {
    if (k == "comm" || k == "priority" || (k == "port" && v == "1")) continue;
    parts.push_back(absl::StrCat(k, "=", v));
  }
  return absl::StrJoin(parts, " ");
}

std::string CauseText(const SimIncident& inc) {
  if (inc.causes.empty()) return "";
  const SimCause& c = inc.causes.front();
  return c.summary.empty() ? c.kind : c.summary;
}

int ExplainingFault(const Scenario& s, absl::Time t0, const SimIncident& inc, bool* expected,
                    bool* is_allowed) {
  if (is_allowed) *is_allowed = false;
  int allowed = -1, kind_only = -1, exact = -1;
  for (size_t i = 0; i < s.faults.size(); ++i) {
    const FaultSpec& f = s.faults[i];
    if (!In(FaultWindow(s, t0, f), inc.opened)) continue;
    for (const Expectation& e : f.expect) {
      if (e.kind != inc.kind) continue;
      // Of several faults whose windows hold the incident, the one that started last before it
      // (a second slowdown of a job is not the first one detected late).
      if (EntityMatches(e.entity, inc.entity)) {
        if (exact < 0 || f.start >= s.faults[exact].start) exact = static_cast<int>(i);
      } else if (kind_only < 0 || f.start >= s.faults[kind_only].start) {
        kind_only = static_cast<int>(i);
      }
    }
    for (const std::string& a : f.allow) {
      if (a == inc.kind && allowed < 0) {
        auto n = inc.entity.find("node");
        if (n == inc.entity.end() || n->second == s.NodeName(f.node)) allowed = static_cast<int>(i);
      }
    }
  }
  if (exact >= 0) {
    if (expected) *expected = true;
    return exact;
  }
  if (expected) *expected = false;
  if (kind_only < 0 && allowed >= 0 && is_allowed) *is_allowed = true;
  return kind_only >= 0 ? kind_only : allowed;
}

bool ScoreReport::all_detected() const {
  for (const ExpectationResult& e : expectations) {
    if (!e.detected || !e.entity_ok || (!e.expect.cause.empty() && !e.cause_ok)) return false;
  }
  return true;
}

ScoreReport Score(const Scenario& s, absl::Time t0, absl::Duration ran,
                  const std::vector<SimIncident>& incidents) {
  ScoreReport r;
  r.node_hours = s.nodes * absl::ToDoubleHours(ran);
  for (const FaultSpec& f : s.faults) {
    ClassScore& c = r.classes[std::string(FaultKindName(f.kind))];
    c.fault_class = std::string(FaultKindName(f.kind));
    ++c.faults;
  }
  // Expectations: the earliest incident of the kind with the right entity, else any of the kind
  // that no expectation claims with its entity (so when several faults of a class overlap, one
  // fault's incident is not also counted as another's detection with a wrong entity).
  // Faults are matched in the order they start, each to the earliest incident opened in its
  // window (the aggregator lists incidents in no particular order).
  std::vector<const SimIncident*> by_open;
  for (const SimIncident& inc : incidents) by_open.push_back(&inc);
  std::stable_sort(by_open.begin(), by_open.end(), [](const SimIncident* a, const SimIncident* b) {
    return a->opened != b->opened ? a->opened < b->opened : a->id < b->id;
  });
  std::vector<size_t> order(s.faults.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return s.faults[a].start < s.faults[b].start; });
  std::set<uint64_t> used;
  std::vector<std::vector<const SimIncident*>> exact(s.faults.size());  // per fault, expectation
  for (size_t fi : order) {
    const FaultSpec& f = s.faults[fi];
    const Window w = FaultWindow(s, t0, f);
    for (const Expectation& e : f.expect) {
      const SimIncident* best = nullptr;
      for (const SimIncident* p : by_open) {
        const SimIncident& inc = *p;
        if (inc.kind != e.kind || !In(w, inc.opened) || used.count(inc.id)) continue;
        if (EntityMatches(e.entity, inc.entity)) {
          best = &inc;
          break;
        }
      }
      if (best) used.insert(best->id);
      exact[fi].push_back(best);
    }
  }
  for (size_t fi = 0; fi < s.faults.size(); ++fi) {
    const FaultSpec& f = s.faults[fi];
    const Window w = FaultWindow(s, t0, f);
    ClassScore& c = r.classes[std::string(FaultKindName(f.kind))];
    for (size_t ei = 0; ei < f.expect.size(); ++ei) {
      const Expectation& e = f.expect[ei];
      ExpectationResult er;
      er.fault = static_cast<int>(fi);
      er.expect = e;
      const SimIncident* best = exact[fi][ei];
      const SimIncident* any = nullptr;
      for (const SimIncident* p : by_open) {
        if (p->kind != e.kind || !In(w, p->opened) || used.count(p->id)) continue;
        any = p;
        break;
      }
      const SimIncident* got = best ? best : any;
      ++c.expected;
      if (!e.cause.empty()) ++c.cause_expected;
      if (got != nullptr) {
        er.detected = true;
        er.entity_ok = best != nullptr;
        er.time_to_detect = got->opened - (t0 + f.start);
        er.got = absl::StrCat(got->kind, " #", got->id, " ", EntityText(got->entity));
        const std::string cause = got->causes.empty() ? "" : got->causes.front().kind;
        er.cause_ok = e.cause.empty() || cause == e.cause;
        ++c.detected;
        if (er.entity_ok) ++c.entity_ok;
        if (!e.cause.empty() && er.cause_ok) ++c.cause_ok;
        c.ttd_seconds.push_back(
            std::max(0.0, absl::ToDoubleSeconds(er.time_to_detect)));
      }
      er.incident = best ? best->id : 0;
      r.expectations.push_back(er);
    }
  }
  // Precision and false alarms.
  for (const SimIncident& inc : incidents) {
    if (inc.opened < t0) continue;
    bool expected = false;
    const int fi = ExplainingFault(s, t0, inc, &expected);
    if (fi < 0) {
      r.false_alarms.push_back(inc);
      // A negative fault's node raising something during its window: charged to that class.
      for (const FaultSpec& f : s.faults) {
        auto n = inc.entity.find("node");
        if (Negative(f.kind) && In(FaultWindow(s, t0, f), inc.opened) &&
            (n == inc.entity.end() || n->second == s.NodeName(f.node))) {
          ++r.classes[std::string(FaultKindName(f.kind))].false_alarms;
          break;
        }
      }
      continue;
    }
    const FaultSpec& f = s.faults[fi];
    bool is_expected_kind = false;
    for (const Expectation& e : f.expect) is_expected_kind |= e.kind == inc.kind;
    if (!is_expected_kind) continue;  // an allowed side effect
    ClassScore& c = r.classes[std::string(FaultKindName(f.kind))];
    ++c.raised;
    if (expected) ++c.raised_ok;
  }
  return r;
}

std::string FormatScoreTable(const Scenario& s, const ScoreReport& r) {
  std::string out;
  absl::StrAppend(&out, absl::StrFormat("%-16s %-10s %-44s %-8s %-8s %-6s %s\n", "fault",
                                        "at", "expected incident", "detected", "entity",
                                        "cause", "time to detect"));
  for (const ExpectationResult& e : r.expectations) {
    const FaultSpec& f = s.faults[e.fault];
    std::string want = absl::StrCat(e.expect.kind, " ", EntityText(e.expect.entity));
    if (!e.expect.cause.empty()) absl::StrAppend(&want, " ← ", e.expect.cause);
    absl::StrAppend(
        &out, absl::StrFormat("%-16s %-10s %-44s %-8s %-8s %-6s %s\n", FaultKindName(f.kind),
                              absl::FormatDuration(f.start), want, e.detected ? "yes" : "NO",
                              e.detected ? (e.entity_ok ? "right" : "WRONG") : "-",
                              e.expect.cause.empty() ? "-" : (e.cause_ok ? "right" : "WRONG"),
                              e.detected ? absl::StrFormat("%.1f s", absl::ToDoubleSeconds(
                                                                        e.time_to_detect))
                                         : "-"));
  }
  for (const auto& [name, c] : r.classes) {
    if (c.expected == 0) {
      absl::StrAppend(&out, absl::StrFormat("%-16s %-10s %-44s %s\n", name, "",
                                            "(must raise nothing)",
                                            c.false_alarms == 0 ? "none raised: right"
                                                                : absl::StrCat(c.false_alarms,
                                                                               " raised: WRONG")));
    }
  }
  absl::StrAppend(&out, absl::StrFormat("false alarms: %d in %.3f node-hours\n",
                                        r.false_alarms.size(), r.node_hours));
  for (const SimIncident& fa : r.false_alarms) {
    absl::StrAppend(&out, "  false alarm #", fa.id, " ", fa.kind, " ", EntityText(fa.entity),
                    " — ", fa.summary, "\n");
  }
  return out;
}

}  // namespace ringside::sim
