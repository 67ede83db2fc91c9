#include "analysis/remote_incidents.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/numbers.h"

namespace ringside::analysis {
namespace {

bool IsSymptom(IncidentKind k) {
  return k == IncidentKind::kStraggler || k == IncidentKind::kJobSlowdown;
}

std::string Label(const Incident& i, const char* name) {
  auto it = i.entity.find(name);
  return it == i.entity.end() ? std::string() : it->second;
}

template <typename T>
void SortUnique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

bool RemoteIncidents::Keep(const Incident& incident) const {
  if (IsFabricKind(incident.kind) || IsGpuKind(incident.kind)) return true;
  if (!IsSymptom(incident.kind)) return false;
  for (const CauseLink& c : incident.causes) {
    if (!c.key.empty()) return true;
  }
  return false;
}

void RemoteIncidents::Put(const std::string& shard, const Incident& incident) {
  const std::string key = StableIncidentKey(incident);
  auto& entries = shards_[shard];
  auto it = entries.find(key);
  if (!Keep(incident)) {
    // A symptom whose causes no longer name anything: what it contributed goes.
    if (it != entries.end()) {
      entries.erase(it);
      ++version_;
    }
    return;
  }
  if (it != entries.end() && it->second.incident.id == incident.id &&
      incident.revision < it->second.incident.revision) {
    return;  // an older copy from the same aggregator
  }
  if (it != entries.end() && it->second.incident == incident) return;
  Entry& e = entries[key];
  e.shard = shard;
  e.key = key;
  e.incident = incident;
  ++version_;
}

void RemoteIncidents::Replace(const std::string& shard, const std::vector<Incident>& incidents) {
  shards_.erase(shard);
  ++version_;
  for (const Incident& i : incidents) Put(shard, i);
}

void RemoteIncidents::Apply(const std::string& shard, const Incident& incident) {
  Put(shard, incident);
}

void RemoteIncidents::Expire(absl::Time now) {
  const absl::Time cutoff = now - keep_resolved_;
  for (auto& [shard, entries] : shards_) {
    for (auto it = entries.begin(); it != entries.end();) {
      const Incident& i = it->second.incident;
      if (i.resolved && *i.resolved < cutoff) {
        entries.erase(it++);
        ++version_;
      } else {
        ++it;
      }
    }
  }
}

std::vector<const RemoteIncidents::Entry*> RemoteIncidents::Fabric() const {
  std::vector<const Entry*> out;
  for (const auto& [shard, entries] : shards_) {
    for (const auto& [key, e] : entries) {
      if (IsFabricKind(e.incident.kind) || IsGpuKind(e.incident.kind)) out.push_back(&e);
    }
  }
  // Deterministic order (the maps are unordered): replicas must compute the same causes.
  std::sort(out.begin(), out.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->shard, a->key) < std::tie(b->shard, b->key);
  });
  return out;
}

std::vector<AffectedJob> RemoteIncidents::AffectedBy(const std::string& key) const {
  std::map<std::string, AffectedJob> jobs;
  for (const auto& [shard, entries] : shards_) {
    for (const auto& [k, e] : entries) {
      const Incident& s = e.incident;
      if (!IsSymptom(s.kind)) continue;
      bool names = false;
      for (const CauseLink& c : s.causes) names = names || c.key == key;
      if (!names) continue;
      const std::string job = Label(s, "job");
      if (job.empty()) continue;
      AffectedJob& a = jobs[job];
      a.job = job;
      if (s.kind == IncidentKind::kStraggler) {
        int64_t rank = 0;
        if (absl::SimpleAtoi(Label(s, "rank"), &rank)) a.ranks.push_back(rank);
        if (std::string node = Label(s, "node"); !node.empty()) a.nodes.push_back(node);
      }
    }
  }
  std::vector<AffectedJob> out;
  for (auto& [job, a] : jobs) {
    SortUnique(a.ranks);
    SortUnique(a.nodes);
    out.push_back(std::move(a));
  }
  return out;
}

size_t RemoteIncidents::size() const {
  size_t n = 0;
  for (const auto& [shard, entries] : shards_) n += entries.size();
  return n;
}

size_t RemoteIncidents::size(const std::string& shard) const {
  auto it = shards_.find(shard);
  return it == shards_.end() ? 0 : it->second.size();
}

void MergeAffected(std::vector<AffectedJob>& into, const std::vector<AffectedJob>& extra) {
  if (extra.empty()) return;
  for (const AffectedJob& x : extra) {
    auto it = std::find_if(into.begin(), into.end(),
                           [&](const AffectedJob& a) { return a.job == x.job; });
    if (it == into.end()) {
      into.push_back(x);
      continue;
    }
    it->ranks.insert(it->ranks.end(), x.ranks.begin(), x.ranks.end());
    it->nodes.insert(it->nodes.end(), x.nodes.begin(), x.nodes.end());
    it->pods.insert(it->pods.end(), x.pods.begin(), x.pods.end());
    SortUnique(it->ranks);
    SortUnique(it->nodes);
    SortUnique(it->pods);
  }
  std::sort(into.begin(), into.end(),
            [](const AffectedJob& a, const AffectedJob& b) { return a.job < b.job; });
}

}  // namespace ringside::analysis
