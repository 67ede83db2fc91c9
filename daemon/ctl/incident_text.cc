#include "daemon/ctl/incident_text.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/ctl/relative_time.h"

namespace ringside::daemon::ctl {
namespace {

const char* const kKnownKeys[] = {"job",    "rank", "comm", "node",     "device", "port",
                                  "netdev", "gpu",  "link", "priority", "source", "pod",
                                  "namespace", "cuda_device", "pci_bus_id", "cgroup"};

bool Known(const std::string& key) {
  return std::find(std::begin(kKnownKeys), std::end(kKnownKeys), key) != std::end(kKnownKeys);
}

std::string Get(const EntityMap& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

}  // namespace

std::string PodText(const std::string& pod_namespace, const std::string& pod) {
  if (pod.empty()) return "-";
  return pod_namespace.empty() ? pod : absl::StrCat(pod_namespace, "/", pod);
}

std::string EntityText(const EntityMap& entity) {
  std::vector<std::string> parts;
  const std::string job = Get(entity, "job");
  const std::string rank = Get(entity, "rank");
  const std::string comm = Get(entity, "comm");
  const std::string node = Get(entity, "node");
  if (!rank.empty()) {
    std::vector<std::string> of;
    if (!job.empty()) of.push_back(absl::StrCat("job ", job));
    if (!comm.empty()) of.push_back(absl::StrCat("comm ", comm));
    parts.push_back(of.empty() ? absl::StrCat("rank ", rank)
                               : absl::StrCat("rank ", rank, " (", absl::StrJoin(of, ", "), ")"));
    if (!node.empty()) parts.push_back(absl::StrCat("on ", node));
    if (std::string pod = Get(entity, "pod"); !pod.empty()) {
      parts.push_back(absl::StrCat("pod ", PodText(Get(entity, "namespace"), pod)));
    }
    // The rank's GPU in its process (one process may drive several).
    if (std::string d = Get(entity, "cuda_device"); !d.empty()) {
      parts.push_back(absl::StrCat("cuda device ", d));
    }
  } else {
    if (!job.empty()) parts.push_back(absl::StrCat("job ", job));
    if (!comm.empty()) parts.push_back(absl::StrCat("comm ", comm));
    if (!node.empty()) parts.push_back(node);
  }
  if (std::string d = Get(entity, "device"); !d.empty()) parts.push_back(d);
  if (std::string p = Get(entity, "port"); !p.empty()) parts.push_back(absl::StrCat("port ", p));
  if (std::string n = Get(entity, "netdev"); !n.empty()) parts.push_back(n);
  if (std::string g = Get(entity, "gpu"); !g.empty()) {
    // A GPU incident's GPU: its NVML index and PCI bus id.
    const std::string bus = Get(entity, "pci_bus_id");
    parts.push_back(bus.empty() ? absl::StrCat("gpu ", g) : absl::StrCat("gpu ", g, " (", bus, ")"));
  } else if (std::string bus = Get(entity, "pci_bus_id"); !bus.empty()) {
    parts.push_back(absl::StrCat("gpu ", bus));
  }
  if (std::string c = Get(entity, "cgroup"); !c.empty()) parts.push_back(absl::StrCat("cgroup ", c));
  if (std::string l = Get(entity, "link"); !l.empty()) parts.push_back(absl::StrCat("link ", l));
  if (std::string p = Get(entity, "priority"); !p.empty()) {
    parts.push_back(absl::StrCat("prio ", p));
  }
  std::map<std::string, std::string> others;
  for (const auto& [k, v] : entity) {
    if (!Known(k)) others[k] = v;
  }
  for (const auto& [k, v] : others) parts.push_back(absl::StrCat(k, "=", v));
  return parts.empty() ? "-" : absl::StrJoin(parts, " ");
}

std::string Headline(const v1::Incident& incident) {
  return absl::StrCat(incident.kind().empty() ? "incident" : incident.kind(), " ",
                      EntityText(incident.entity()));
}

std::string RankRanges(const google::protobuf::RepeatedField<int64_t>& ranks) {
  std::vector<int64_t> r(ranks.begin(), ranks.end());
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    out.push_back(j == i ? absl::StrCat(r[i]) : absl::StrCat(r[i], "-", r[j]));
    i = j + 1;
  }
  return absl::StrJoin(out, ",");
}

std::string StateText(const v1::Incident& incident) {
  return incident.open() ? "open" : "resolved";
}

Table IncidentsTable(const google::protobuf::RepeatedPtrField<v1::Incident>& incidents,
                     absl::Time now, bool with_key) {
  std::vector<std::string> head = {"ID",     "KIND",   "SEVERITY", "STATE",
                                   "ENTITY", "OPENED", "UPDATED",  "SUMMARY"};
  if (with_key) head.insert(head.begin() + 1, "KEY");
  Table t(head);
  t.RightAlign(0);
  for (const v1::Incident& i : incidents) {
    std::vector<std::string> row = {
        absl::StrCat(i.id()),
        i.kind(),
        i.severity(),
        i.open() ? "open" : absl::StrCat("resolved ", Ago(i.resolved_unix_nanos(), now)),
        EntityText(i.entity()),
        Ago(i.opened_unix_nanos(), now),
        Ago(i.updated_unix_nanos(), now),
        Cell(i.summary(), 80)};
    if (with_key) row.insert(row.begin() + 1, i.key().empty() ? "-" : i.key());
    t.AddRow(row);
  }
  return t;
}

std::string ChangeLine(const v1::IncidentChange& change, absl::Time now) {
  const v1::Incident& i = change.incident();
  int64_t at = 0;
  const char* type = "CHANGED";
  switch (change.type()) {
    case v1::IncidentChange::OPENED:
      type = change.initial() ? "OPEN" : "OPENED";
      at = i.opened_unix_nanos();
      break;
    case v1::IncidentChange::UPDATED:
      type = "UPDATED";
      at = i.updated_unix_nanos();
      break;
    case v1::IncidentChange::RESOLVED:
      type = "RESOLVED";
      at = i.resolved_unix_nanos();
      break;
    default:
      break;
  }
  if (at == 0) at = absl::ToUnixNanos(now);
  std::string text = absl::StrCat(Rfc3339(at - at % 1'000'000'000), "  ", type,
                                  std::string(10 - std::string(type).size(), ' '), "#", i.id(), " ",
                                  i.severity().empty() ? "-" : i.severity(), " ", Headline(i));
  if (change.type() == v1::IncidentChange::RESOLVED && !i.resolution().empty()) {
    absl::StrAppend(&text, ": ", i.resolution());
  } else if (!i.summary().empty()) {
    absl::StrAppend(&text, ": ", i.summary());
  }
  return Cell(text);
}

}  // namespace ringside::daemon::ctl
