#include "daemon/ctl/fleet_merge.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

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

// Distinct non-empty values in first-seen order, joined by ",".
void AddDistinct(std::vector<std::string>& seen, const std::string& v) {
  if (!v.empty() && std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
}

// A message's identity for deduplication: its deterministic serialization.
template <typename M>
std::string Identity(const M& m) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

}  // namespace

v1::TopologyView MergeTopologies(const std::vector<const v1::TopologyView*>& views,
                                 size_t max_events) {
  v1::TopologyView out;
  std::vector<std::string> sources, discoveries, formats;
  using PortKey = std::tuple<std::string, std::string, uint32_t, std::string, std::string>;
  std::map<PortKey, const v1::TopologyPort*> ports;
  std::map<std::string, const v1::TopologySwitch*> switches;
  std::vector<std::string> switch_order;
  std::set<std::string> seen_disagreements, seen_events, seen_links;
  std::vector<const v1::TopologyEvent*> events;
  uint64_t events_total = 0;
  for (const v1::TopologyView* v : views) {
    AddDistinct(sources, v->source());
    AddDistinct(discoveries, v->discovery());
    AddDistinct(formats, v->format());
    for (const v1::TopologyPort& p : v->ports()) {
      const PortKey key{p.host(), p.device(), p.ca_port(), p.ca_guid(),
                        p.host().empty() ? p.description() : std::string()};
      ports.emplace(key, &p);
    }
    for (const v1::TopologySwitch& s : v->switches()) {
      if (switches.emplace(s.id(), &s).second) switch_order.push_back(s.id());
    }
    for (const v1::TopologySwitchLink& l : v->switch_links()) {
      if (seen_links.insert(Identity(l)).second) *out.add_switch_links() = l;
    }
    for (const v1::TopologyDisagreement& d : v->disagreements()) {
      if (seen_disagreements.insert(Identity(d)).second) *out.add_disagreements() = d;
    }
    for (const v1::TopologyEvent& e : v->events()) {
      if (seen_events.insert(Identity(e)).second) events.push_back(&e);
    }
    events_total = std::max(events_total, v->events_total());
  }
  out.set_source(absl::StrJoin(sources, ","));
  out.set_discovery(absl::StrJoin(discoveries, ","));
  out.set_format(absl::StrJoin(formats, ","));
  std::map<std::string, std::set<std::string>> hosts_on;
  std::map<std::string, uint32_t> ports_on;
  for (const auto& [key, p] : ports) {
    *out.add_ports() = *p;
    if (!p->has_peer() || p->peer().id().empty()) continue;
    ++ports_on[p->peer().id()];
    if (!p->host().empty()) hosts_on[p->peer().id()].insert(p->host());
  }
  std::sort(switch_order.begin(), switch_order.end());
  for (const std::string& id : switch_order) {
    v1::TopologySwitch* s = out.add_switches();
    *s = *switches[id];
    if (auto it = ports_on.find(id); it != ports_on.end()) {
      s->set_ports(it->second);
      s->set_hosts(static_cast<uint32_t>(hosts_on[id].size()));
    }
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const v1::TopologyEvent* a, const v1::TopologyEvent* b) {
                     return a->time_unix_nanos() < b->time_unix_nanos();
                   });
  const size_t first = max_events > 0 && events.size() > max_events ? events.size() - max_events : 0;
  for (size_t i = first; i < events.size(); ++i) *out.add_events() = *events[i];
  out.set_events_total(std::max<uint64_t>(events_total, events.size()));
  return out;
}

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
