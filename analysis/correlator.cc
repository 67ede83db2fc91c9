#include "analysis/correlator.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringside::analysis {
namespace {

bool SwitchSide(IncidentKind k) {
  return k == IncidentKind::kPauseStorm || k == IncidentKind::kCongestion;
}

std::string Label(const Incident& inc, const char* k) {
  auto it = inc.entity.find(k);
  return it == inc.entity.end() ? std::string() : it->second;
}

std::string ShortName(const std::string& host) { return host.substr(0, host.find('.')); }

// A port read by the fabric scan (source ibmad): its device is a node GUID ("0x" + 16 hex digits,
// the form topologies name switches by), and its "node" label is the agent that scanned it, not
// where the port is.
bool IsScannedPort(const Incident& f) {
  const std::string d = Label(f, "device");
  if (d.size() != 18 || d[0] != '0' || d[1] != 'x') return false;
  return std::all_of(d.begin() + 2, d.end(), [](char c) { return absl::ascii_isxdigit(c); });
}

}  // namespace

std::string Correlator::HostOf(const Incident& f) const {
  if (!IsScannedPort(f)) return Label(f, "node");
  int port = 0;
  if (topology_ == nullptr || !absl::SimpleAtoi(Label(f, "port"), &port)) return "";
  const std::string guid = Label(f, "device");
  for (const HcaAttachment& h : topology_->attachments()) {
    if (h.leaf.id == guid && h.leaf.port == port && !h.host.empty()) return h.host;
  }
  return "";
}

bool Correlator::LeafWide(const Incident& f) const {
  return SwitchSide(f.kind) || (IsScannedPort(f) && HostOf(f).empty());
}

Correlator::Correlator(const Topology* topology, CorrelatorOptions options)
    : topology_(topology), options_(options) {}

void Correlator::Index(const std::string& node, const JobRank& jr, bool add) {
  if (add) {
    by_node_[node].insert(jr);
    by_short_node_[ShortName(node)].insert(node);
    return;
  }
  auto it = by_node_.find(node);
  if (it == by_node_.end()) return;
  it->second.erase(jr);
  if (it->second.empty()) {
    by_node_.erase(it);
    auto s = by_short_node_.find(ShortName(node));
    if (s != by_short_node_.end()) {
      s->second.erase(node);
      if (s->second.empty()) by_short_node_.erase(s);
    }
  }
}

void Correlator::ObserveCollective(const CollectiveObservation& obs) {
  if (obs.host.empty()) return;
  const int64_t rank = obs.global_rank >= 0 ? obs.global_rank : static_cast<int64_t>(obs.rank);
  const absl::Time seen = absl::FromUnixNanos(std::max(obs.stop_ns, obs.start_ns));
  auto& ranks = jobs_[obs.job];
  auto [it, fresh] = ranks.try_emplace(rank);
  Rank& r = it->second;
  if (fresh) {
    ++ranks_;
  } else if (r.node != obs.host) {
    Index(r.node, {obs.job, rank}, false);  // the rank moved (a restarted job)
  } else {
    r.seen = std::max(r.seen, seen);
    if (!obs.gpu_pci_bus_id.empty() && r.gpu_pci_bus_id != obs.gpu_pci_bus_id) {
      r.gpu_pci_bus_id = obs.gpu_pci_bus_id;
    }
    if (!obs.cgroup.empty() && r.cgroup != obs.cgroup) r.cgroup = obs.cgroup;
    const bool same_pod = r.pod.size() == obs.pod_namespace.size() + 1 + obs.pod.size() &&
                          absl::StartsWith(r.pod, obs.pod_namespace) &&
                          absl::EndsWith(r.pod, obs.pod);
    if (!obs.pod.empty() && !same_pod) r.pod = absl::StrCat(obs.pod_namespace, "/", obs.pod);
    return;
  }
  r.node = obs.host;
  r.seen = seen;
  r.pod = obs.pod.empty() ? "" : absl::StrCat(obs.pod_namespace, "/", obs.pod);
  r.gpu_pci_bus_id = obs.gpu_pci_bus_id;
  r.cgroup = obs.cgroup;
  Index(r.node, {obs.job, rank}, true);
}

