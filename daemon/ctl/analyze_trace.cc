#include "daemon/ctl/analyze_trace.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/collective_observation.h"
#include "analysis/straggler_detector.h"

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

std::vector<TraceIncident> AnalyzeRecords(const analysis::ImportResult& imported) {
  std::vector<analysis::CollectiveObservation> obs;
  obs.reserve(imported.records.size());
  for (size_t i = 0; i < imported.records.size(); ++i) {
    const ringside::v1::CollectiveRecord& r = imported.records[i];
    if (r.kernel_stop_unix_nanos() <= 0) continue;  // never completed: no timing to judge
    analysis::CollectiveObservation o;
    o.job = r.job_id();
    o.comm_id = r.comm_id();
    o.comm_name = r.comm_name();
    o.rank = r.rank();
    o.nranks = r.nranks();
    o.function = r.function();
    o.seq = r.seq();
    o.bytes = r.bytes();
    o.start_ns = r.kernel_start_unix_nanos();
    o.stop_ns = r.kernel_stop_unix_nanos();
    o.host = r.host();
    o.pid = r.pid();
    o.clock_synchronized = r.clock_synchronized();
    if (r.has_global_rank()) o.global_rank = r.global_rank();
    if (r.has_peer()) o.peer = r.peer();
    if (i < imported.extras.size()) {
      if (o.global_rank < 0) o.global_rank = imported.extras[i].global_rank;
      if (o.peer < 0) o.peer = imported.extras[i].peer;
    }
    obs.push_back(std::move(o));
  }
  std::stable_sort(obs.begin(), obs.end(),
                   [](const auto& a, const auto& b) { return a.stop_ns < b.stop_ns; });
  analysis::StragglerDetector detector;
  std::vector<analysis::Finding> findings;
  for (const auto& o : obs) detector.Observe(o, findings);

  std::vector<TraceIncident> incidents;
  std::map<std::string, size_t> open;  // finding key → index of the open incident
  for (const analysis::Finding& f : findings) {
    const std::string key = analysis::FindingKey(f);
    auto it = open.find(key);
    if (f.active) {
      if (it == open.end()) {
        TraceIncident inc{f.kind, f.severity, f.entity, f.at, f.at, absl::InfinitePast(),
                          f.evidence, f.summary};
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
    out << "},\"opened\":" << Time(inc.opened) << ",\"updated\":" << Time(inc.updated)
        << ",\"resolved\":" << Time(inc.resolved) << ",\"evidence\":{";
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
  out << absl::StrFormat("%-13s %-9s %-40s %-24s %s\n", "KIND", "SEVERITY", "ENTITY", "OPENED",
                         "SUMMARY");
  for (const TraceIncident& inc : incidents) {
    std::string entity;
    for (const auto& [k, v] : inc.entity) absl::StrAppend(&entity, entity.empty() ? "" : " ", k, "=", v);
    out << absl::StrFormat("%-13s %-9s %-40s %-24s %s\n", analysis::IncidentKindName(inc.kind),
                           analysis::SeverityName(inc.severity), entity,
                           absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", inc.opened, absl::UTCTimeZone()),
                           inc.summary);
  }
}

}  // namespace ringside::daemon::ctl
