#include "daemon/aggregator/query/query_convert.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "analysis/straggler_where.h"

namespace ringside::daemon {
namespace {

absl::Time FromUnixNanosOrInfinitePast(int64_t ns) {
  return ns == 0 ? absl::InfinitePast() : absl::FromUnixNanos(ns);
}

}  // namespace

int64_t ToUnixNanosOrZero(absl::Time t) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) return 0;
  return absl::ToUnixNanos(t);
}

void ToProto(const analysis::Incident& in, v1::Incident* out) {
  out->Clear();
  out->set_id(in.id);
  out->set_key(analysis::StableIncidentKey(in));
  out->set_kind(std::string(analysis::IncidentKindName(in.kind)));
  out->set_severity(std::string(analysis::SeverityName(in.severity)));
  for (const auto& [k, v] : in.entity) (*out->mutable_entity())[k] = v;
  out->set_opened_unix_nanos(ToUnixNanosOrZero(in.opened));
  out->set_updated_unix_nanos(ToUnixNanosOrZero(in.updated));
  out->set_resolved_unix_nanos(in.resolved ? ToUnixNanosOrZero(*in.resolved) : 0);
  for (const auto& [k, v] : in.evidence) (*out->mutable_evidence())[k] = v;
  out->set_summary(in.summary);
  out->set_resolution(in.resolution);
  if (in.kind == analysis::IncidentKind::kStraggler) {
    out->set_where(analysis::StragglerWhere(in.evidence));
  }
  for (const analysis::CauseLink& c : in.causes) {
    v1::CauseLink* pc = out->add_causes();
    pc->set_incident_id(c.incident_id);
    pc->set_kind(c.kind);
    pc->set_scope(c.scope);
    for (const auto& [k, v] : c.entity) (*pc->mutable_entity())[k] = v;
    pc->set_summary(c.summary);
    pc->set_key(c.key);
    pc->set_shard(c.shard);
    for (const auto& [k, v] : c.evidence) (*pc->mutable_evidence())[k] = v;
  }
  for (const analysis::AffectedJob& j : in.affected) {
    v1::AffectedJob* pj = out->add_affected();
    pj->set_job(j.job);
    for (int64_t r : j.ranks) pj->add_ranks(r);
    for (const std::string& n : j.nodes) pj->add_nodes(n);
    for (const std::string& p : j.pods) pj->add_pods(p);
  }
  out->set_revision(in.revision);
  out->set_open(in.open());
}

v1::Incident ToProto(const analysis::Incident& in) {
  v1::Incident out;
  ToProto(in, &out);
  return out;
}

absl::StatusOr<analysis::Incident> FromProto(const v1::Incident& in) {
  analysis::Incident out;
  std::optional<analysis::IncidentKind> kind = analysis::ParseIncidentKind(in.kind());
  if (!kind)
    return absl::InvalidArgumentError(absl::StrCat("unknown incident kind \"", in.kind(), "\""));
  std::optional<analysis::Severity> severity = analysis::ParseSeverity(in.severity());
  if (!severity) {
    return absl::InvalidArgumentError(absl::StrCat("unknown severity \"", in.severity(), "\""));
  }
  out.id = in.id();
  out.kind = *kind;
  out.severity = *severity;
  out.entity.insert(in.entity().begin(), in.entity().end());
  out.opened = FromUnixNanosOrInfinitePast(in.opened_unix_nanos());
  out.updated = FromUnixNanosOrInfinitePast(in.updated_unix_nanos());
  if (!in.open()) out.resolved = FromUnixNanosOrInfinitePast(in.resolved_unix_nanos());
  out.evidence.insert(in.evidence().begin(), in.evidence().end());
  out.summary = in.summary();
  out.resolution = in.resolution();
  for (const v1::CauseLink& c : in.causes()) {
    analysis::CauseLink cl;
    cl.incident_id = c.incident_id();
    cl.kind = c.kind();
    cl.scope = c.scope();
    cl.entity.insert(c.entity().begin(), c.entity().end());
    cl.summary = c.summary();
    cl.key = c.key();
    cl.shard = c.shard();
    cl.evidence.insert(c.evidence().begin(), c.evidence().end());
    out.causes.push_back(std::move(cl));
  }
  for (const v1::AffectedJob& j : in.affected()) {
    analysis::AffectedJob aj;
    aj.job = j.job();
    aj.ranks.assign(j.ranks().begin(), j.ranks().end());
    aj.nodes.assign(j.nodes().begin(), j.nodes().end());
    aj.pods.assign(j.pods().begin(), j.pods().end());
    out.affected.push_back(std::move(aj));
  }
  out.revision = in.revision();
  return out;
}