void Correlator::Expire(absl::Time now) {
  const absl::Time cutoff = now - options_.rank_ttl;
  for (auto job = jobs_.begin(); job != jobs_.end();) {
    auto& ranks = job->second;
    for (auto it = ranks.begin(); it != ranks.end();) {
      if (it->second.seen < cutoff) {
        Index(it->second.node, {job->first, it->first}, false);
        ranks.erase(it++);
        --ranks_;
      } else {
        ++it;
      }
    }
    if (ranks.empty()) {
      jobs_.erase(job++);
    } else {
      ++job;
    }
  }
}

std::string Correlator::NodeOf(const std::string& job, int64_t rank) const {
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return "";
  auto r = j->second.find(rank);
  return r == j->second.end() ? "" : r->second.node;
}

RankPlacement Correlator::PlacementOf(const std::string& job, int64_t rank) const {
  RankPlacement p;
  auto j = jobs_.find(job);
  if (j == jobs_.end()) return p;
  auto r = j->second.find(rank);
  if (r == j->second.end()) return p;
  p.node = r->second.node;
  p.gpu_pci_bus_id = r->second.gpu_pci_bus_id;
  p.cgroup = r->second.cgroup;
  return p;
}

void Correlator::KeepSameChoice(const std::vector<CauseLink>& current,
                                std::vector<CauseLink>& fresh) {
  if (current.size() != fresh.size()) return;
  for (size_t i = 0; i < current.size(); ++i) {
    const CauseLink& a = current[i];
    const CauseLink& b = fresh[i];
    if (a.incident_id != b.incident_id || a.kind != b.kind || a.scope != b.scope ||
        a.entity != b.entity || a.key != b.key || a.shard != b.shard) {
      return;
    }
    // Only a cause with numbers of its own (GPU, host evidence) keeps its first ones.
    if (a.evidence.empty() && b.evidence.empty() && a.summary != b.summary) return;
  }
  fresh = current;
}

std::vector<std::string> Correlator::NodesOf(const std::string& job) const {
  std::set<std::string> nodes;
  if (auto j = jobs_.find(job); j != jobs_.end()) {
    for (const auto& [rank, r] : j->second) nodes.insert(r.node);
  }
  return {nodes.begin(), nodes.end()};
}

std::set<std::string> Correlator::LeavesOfNode(const std::string& node) const {
  if (topology_ == nullptr || node.empty()) return {};
  std::vector<std::string> v = topology_->LeavesOf(node);
  return {v.begin(), v.end()};
}

std::set<std::string> Correlator::LeavesOf(const Incident& f) const {
  if (std::string leaf = Label(f, "leaf"); !leaf.empty()) return {leaf};
  if (IsScannedPort(f)) {  // a switch's own port: the switch is the leaf, if it is one
    const std::string guid = Label(f, "device");
    if (topology_ != nullptr && !topology_->HostsOn(guid).empty()) return {guid};
    return {};
  }
  const std::string node = Label(f, "node");
  if (topology_ == nullptr || node.empty()) return {};
  std::string device = Label(f, "device");
  if (device.empty()) device = Label(f, "netdev");
  if (!device.empty()) {
    std::string leaf = topology_->LeafOf(node, device, Label(f, "port"));
    if (!leaf.empty()) return {leaf};
  }
  return LeavesOfNode(node);  // an NVLink, or a device the topology names differently
}

