#include "analysis/straggler_cause.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/pci_bus_id.h"
#include "analysis/straggler_where.h"

namespace ringside::analysis {
namespace {

std::string Label(const std::map<std::string, std::string>& m, const char* k) {
  auto it = m.find(k);
  return it == m.end() ? std::string() : it->second;
}

std::string ShortName(const std::string& host) { return host.substr(0, host.find('.')); }

std::string Pct(double share) { return absl::StrFormat("%.0f%%", 100 * share); }

}  // namespace

LatenessWhere ParseLatenessWhere(absl::string_view s) {
  if (s == "host") return LatenessWhere::kHost;
  if (s == "gpu") return LatenessWhere::kGpu;
  return LatenessWhere::kUnknown;
}

LatenessWhere WhereOf(const Incident& s) {
  if (std::string w = Label(s.entity, "where"); !w.empty()) return ParseLatenessWhere(w);
  // The straggler detector's split (host_share in its evidence): the same answer the incident,
  // the CLI, the alert and the Query API give.
  if (const std::string w = StragglerWhere(s.evidence); w != "unknown") return ParseLatenessWhere(w);
  for (absl::string_view w : {"host", "gpu"}) {
    if (absl::StrContains(s.summary, absl::StrCat("where=", w))) return ParseLatenessWhere(w);
  }
  return LatenessWhere::kUnknown;
}

std::vector<CauseLink> NonFabricCauses(const Incident& s, const RankPlacement& rank,
                                       LatenessWhere where,
                                       const std::vector<const Incident*>& gpu_incidents,
                                       const StragglerCauseContext& ctx) {
  std::vector<CauseLink> out;
  std::map<std::string, double> checked;
  const std::string bus = NormalizePciBusId(rank.gpu_pci_bus_id);
  std::string index;
  if (!bus.empty() && ctx.gpus != nullptr && !rank.node.empty()) {
    index = ctx.gpus->IndexOf(rank.node, bus);
  }
  std::string gpu_name = "its GPU";
  if (!bus.empty()) gpu_name = index.empty() ? absl::StrCat("GPU ", bus)
                                             : absl::StrCat("GPU ", index, " (", bus, ")");

  // 1. A GPU incident on its own GPU.
  if (where != LatenessWhere::kHost && !bus.empty() && !rank.node.empty()) {
    std::vector<const Incident*> found;
    for (const Incident* g : gpu_incidents) {
      if (g == nullptr || !IsGpuKind(g->kind)) continue;
      if (g->opened > s.opened + ctx.window) continue;
      if (g->resolved && *g->resolved < s.opened - ctx.window) continue;
      const std::string node = Label(g->entity, "node");
      if (node != rank.node && ShortName(node) != ShortName(rank.node)) continue;
      const std::string gbus = NormalizePciBusId(Label(g->entity, "pci_bus_id"));
      const bool same = !gbus.empty() ? gbus == bus
                                      : !index.empty() && Label(g->entity, "gpu") == index;
      if (same) found.push_back(g);
    }
    std::sort(found.begin(), found.end(), [](const Incident* a, const Incident* b) {
      if (a->open() != b->open()) return a->open();
      if (a->severity != b->severity) return a->severity > b->severity;
      if (a->opened != b->opened) return a->opened < b->opened;
      return a->id < b->id;
    });
    for (const Incident* g : found) {
      if (out.size() >= ctx.max_causes) break;
      CauseLink link;
      link.incident_id = g->id;
      link.kind = std::string(IncidentKindName(g->kind));
      link.scope = "gpu";
      link.entity = g->entity;
      link.summary = g->summary.empty()
                         ? absl::StrCat(link.kind, " on ", rank.node, " ", gpu_name)
                         : g->summary;
      link.key = StableIncidentKey(*g);
      link.evidence = g->evidence;
      out.push_back(std::move(link));
    }
    if (!out.empty()) return out;
    checked["gpu_incidents"] = 0;
    if (ctx.detector != nullptr && !index.empty()) {
      if (double n = ctx.detector->ComputeProcesses(rank.node, index); n >= 0) {
        checked["gpu_compute_processes"] = n;
      }
    }
  }

  // 2. Host evidence.
  if (where != LatenessWhere::kGpu && ctx.host != nullptr && !rank.node.empty()) {
    const HostOptions& o = ctx.host->options();
    const HostEvidence e =
        ctx.host->Of(rank.node, rank.cgroup, s.updated - std::max(o.window, absl::Seconds(60)));
    const std::string w = absl::FormatDuration(o.window);
    auto add = [&](const char* kind, std::map<std::string, std::string> entity,
                   std::string summary, std::map<std::string, double> ev) {
      if (out.size() >= ctx.max_causes) return;
      CauseLink link;
      link.kind = kind;
      link.scope = "host";
      link.entity = std::move(entity);
      link.summary = std::move(summary);
      link.evidence = std::move(ev);
      out.push_back(std::move(link));
    };
    if (e.cgroup_throttled_periods >= 0) {
      checked["cgroup_throttled_share"] = e.cgroup_throttled_periods;
      if (e.cgroup_throttled_periods >= o.cgroup_throttled_share) {
        std::map<std::string, double> ev{{"cgroup_throttled_share", e.cgroup_throttled_periods}};
        if (e.cgroup_throttled_s_per_s >= 0) ev["cgroup_throttled_s_per_s"] = e.cgroup_throttled_s_per_s;
        if (e.cgroup_cpu_s_per_s >= 0) ev["cgroup_cpu_s_per_s"] = e.cgroup_cpu_s_per_s;
        add("cgroup_cpu_throttled", {{"node", rank.node}, {"cgroup", rank.cgroup}},
            absl::StrCat("launched late on the host: its CPU cgroup ", rank.cgroup,
                         " was throttled in ", Pct(e.cgroup_throttled_periods),
                         " of its CFS periods over the last ", w, " on ", rank.node),
            std::move(ev));
      }
    }
    struct Pressure {
      const char* kind;
      const char* what;
      double share;
      double threshold;
      const char* key;
    };
    for (const Pressure& p :
         {Pressure{"cpu_pressure", "CPU", e.cpu_some, o.cpu_pressure_share, "cpu_pressure_some_share"},
          Pressure{"memory_pressure", "memory", e.memory_some, o.memory_pressure_share,
                   "memory_pressure_some_share"},
          Pressure{"io_pressure", "IO", e.io_some, o.io_pressure_share, "io_pressure_some_share"}}) {
      if (p.share < 0) continue;
      checked[p.key] = p.share;
      if (p.share >= p.threshold) {
        add(p.kind, {{"node", rank.node}},
            absl::StrCat("launched late on the host: ", p.what, " pressure on ", rank.node,
                         ", some task stalled ", Pct(p.share), " of the last ", w),
            {{p.key, p.share}});
      }
    }
    if (!out.empty()) return out;
  }

  // 3. Nothing found: the host, with what was checked.
  CauseLink host;
  host.kind = "host";
  host.scope = "host";
  const std::string node = rank.node.empty() ? std::string("its node") : rank.node;
  if (!rank.node.empty()) host.entity["node"] = rank.node;
  std::vector<std::string> clean = {absl::StrCat("no fabric incident on ", node,
                                                 " or its leaf switch in the same window")};
  if (checked.count("gpu_incidents")) clean.push_back(absl::StrCat("no GPU incident on ", gpu_name));
  if (auto it = checked.find("gpu_compute_processes"); it != checked.end() && it->second > 1) {
    // Several processes time-share the GPU: their kernels start by turns.
    clean.push_back(absl::StrCat(gpu_name, " shared by ", it->second, " compute processes"));
  }
  else if (where != LatenessWhere::kHost) clean.push_back("its GPU unknown (no PCI bus id)");
  if (auto it = checked.find("cgroup_throttled_share"); it != checked.end()) {
    clean.push_back(absl::StrCat("cgroup throttled ", Pct(it->second)));
  }
  if (auto it = checked.find("cpu_pressure_some_share"); it != checked.end()) {
    clean.push_back(absl::StrCat("CPU pressure ", Pct(it->second)));
  }
  const char* tail = where == LatenessWhere::kGpu ? "compute behind it on the GPU"
                                                  : "compute or input pipeline on the host";
  host.summary = absl::StrCat(absl::StrJoin(clean, ", "), ": ", tail);
  host.evidence = std::move(checked);
  out.push_back(std::move(host));
  return out;
}

}  // namespace ringside::analysis