v1::IncidentChange::Type ToProto(analysis::IncidentChangeType type) {
  switch (type) {
    case analysis::IncidentChangeType::kOpened:
      return v1::IncidentChange::OPENED;
    case analysis::IncidentChangeType::kUpdated:
      return v1::IncidentChange::UPDATED;
    case analysis::IncidentChangeType::kResolved:
      return v1::IncidentChange::RESOLVED;
  }
  return v1::IncidentChange::TYPE_UNSPECIFIED;
}

v1::IncidentChange ToProto(const analysis::IncidentChange& change, bool initial) {
  v1::IncidentChange out;
  out.set_type(ToProto(change.type));
  ToProto(change.incident, out.mutable_incident());
  out.set_initial(initial);
  return out;
}

void ToProto(const analysis::LinkView& in, v1::LinkStatus* out) {
  out->set_node(in.node);
  out->set_source(in.source);
  out->set_device(in.device);
  out->set_port(in.port);
  out->set_state(std::string(analysis::LinkStateName(in.state)));
  out->set_flaps_in_window(in.flaps_in_window);
  out->set_last_change_unix_nanos(ToUnixNanosOrZero(in.last_change));
  out->set_last_seen_unix_nanos(ToUnixNanosOrZero(in.last_seen));
}

void ToProto(const analysis::RankView& in, v1::RankScore* out) {
  out->set_job(in.job);
  out->set_rank(in.rank);
  out->set_node(in.node);
  out->set_comm(in.comm);
  out->set_pod(in.pod);
  out->set_pod_namespace(in.pod_namespace);
  out->set_score(in.score);
  out->set_margin(in.margin);
  out->set_wait_fraction(in.wait_fraction);
  out->set_instances(in.instances);
  out->set_where(in.where);
  out->set_gpu_sharing_ranks(in.gpu_sharers);
}

void ToProto(const analysis::LeafPort& in, v1::SwitchEnd* out) {
  out->set_id(in.id);
  out->set_name(in.name);
  out->set_port(static_cast<uint32_t>(std::max(in.port, 0)));
  out->set_port_name(in.port_name);
}

void ToProto(const analysis::HcaAttachment& in, v1::TopologyPort* out) {
  out->set_host(in.host);
  out->set_device(in.device);
  out->set_description(in.description);
  out->set_ca_guid(in.ca_guid);
  out->set_ca_port(static_cast<uint32_t>(std::max(in.ca_port, 0)));
  ToProto(in.leaf, out->mutable_peer());
  out->set_host_level(in.any_device);
}

void ToProto(const analysis::TopologyDisagreement& in, v1::TopologyDisagreement* out) {
  out->set_kind(std::string(analysis::DisagreementKindName(in.kind)));
  out->set_host(in.host);
  out->set_device(in.device);
  out->set_ca_port(static_cast<uint32_t>(std::max(in.ca_port, 0)));
  if (!in.file.id.empty()) ToProto(in.file, out->mutable_file());
  if (!in.discovered.id.empty()) ToProto(in.discovered, out->mutable_discovered());
}

void ToProto(const analysis::TopologyEvent& in, v1::TopologyEvent* out) {
  out->set_time_unix_nanos(ToUnixNanosOrZero(in.time));
  out->set_kind(std::string(analysis::TopologyEventKindName(in.kind)));
  out->set_source(in.source);
  out->set_reporter(in.reporter);
  out->set_host(in.host);
  out->set_device(in.device);
  out->set_ca_port(static_cast<uint32_t>(std::max(in.ca_port, 0)));
  if (!in.before.id.empty()) ToProto(in.before, out->mutable_before());
  if (!in.after.id.empty()) ToProto(in.after, out->mutable_after());
}

}  // namespace ringside::daemon