std::string Correlator::Describe(const Incident& f) const {
  std::vector<std::string> parts;
  const std::string node = Label(f, "node");
  if (!node.empty()) parts.push_back(node);
  if (std::string d = Label(f, "device"); !d.empty()) {
    parts.push_back(d);
    if (std::string p = Label(f, "port"); !p.empty() && p != "1") parts.push_back("port " + p);
  } else if (std::string n = Label(f, "netdev"); !n.empty()) {
    parts.push_back(n);
  } else if (std::string g = Label(f, "gpu"); !g.empty()) {
    parts.push_back(absl::StrCat("gpu ", g, " link ", Label(f, "link")));
  }
  if (std::string leaf = Label(f, "leaf"); !leaf.empty()) {
    std::string name = topology_ != nullptr ? topology_->LeafName(leaf) : "";
    parts.push_back(absl::StrCat("leaf ", name.empty() ? leaf : name));
  }
  if (std::string p = Label(f, "priority"); !p.empty()) parts.push_back("prio " + p);
  if (IsGpuKind(f.kind)) {
    std::string gpu = absl::StrCat("GPU ", Label(f, "gpu"));
    if (std::string bus = Label(f, "pci_bus_id"); !bus.empty()) absl::StrAppend(&gpu, " (", bus, ")");
    return absl::StrCat(IncidentKindName(f.kind), " on ", node, " ", gpu);
  }
  if (f.kind == IncidentKind::kStraggler) {
    return absl::StrCat("straggler rank ", Label(f, "rank"), " of job ", Label(f, "job"),
                        node.empty() ? "" : " on " + node);
  }
  if (f.kind == IncidentKind::kJobSlowdown)
    return absl::StrCat("job_slowdown of job ", Label(f, "job"));
  return absl::StrCat(IncidentKindName(f.kind), " on ", absl::StrJoin(parts, " "));
}

