#include "daemon/ctl/analyze_trace.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/collective_observation.h"
#include "analysis/import/record_observation.h"
#include "analysis/straggler_detector.h"
#include "analysis/straggler_where.h"

namespace ringside::daemon::ctl {
namespace {

std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}

std::string Time(absl::Time t) {
  if (t == absl::InfinitePast()) return "null";
  return Quote(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone()));
}

}  // namespace

std::vector<TraceIncident> AnalyzeRecords(const analysis::ImportResult& imported,
                                          const analysis::StragglerOptions& options) {
  std::vector<analysis::CollectiveObservation> obs;
  obs.reserve(imported.records.size());
  for (size_t i = 0; i < imported.records.size(); ++i) {
    const ringside::v1::CollectiveRecord& r = imported.records[i];
    if (r.kernel_stop_unix_nanos() <= 0) continue;  // never completed: no timing to judge
    const analysis::RecordExtras* x = i < imported.extras.size() ? &imported.extras[i] : nullptr;
    analysis::CollectiveObservation o =
        analysis::ObservationFromRecord(r, x ? x->node : "", x ? x->clock_error_ns : -1);
    if (x != nullptr) {
      if (o.global_rank < 0) o.global_rank = x->global_rank;
      if (o.peer < 0) o.peer = x->peer;
    }
    obs.push_back(std::move(o));
  }
  std::stable_sort(obs.begin(), obs.end(),
                   [](const auto& a, const auto& b) { return a.stop_ns < b.stop_ns; });
  analysis::StragglerDetector detector(options);
  std::vector<analysis::Finding> findings;
  std::vector<int64_t> seq_of;  // per finding: the seq of the record that completed its instance
  for (const auto& o : obs) {
    detector.Observe(o, findings);
    seq_of.resize(findings.size(), static_cast<int64_t>(o.seq));
  }

  std::vector<TraceIncident> incidents;
  std::map<std::string, size_t> open;  // finding key → index of the open incident
  for (size_t i = 0; i < findings.size(); ++i) {
    const analysis::Finding& f = findings[i];
    const std::string key = analysis::FindingKey(f);
    auto it = open.find(key);
    if (f.active) {
      if (it == open.end()) {
        TraceIncident inc{f.kind,     f.severity, f.entity,  f.at, f.at, absl::InfinitePast(),
                          f.evidence, f.summary,  seq_of[i], -1};
        open[key] = incidents.size();
        incidents.push_back(std::move(inc));
      } else {
        TraceIncident& inc = incidents[it->second];
        inc.updated = f.at;
        inc.evidence = f.evidence;
        inc.summary = f.summary;
        inc.severity = std::max(inc.severity, f.severity);
      }
    } else if (it != open.end()) {
      incidents[it->second].resolved = f.at;
      incidents[it->second].resolved_seq = seq_of[i];
      incidents[it->second].updated = f.at;
      open.erase(it);
    }
  }
  return incidents;
}

void WriteIncidentsJson(const std::vector<TraceIncident>& incidents, std::ostream& out) {
  out << "[";
  for (size_t i = 0; i < incidents.size(); ++i) {
    const TraceIncident& inc = incidents[i];
    out << (i ? ",\n " : "\n ") << "{\"kind\":" << Quote(analysis::IncidentKindName(inc.kind))
        << ",\"severity\":" << Quote(analysis::SeverityName(inc.severity)) << ",\"entity\":{";
    bool first = true;
    for (const auto& [k, v] : inc.entity) {
      out << (first ? "" : ",") << Quote(k) << ":" << Quote(v);
      first = false;
    }
    out << "}";
    if (inc.kind == analysis::IncidentKind::kStraggler) {
      // What a user asks first: which rank, where its lateness is, and why. A trace has no fabric
      // or GPU incidents, so the cause is the host (docs/detection.md, cause chain).
      auto rank = inc.entity.find("rank");
      out << ",\"rank\":" << (rank == inc.entity.end() ? "null" : rank->second)
          << ",\"where\":" << Quote(analysis::StragglerWhere(inc.evidence))
          << ",\"cause\":\"host\"";
    }
    out << ",\"opened\":" << Time(inc.opened) << ",\"opened_seq\":" << inc.opened_seq
        << ",\"updated\":" << Time(inc.updated) << ",\"resolved\":" << Time(inc.resolved)
        << ",\"resolved_seq\":"
        << (inc.resolved_seq < 0 ? std::string("null") : absl::StrCat(inc.resolved_seq))
        << ",\"evidence\":{";
    first = true;
    for (const auto& [k, v] : inc.evidence) {
      out << (first ? "" : ",") << Quote(k) << ":" << absl::StrFormat("%.6g", v);
      first = false;
    }
    out << "},\"summary\":" << Quote(inc.summary) << "}";
  }
  out << (incidents.empty() ? "]\n" : "\n]\n");
}

void WriteIncidentsTable(const std::vector<TraceIncident>& incidents, std::ostream& out) {
  if (incidents.empty()) {
    out << "no incidents\n";
    return;
  }
  out << absl::StrFormat("%-13s %-9s %-7s %-40s %-24s %-8s %-8s %s\n", "KIND", "SEVERITY", "WHERE",
                         "ENTITY", "OPENED", "SEQ", "RESOLVED", "SUMMARY");
  for (const TraceIncident& inc : incidents) {
    std::string entity;
    for (const auto& [k, v] : inc.entity) absl::StrAppend(&entity, entity.empty() ? "" : " ", k, "=", v);
    const std::string where = inc.kind == analysis::IncidentKind::kStraggler
                                  ? analysis::StragglerWhere(inc.evidence)
                                  : "-";
    out << absl::StrFormat(
        "%-13s %-9s %-7s %-40s %-24s %-8d %-8s %s\n", analysis::IncidentKindName(inc.kind),
        analysis::SeverityName(inc.severity), where, entity,
        absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", inc.opened, absl::UTCTimeZone()), inc.opened_seq,
        inc.resolved_seq < 0 ? std::string("open") : absl::StrCat("seq ", inc.resolved_seq),
        inc.summary);
  }
}

}  // namespace ringside::daemon::ctl
