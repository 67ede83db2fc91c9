#include "daemon/ctl/fleet_merge.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringside::daemon::ctl {
namespace {

// True when `a` is the better copy of one incident.
bool Fresher(const v1::Incident& a, const v1::Incident& b) {
  if (a.revision() != b.revision()) return a.revision() > b.revision();
  return a.updated_unix_nanos() > b.updated_unix_nanos();
}

int SeverityRank(const std::string& s) {
  if (s == "critical") return 3;
  if (s == "warning") return 2;
  if (s == "info") return 1;
  return 0;
}

}  // namespace

std::string IncidentIdentity(const v1::Incident& incident) {
  if (!incident.key().empty()) return incident.key();
  std::map<std::string, std::string> sorted(incident.entity().begin(), incident.entity().end());
  std::string out = absl::StrCat(incident.kind(), "|");
  for (const auto& [k, v] : sorted) absl::StrAppend(&out, k, "=", v, "|");
  absl::StrAppend(&out, incident.opened_unix_nanos());
  return out;
}

Incidents MergeIncidents(const std::vector<const Incidents*>& lists, size_t limit) {
  std::vector<v1::Incident> merged;
  std::map<std::string, size_t> where;
  for (const Incidents* list : lists) {
    for (const v1::Incident& i : *list) {
      auto [it, fresh] = where.emplace(IncidentIdentity(i), merged.size());
      if (fresh) {
        merged.push_back(i);
      } else if (Fresher(i, merged[it->second])) {
        merged[it->second] = i;
      }
    }
  }
  std::stable_sort(merged.begin(), merged.end(), [](const v1::Incident& a, const v1::Incident& b) {
    return a.updated_unix_nanos() > b.updated_unix_nanos();
  });
  if (limit > 0 && merged.size() > limit) merged.resize(limit);
  Incidents out;
  for (v1::Incident& i : merged) *out.Add() = std::move(i);
  return out;
}

google::protobuf::RepeatedPtrField<v1::LinkStatus> MergeLinks(
    const std::vector<const google::protobuf::RepeatedPtrField<v1::LinkStatus>*>& lists) {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, v1::LinkStatus> byid;
  for (const auto* list : lists) {
    for (const v1::LinkStatus& l : *list) {
      auto [it, fresh] = byid.try_emplace({l.node(), l.device(), l.port(), l.source()}, l);
      if (!fresh && l.last_seen_unix_nanos() > it->second.last_seen_unix_nanos()) it->second = l;
    }
  }
  google::protobuf::RepeatedPtrField<v1::LinkStatus> out;
  for (auto& [id, l] : byid) *out.Add() = std::move(l);
  return out;
}

google::protobuf::RepeatedPtrField<v1::RankScore> MergeStragglers(
    const std::vector<const google::protobuf::RepeatedPtrField<v1::RankScore>*>& lists,
    size_t limit) {
  std::vector<v1::RankScore> merged;
  std::map<std::tuple<std::string, std::string, int64_t>, size_t> where;
  for (const auto* list : lists) {
    for (const v1::RankScore& r : *list) {
      auto [it, fresh] = where.emplace(std::make_tuple(r.job(), r.comm(), r.rank()), merged.size());
      if (fresh) {
        merged.push_back(r);
      } else if (r.score() > merged[it->second].score()) {
        merged[it->second] = r;
      }
    }
  }
  std::stable_sort(
      merged.begin(), merged.end(),
      [](const v1::RankScore& a, const v1::RankScore& b) { return a.score() > b.score(); });
  if (limit > 0 && merged.size() > limit) merged.resize(limit);
  google::protobuf::RepeatedPtrField<v1::RankScore> out;
  for (v1::RankScore& r : merged) *out.Add() = std::move(r);
  return out;
}

v1::ClusterStatus MergeStatus(const std::vector<const v1::ClusterStatus*>& statuses,
                              const Incidents& open) {
  v1::ClusterStatus out;
  std::set<std::string> seen_shards, jobs, versions;
  for (const v1::ClusterStatus* s : statuses) {
    std::vector<std::string> sorted_jobs(s->jobs().begin(), s->jobs().end());
    std::sort(sorted_jobs.begin(), sorted_jobs.end());
    const std::string shard =
        absl::StrCat(s->nodes(), "/", s->stale_nodes(), "/", s->links(), "/", s->unhealthy_links(),
                     "/", absl::StrJoin(sorted_jobs, ","));
    jobs.insert(sorted_jobs.begin(), sorted_jobs.end());
    if (!s->aggregator_version().empty()) versions.insert(s->aggregator_version());
    out.set_now_unix_nanos(std::max(out.now_unix_nanos(), s->now_unix_nanos()));
    if (!seen_shards.insert(shard).second) continue;
    out.set_nodes(out.nodes() + s->nodes());
    out.set_stale_nodes(out.stale_nodes() + s->stale_nodes());
    out.set_links(out.links() + s->links());
    out.set_unhealthy_links(out.unhealthy_links() + s->unhealthy_links());
  }
  for (const v1::Incident& i : open) {
    if (!i.open()) continue;
    ++(*out.mutable_open_incidents_by_kind())[i.kind()];
    for (const v1::AffectedJob& a : i.affected()) jobs.insert(a.job());
    auto job = i.entity().find("job");
    if (job != i.entity().end() && !job->second.empty()) jobs.insert(job->second);
  }
  for (const std::string& j : jobs) out.add_jobs(j);
  out.set_aggregator_version(absl::StrJoin(versions, ", "));
  std::vector<const v1::Incident*> severe;
  for (const v1::Incident& i : open) {
    if (i.open()) severe.push_back(&i);
  }
  std::stable_sort(severe.begin(), severe.end(), [](const v1::Incident* a, const v1::Incident* b) {
    if (SeverityRank(a->severity()) != SeverityRank(b->severity())) {
      return SeverityRank(a->severity()) > SeverityRank(b->severity());
    }
    return a->opened_unix_nanos() > b->opened_unix_nanos();
  });
  for (size_t k = 0; k < severe.size() && k < 20; ++k) *out.add_open_incidents() = *severe[k];
  return out;
}

}  // namespace ringside::daemon::ctl