std::vector<CauseLink> Correlator::CausesOf(
    const Incident& s, const std::vector<const Incident*>& fabric,
    const absl::flat_hash_map<const Incident*, std::string>* remote_shard) const {
  std::set<std::string> nodes;
  const std::string job = Label(s, "job");
  if (s.kind == IncidentKind::kStraggler) {
    std::string node = Label(s, "node");
    if (node.empty()) {
      int64_t rank = 0;
      if (absl::SimpleAtoi(Label(s, "rank"), &rank)) node = NodeOf(job, rank);
    }
    if (!node.empty()) nodes.insert(node);
  } else if (s.kind == IncidentKind::kJobSlowdown) {
    for (std::string& n : NodesOf(job)) nodes.insert(std::move(n));
  } else {
    return {};
  }
  std::set<std::string> short_nodes;
  std::set<std::string> leaves;
  for (const std::string& n : nodes) {
    short_nodes.insert(ShortName(n));
    for (const std::string& l : LeavesOfNode(n)) leaves.insert(l);
  }
  struct Candidate {
    int scope;  // 0 node, 1 leaf, 2 spread (a port of the node is in the storm's spread)
    const Incident* f;
  };
  std::vector<Candidate> found;
  for (const Incident* f : fabric) {
    if (f == nullptr || !IsFabricKind(f->kind)) continue;
    if (f->opened > s.opened + options_.window) continue;  // began after the symptom
    if (f->resolved && *f->resolved < s.opened - options_.window) continue;  // over before it
    const std::string node = HostOf(*f);
    if (!node.empty() && (nodes.count(node) || short_nodes.count(ShortName(node)))) {
      found.push_back({0, f});
      continue;
    }
    if (!LeafWide(*f)) continue;
    bool on_leaf = false;
    for (const std::string& l : leaves.empty() ? std::set<std::string>() : LeavesOf(*f)) {
      on_leaf = on_leaf || leaves.count(l) > 0;
    }
    if (on_leaf) {
      found.push_back({1, f});
      continue;
    }
    // A port the storm reached ("spread/<node>/<port>", inferred when there is no topology):
    // its node's ranks are paused by it, leaf or no leaf.
    for (const auto& [k, v] : f->evidence) {
      if (!absl::StartsWith(k, "spread/")) continue;
      const std::string rest = k.substr(7);
      const std::string n = rest.substr(0, rest.find('/'));
      if (nodes.count(n) || short_nodes.count(ShortName(n))) {
        found.push_back({2, f});
        break;
      }
    }
  }
  std::sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) {
    // Node first; a leaf and a listed spread port are equally close.
    const int sa = a.scope == 0 ? 0 : 1, sb = b.scope == 0 ? 0 : 1;
    if (sa != sb) return sa < sb;
    if (a.f->severity != b.f->severity) return a.f->severity > b.f->severity;
    if (a.f->opened != b.f->opened) return a.f->opened < b.f->opened;
    return a.f->id < b.f->id;
  });
  std::vector<CauseLink> out;
  for (const Candidate& c : found) {
    if (out.size() >= options_.max_causes) break;
    CauseLink link;
    link.incident_id = c.f->id;
    link.kind = std::string(IncidentKindName(c.f->kind));
    link.scope = c.scope == 0 ? "node" : c.scope == 1 ? "leaf" : "spread";
    link.entity = c.f->entity;
    link.summary = Describe(*c.f);
    link.key = StableIncidentKey(*c.f);
    if (remote_shard != nullptr) {
      if (auto r = remote_shard->find(c.f); r != remote_shard->end()) {
        link.incident_id = 0;  // another shard's: its ids are its own
        link.shard = r->second;
      }
    }
    out.push_back(std::move(link));
  }
  if (out.empty() && s.kind == IncidentKind::kStraggler) {
    RankPlacement where;
    int64_t rank = 0;
    if (absl::SimpleAtoi(Label(s, "rank"), &rank)) where = PlacementOf(job, rank);
    if (where.node.empty() && !nodes.empty()) where.node = *nodes.begin();
    StragglerCauseContext ctx;
    ctx.gpus = gpus_;
    ctx.host = host_;
    ctx.detector = detector_;
    ctx.window = options_.window;
    ctx.max_causes = options_.max_causes;
    std::vector<CauseLink> more = NonFabricCauses(s, where, WhereOf(s), fabric, ctx);
    if (remote_shard != nullptr) {
      for (CauseLink& link : more) {
        for (const Incident* f : fabric) {
          if (f == nullptr || link.key.empty() || StableIncidentKey(*f) != link.key) continue;
          if (auto r = remote_shard->find(f); r != remote_shard->end()) {
            link.incident_id = 0;  // another shard's: its ids are its own
            link.shard = r->second;
          }
        }
      }
    }
    return more;
  }
  if (out.empty()) {
    CauseLink host;
    host.kind = "host";
    host.scope = "host";
    if (s.kind == IncidentKind::kStraggler) {
      const std::string node = nodes.empty() ? std::string("its node") : *nodes.begin();
      if (!nodes.empty()) host.entity["node"] = node;
      host.summary = absl::StrCat("no fabric incident on ", node,
                                  " or its leaf switch in the same window: compute or input "
                                  "pipeline on the host");
    } else {
      host.entity["job"] = job;
      host.summary = absl::StrCat("no fabric incident on the job's ", nodes.size(),
                                  " nodes or their leaf switches in the same window: compute, "
                                  "input pipeline or workload");
    }
    out.push_back(std::move(host));
  }
  return out;
}

std::vector<AffectedJob> Correlator::BlastRadius(const Incident& f, absl::Time now) const {
  if (!IsFabricKind(f.kind)) return {};
  std::set<std::string> nodes;
  if (std::string node = HostOf(f); !node.empty()) nodes.insert(node);
  if (LeafWide(f)) {
    if (topology_ != nullptr) {
      for (const std::string& leaf : LeavesOf(f)) {
        for (std::string& h : topology_->HostsOn(leaf)) nodes.insert(std::move(h));
      }
    }
    for (const auto& [k, v] : f.evidence) {  // "spread/<node>/<port>"
      if (!absl::StartsWith(k, "spread/")) continue;
      const std::string rest = k.substr(7);
      nodes.insert(rest.substr(0, rest.find('/')));
    }
  }
  const absl::Time cutoff = now - options_.rank_ttl;
  std::map<std::string, AffectedJob> jobs;
  auto add_node = [&](const std::string& node) {
    auto it = by_node_.find(node);
    if (it == by_node_.end()) return;
    for (const auto& [job, rank] : it->second) {
      auto j = jobs_.find(job);
      if (j == jobs_.end()) continue;
      auto r = j->second.find(rank);
      if (r == j->second.end() || r->second.seen < cutoff) continue;
      AffectedJob& a = jobs[job];
      a.job = job;
      a.ranks.push_back(rank);
      a.nodes.push_back(node);
      if (!r->second.pod.empty()) a.pods.push_back(r->second.pod);
    }
  };
  std::set<std::string> seen;
  for (const std::string& n : nodes) {
    // The plugin's host name and the topology's may differ by domain.
    std::set<std::string> names = {n};
    if (auto s = by_short_node_.find(ShortName(n)); s != by_short_node_.end()) {
      names.insert(s->second.begin(), s->second.end());
    }
    for (const std::string& name : names) {
      if (seen.insert(name).second) add_node(name);
    }
  }
  std::vector<AffectedJob> out;
  for (auto& [job, a] : jobs) {
    std::sort(a.ranks.begin(), a.ranks.end());
    a.ranks.erase(std::unique(a.ranks.begin(), a.ranks.end()), a.ranks.end());
    std::sort(a.nodes.begin(), a.nodes.end());
    a.nodes.erase(std::unique(a.nodes.begin(), a.nodes.end()), a.nodes.end());
    std::sort(a.pods.begin(), a.pods.end());
    a.pods.erase(std::unique(a.pods.begin(), a.pods.end()), a.pods.end());
    out.push_back(std::move(a));
  }
  return out;
}

absl::Status Correlator::Correlate(IncidentManager& incidents, absl::Time now,
                                   std::vector<IncidentChange>* changes,
                                   const RemoteIncidents* remote) const {
  std::vector<const Incident*> fabric;
  std::vector<uint64_t> symptoms, faults;
  for (const Incident* inc : incidents.Open()) {
    if (IsFabricKind(inc->kind)) {
      fabric.push_back(inc);
      faults.push_back(inc->id);
    } else if (IsGpuKind(inc->kind)) {
      fabric.push_back(inc);  // a straggler's candidate cause; no blast radius of its own
    } else {
      symptoms.push_back(inc->id);
    }
  }
  for (const Incident* inc : incidents.RecentlyResolved()) {
    if (IsFabricKind(inc->kind) || IsGpuKind(inc->kind)) fabric.push_back(inc);
  }
  absl::flat_hash_map<const Incident*, std::string> remote_shard;
  if (remote != nullptr) {
    for (const RemoteIncidents::Entry* e : remote->Fabric()) {
      fabric.push_back(&e->incident);
      remote_shard.emplace(&e->incident, e->shard);
    }
  }
  // Compute first, then write: writing does not move incidents, but keep the two apart anyway.
  std::vector<std::pair<uint64_t, std::vector<CauseLink>>> causes;
  for (uint64_t id : symptoms) {
    if (const Incident* s = incidents.Get(id)) {
      std::vector<CauseLink> c =
          CausesOf(*s, fabric, remote_shard.empty() ? nullptr : &remote_shard);
      KeepSameChoice(s->causes, c);
      causes.emplace_back(id, std::move(c));
    }
  }
  std::vector<std::pair<uint64_t, std::vector<AffectedJob>>> radius;
  for (uint64_t id : faults) {
    if (const Incident* f = incidents.Get(id)) {
      std::vector<AffectedJob> r = BlastRadius(*f, now);
      if (remote != nullptr) MergeAffected(r, remote->AffectedBy(StableIncidentKey(*f)));
      radius.emplace_back(id, std::move(r));
    }
  }
  absl::Status first;
  for (auto& [id, c] : causes) {
    absl::Status s = incidents.SetCauses(id, std::move(c), now, changes);
    if (!s.ok() && first.ok()) first = s;
  }
  for (auto& [id, r] : radius) {
    absl::Status s = incidents.SetAffected(id, std::move(r), now, changes);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace ringside::analysis
