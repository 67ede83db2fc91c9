#include "daemon/aggregator/query/query_service.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "analysis/fabric_analysis.h"
#include "daemon/aggregator/analysis_host.h"
#include "daemon/aggregator/ingest/ingest_core.h"
#include "daemon/aggregator/query/incident_queries.h"
#include "daemon/aggregator/query/query_convert.h"
#include "daemon/aggregator/serving/async_unary.h"

namespace ringside::daemon {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

std::string Label(const std::map<std::string, std::string>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

std::vector<analysis::Incident> OpenIncidents(const AnalysisHost* host) {
  return host != nullptr ? host->OpenIncidents() : std::vector<analysis::Incident>{};
}

// Most severe first, then the most recently opened.
bool MoreSevere(const analysis::Incident& a, const analysis::Incident& b) {
  if (a.severity != b.severity) return a.severity > b.severity;
  if (a.opened != b.opened) return a.opened > b.opened;
  return a.id > b.id;
}

}  // namespace

grpc::Status QueryService::Denied(const grpc::ServerContextBase& context) const {
  return options_.roles ? options_.roles->CheckReader(context) : grpc::Status::OK;
}

bool IncidentIsAboutLink(const analysis::Incident& inc, const analysis::LinkRef& link) {
  if (!analysis::IsFabricKind(inc.kind)) return false;
  if (Label(inc.entity, "node") != link.node) return false;
  if (link.source == "infiniband") {
    return inc.entity.count("device") && Label(inc.entity, "device") == link.device &&
           Label(inc.entity, "port") == link.port;
  }
  if (link.source == "netdev") {
    return !inc.entity.count("device") && Label(inc.entity, "netdev") == link.device;
  }
  if (link.source == "nvlink") {
    return Label(inc.entity, "gpu") == link.device && Label(inc.entity, "link") == link.port;
  }
  return false;
}

bool IncidentIsAboutLink(const analysis::Incident& inc, const analysis::LinkView& link) {
  analysis::LinkRef r;
  r.node = link.node;
  r.source = link.source;
  r.device = link.device;
  r.port = link.port;
  return IncidentIsAboutLink(inc, r);
}

QueryService::QueryService(AnalysisHost* host, const IngestCore* core, QueryServiceOptions options)
    : host_(host),
      core_(core),
      options_(std::move(options)),
      watch_(IncidentWatchHub::Create(host, options_.watch)) {}

grpc::Status QueryService::HandleListIncidents(const grpc::ServerContext& context,
                                               const v1::ListIncidentsRequest& request,
                                               v1::ListIncidentsResponse* response) {
  if (grpc::Status denied = Denied(context); !denied.ok()) return denied;
  IncidentFilter f;
  absl::StatusOr<std::optional<analysis::IncidentKind>> kind = ParseKindFilter(request.kind());
  if (!kind.ok()) return ToGrpc(kind.status());
  f.kind = *kind;
  f.open_only = request.open_only();
  f.node = request.node();
  f.job = request.job();
  if (request.since_unix_nanos() > 0) f.since = absl::FromUnixNanos(request.since_unix_nanos());
  f.limit = request.limit();
  absl::StatusOr<std::vector<analysis::Incident>> found = QueryIncidents(host_, f);
  if (!found.ok()) return ToGrpc(found.status());
  for (const analysis::Incident& inc : *found) ToProto(inc, response->add_incidents());
  return grpc::Status::OK;
}

grpc::Status QueryService::HandleGetIncident(const grpc::ServerContext& context,
                                             const v1::GetIncidentRequest& request,
                                             v1::Incident* response) {
  if (grpc::Status denied = Denied(context); !denied.ok()) return denied;
  absl::StatusOr<analysis::Incident> inc = FindIncident(host_, request.id());
  if (!inc.ok()) return ToGrpc(inc.status());
  ToProto(*inc, response);
  return grpc::Status::OK;
}

namespace {

// The open fabric incidents (the only kinds IncidentIsAboutLink matches) by node, each node's in
// id order.
using IncidentsByNode = std::map<std::string, std::vector<analysis::Incident>, std::less<>>;
IncidentsByNode OpenFabricIncidentsByNode(const AnalysisHost* host) {
  IncidentsByNode out;
  for (analysis::Incident& inc : OpenIncidents(host)) {
    if (!analysis::IsFabricKind(inc.kind)) continue;
    std::string node = Label(inc.entity, "node");
    out[std::move(node)].push_back(std::move(inc));
  }
  for (auto& [node, list] : out) {
    std::sort(list.begin(), list.end(),
              [](const analysis::Incident& a, const analysis::Incident& b) { return a.id < b.id; });
  }
  return out;
}

}  // namespace

std::vector<v1::LinkStatus> QueryService::Links(const std::string& node,
                                                bool unhealthy_only) const {
  const IncidentsByNode open = OpenFabricIncidentsByNode(host_);
  std::vector<analysis::LinkView> views;
  if (host_ != nullptr) {
    const absl::Time now = options_.now();
    host_->WithAnalysis([&](const analysis::FabricAnalysis& a) {
      a.VisitLinks(now, [&](const analysis::LinkRef& l) {
        if (!node.empty() && l.node != node) return;
        // Up, and no open incident on its node: healthy, whatever else it is.
        if (unhealthy_only && l.state == analysis::LinkState::kUp && !open.contains(l.node)) return;
        views.push_back(l.ToView());
      });
    });
  }
  std::sort(views.begin(), views.end(),
            [](const analysis::LinkView& a, const analysis::LinkView& b) {
              return std::tie(a.node, a.source, a.device, a.port) <
                     std::tie(b.node, b.source, b.device, b.port);
            });
  const TopologyState topology = host_ != nullptr ? host_->topology_state() : TopologyState{};
  std::vector<v1::LinkStatus> out;
  out.reserve(views.size());
  for (const analysis::LinkView& v : views) {
    v1::LinkStatus s;
    ToProto(v, &s);
    if (auto peer = PeerOfLink(topology, v.node, v.source, v.device, v.port)) {
      s.set_peer_switch(peer->name.empty() ? peer->id : peer->name);
      s.set_peer_switch_port(peer->port != 0 ? absl::StrCat(peer->port) : peer->port_name);
    }
    if (auto it = open.find(v.node); it != open.end()) {
      for (const analysis::Incident& inc : it->second) {
        if (!IncidentIsAboutLink(inc, v)) continue;
        s.add_open_incident_ids(inc.id);
        s.add_open_incident_kinds(std::string(analysis::IncidentKindName(inc.kind)));
      }
    }
    s.set_healthy(v.state == analysis::LinkState::kUp && s.open_incident_ids_size() == 0);
    out.push_back(std::move(s));
  }
  return out;
}

QueryService::LinkCounts QueryService::CountLinks() const {
  LinkCounts out;
  if (host_ == nullptr) return out;
  const IncidentsByNode by_node = OpenFabricIncidentsByNode(host_);
  const absl::Time now = options_.now();
  host_->WithAnalysis([&](const analysis::FabricAnalysis& a) {
    a.VisitLinks(now, [&](const analysis::LinkRef& l) {
      ++out.links;
      if (l.state != analysis::LinkState::kUp) {
        ++out.unhealthy;
        return;
      }
      auto it = by_node.find(l.node);
      if (it == by_node.end()) return;
      for (const analysis::Incident& inc : it->second) {
        if (IncidentIsAboutLink(inc, l)) {
          ++out.unhealthy;
          return;
        }
      }
    });
  });
  return out;
}

grpc::Status QueryService::HandleListLinks(const grpc::ServerContext& context,
                                           const v1::ListLinksRequest& request,
                                           v1::ListLinksResponse* response) {
  if (grpc::Status denied = Denied(context); !denied.ok()) return denied;
  // A flapping link has its link_flapping incident open: unhealthy too.
  const bool unhealthy_only = request.unhealthy_only() || request.flapping_only();
  for (v1::LinkStatus& s : Links(request.node(), unhealthy_only)) {
    if (request.unhealthy_only() && s.healthy()) continue;
    if (request.flapping_only() &&
        std::find(s.open_incident_kinds().begin(), s.open_incident_kinds().end(),
                  "link_flapping") == s.open_incident_kinds().end()) {
      continue;
    }
    *response->add_links() = std::move(s);
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::HandleGetNode(const grpc::ServerContext& context,
                                         const v1::GetNodeRequest& request,
                                         v1::NodeStatus* response) {
  if (grpc::Status denied = Denied(context); !denied.ok()) return denied;
  const std::string& node = request.node();
  std::optional<NodeStatus> status = node.empty() ? std::nullopt : core_->Node(node);
  if (!status) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no node \"", node, "\" has reported"));
  }
  response->set_node(node);
  response->set_stale(status->stale);
  response->set_last_seen_unix_nanos(ToUnixNanosOrZero(status->last_seen));
  response->set_agent_version(status->agent_version);
  response->set_series(status->series);
  absl::StatusOr<std::vector<analysis::SeriesView>> series = core_->Series(node);
  if (series.ok()) {
    std::vector<v1::SeriesRate> rates;
    rates.reserve(series->size());
    for (const analysis::SeriesView& s : *series) {
      v1::SeriesRate r;
      r.set_source(s.def.source);
      r.set_device(s.def.device);
      r.set_port(s.def.port);
      r.set_counter(s.def.counter);
      r.set_priority(s.def.priority);
      r.set_unit(s.def.unit);
      r.set_is_counter(s.def.kind == analysis::SeriesKind::kCounter);
      r.set_value(static_cast<double>(s.state.last_raw));
      r.set_rate_per_second(r.is_counter() ? static_cast<double>(s.state.LatestRate()) : 0.0);
      rates.push_back(std::move(r));
    }
    const auto nonzero = [](const v1::SeriesRate& r) {
      return r.is_counter() && std::isfinite(r.rate_per_second()) && r.rate_per_second() != 0;
    };
    std::stable_sort(
        rates.begin(), rates.end(), [&](const v1::SeriesRate& a, const v1::SeriesRate& b) {
          const bool za = nonzero(a), zb = nonzero(b);
          if (za != zb) return za;
          return std::make_tuple(a.source(), a.device(), a.port(), a.counter(), a.priority()) <
                 std::make_tuple(b.source(), b.device(), b.port(), b.counter(), b.priority());
        });
    for (v1::SeriesRate& r : rates) *response->add_rates() = std::move(r);
  }
  std::vector<analysis::Incident> open = OpenIncidents(host_);
  std::sort(open.begin(), open.end(), MoreSevere);
  for (const analysis::Incident& inc : open) {
    bool about = Label(inc.entity, "node") == node;
    for (const analysis::AffectedJob& j : inc.affected) {
      about |= std::find(j.nodes.begin(), j.nodes.end(), node) != j.nodes.end();
    }
    if (about) ToProto(inc, response->add_open_incidents());
  }
  for (v1::LinkStatus& s : Links(node)) *response->add_links() = std::move(s);
  return grpc::Status::OK;
}

grpc::Status QueryService::HandleTopStragglers(const grpc::ServerContext& context,
                                               const v1::TopStragglersRequest& request,
                                               v1::TopStragglersResponse* response) {
  if (grpc::Status denied = Denied(context); !denied.ok()) return denied;
  if (request.window_seconds() != 0) {
    // Never implemented: the scores are over the detector's window of instances. Refused rather
    // than accepted and ignored (issue #17).
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "window_seconds is not supported: the scores are over the "
                        "straggler detector's window (straggler.window instances)");
  }
  std::vector<analysis::RankView> ranks;
  if (host_ != nullptr) {
    host_->WithAnalysis(
        [&](const analysis::FabricAnalysis& a) { ranks = a.Stragglers(request.job()); });
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const analysis::RankView& a, const analysis::RankView& b) {
              if (a.score != b.score) return a.score > b.score;
              if (a.margin != b.margin) return a.margin > b.margin;
              return std::tie(a.job, a.rank, a.comm) < std::tie(b.job, b.rank, b.comm);
            });
  const size_t limit = request.limit() == 0 ? 10 : request.limit();
  if (ranks.size() > limit) ranks.resize(limit);
  std::vector<analysis::Incident> open = OpenIncidents(host_);
  for (const analysis::RankView& r : ranks) {
    v1::RankScore* s = response->add_ranks();
    ToProto(r, s);
    for (const analysis::Incident& inc : open) {
      if (inc.kind != analysis::IncidentKind::kStraggler) continue;
      if (Label(inc.entity, "job") != r.job || Label(inc.entity, "rank") != absl::StrCat(r.rank) ||
          Label(inc.entity, "comm") != r.comm) {
        continue;
      }
      s->set_flagged(true);
      s->set_incident_id(inc.id);
      break;
    }
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::HandleGetStatus(const grpc::ServerContext& context,
                                           const v1::GetStatusRequest&,
                                           v1::ClusterStatus* response) {
  if (grpc::Status denied = Denied(context); !denied.ok()) return denied;
  const absl::Time now = options_.now();
  uint32_t nodes = 0, stale = 0;
  for (const NodeStatus& n : core_->Nodes()) {
    ++nodes;
    if (n.stale) ++stale;
  }
  response->set_nodes(nodes);
  response->set_stale_nodes(stale);
  const LinkCounts links = CountLinks();
  response->set_links(links.links);
  response->set_unhealthy_links(links.unhealthy);
  std::vector<analysis::Incident> open = OpenIncidents(host_);
  std::sort(open.begin(), open.end(), MoreSevere);
  std::set<std::string> jobs;
  for (const analysis::Incident& inc : open) {
    ++(*response
            ->mutable_open_incidents_by_kind())[std::string(analysis::IncidentKindName(inc.kind))];
    if (response->open_incidents_size() < 20) ToProto(inc, response->add_open_incidents());
    if (std::string job = Label(inc.entity, "job"); !job.empty()) jobs.insert(job);
    for (const analysis::AffectedJob& j : inc.affected) jobs.insert(j.job);
  }
  if (host_ != nullptr) {
    host_->WithAnalysis([&](const analysis::FabricAnalysis& a) {
      for (const analysis::RankView& r : a.Stragglers("")) jobs.insert(r.job);
    });
  }
  for (const std::string& j : jobs) response->add_jobs(j);
  response->set_aggregator_version(options_.aggregator_version);
  response->set_now_unix_nanos(ToUnixNanosOrZero(now));
  return grpc::Status::OK;
}

grpc::Status QueryService::HandleGetTopology(const grpc::ServerContext& context,
                                             const v1::GetTopologyRequest& request,
                                             v1::TopologyView* response) {
  if (grpc::Status denied = Denied(context); !denied.ok()) return denied;
  if (host_ == nullptr) {
    response->set_source("none");
    return grpc::Status::OK;
  }
  const TopologyState state = host_->topology_state();
  const std::string& node = request.node();
  // A host matches by its full name or its short name (up to the first '.'), as the topology does.
  const auto matches = [&node](const std::string& host) {
    if (node.empty() || host == node) return true;
    return !host.empty() && host.substr(0, host.find('.')) == node.substr(0, node.find('.'));
  };
  response->set_source(state.source);
  response->set_discovery(state.discovery);
  response->set_events_total(state.events);
  if (state.topology != nullptr) {
    response->set_format(state.topology->format() == analysis::Topology::Format::kNodeSwitchMap
                             ? "node_switch_map"
                             : "ibnetdiscover");
  }
  if (!request.events_only()) {
    if (state.topology != nullptr) {
      std::vector<const analysis::HcaAttachment*> ports;
      std::map<std::string, std::pair<std::set<std::string>, uint32_t>> per_switch;
      for (const analysis::HcaAttachment& h : state.topology->attachments()) {
        if (!matches(h.host)) continue;
        ports.push_back(&h);
        auto& [hosts, n] = per_switch[h.leaf.id];
        if (!h.host.empty()) hosts.insert(h.host);
        ++n;
      }
      std::sort(ports.begin(), ports.end(),
                [](const analysis::HcaAttachment* a, const analysis::HcaAttachment* b) {
                  return std::tie(a->host, a->device, a->ca_port, a->ca_guid, a->leaf.id) <
                         std::tie(b->host, b->device, b->ca_port, b->ca_guid, b->leaf.id);
                });
      for (const analysis::HcaAttachment* h : ports) ToProto(*h, response->add_ports());
      for (const auto& [id, name] : state.topology->switch_names()) {
        auto it = per_switch.find(id);
        if (!node.empty() && it == per_switch.end()) continue;
        v1::TopologySwitch* sw = response->add_switches();
        sw->set_id(id);
        sw->set_name(name);
        if (auto p = state.topology->switch_ports().find(id);
            p != state.topology->switch_ports().end()) {
          sw->set_num_ports(static_cast<uint32_t>(p->second));
        }
        if (it != per_switch.end()) {
          sw->set_hosts(static_cast<uint32_t>(it->second.first.size()));
          sw->set_ports(it->second.second);
        }
      }
    }
    if (state.topology != nullptr && node.empty()) {
      for (const analysis::SwitchLink& l : state.topology->switch_links()) {
        v1::TopologySwitchLink* out = response->add_switch_links();
        ToProto(analysis::LeafPort{l.a_id, state.topology->LeafName(l.a_id), l.a_port, ""},
                out->mutable_a());
        ToProto(analysis::LeafPort{l.b_id, state.topology->LeafName(l.b_id), l.b_port, ""},
                out->mutable_b());
      }
    }
    for (const analysis::TopologyDisagreement& d : state.disagreements) {
      if (matches(d.host)) ToProto(d, response->add_disagreements());
    }
  }
  for (const analysis::TopologyEvent& e : host_->topology_events(0)) {
    if (matches(e.host)) ToProto(e, response->add_events());
  }
  if (request.max_events() > 0 &&
      response->events_size() > static_cast<int>(request.max_events())) {
    response->mutable_events()->DeleteSubrange(
        0, response->events_size() - static_cast<int>(request.max_events()));
  }
  return grpc::Status::OK;
}

template <class Req, class Resp>
void QueryService::ArmUnary(grpc::ServerCompletionQueue* cq, LiveCalls* live,
                            RequestMethod<Req, Resp> request, HandleMethod<Req, Resp> handle) {
  auto method = std::make_shared<typename AsyncUnary<Req, Resp>::Method>();
  method->request = [this, request](grpc::ServerContext* context, Req* req,
                                    grpc::ServerAsyncResponseWriter<Resp>* writer,
                                    grpc::ServerCompletionQueue* queue, void* tag) {
    (this->*request)(context, req, writer, queue, queue, tag);
  };
  method->handle = [this, handle](const grpc::ServerContext& context, const Req& req, Resp* resp) {
    return (this->*handle)(context, req, resp);
  };
  method->work = &work_;
  method->live = live;
  AsyncUnary<Req, Resp>::Arm(std::move(method), cq);
}

void QueryService::Arm(grpc::ServerCompletionQueue* cq, LiveCalls* live) {
  ArmUnary<v1::ListIncidentsRequest, v1::ListIncidentsResponse>(
      cq, live, &QueryService::RequestListIncidents, &QueryService::HandleListIncidents);
  ArmUnary<v1::GetIncidentRequest, v1::Incident>(cq, live, &QueryService::RequestGetIncident,
                                                 &QueryService::HandleGetIncident);
  ArmUnary<v1::ListLinksRequest, v1::ListLinksResponse>(cq, live, &QueryService::RequestListLinks,
                                                        &QueryService::HandleListLinks);
  ArmUnary<v1::GetNodeRequest, v1::NodeStatus>(cq, live, &QueryService::RequestGetNode,
                                               &QueryService::HandleGetNode);
  ArmUnary<v1::TopStragglersRequest, v1::TopStragglersResponse>(
      cq, live, &QueryService::RequestTopStragglers, &QueryService::HandleTopStragglers);
  ArmUnary<v1::GetStatusRequest, v1::ClusterStatus>(cq, live, &QueryService::RequestGetStatus,
                                                    &QueryService::HandleGetStatus);
  ArmUnary<v1::GetTopologyRequest, v1::TopologyView>(cq, live, &QueryService::RequestGetTopology,
                                                     &QueryService::HandleGetTopology);
  watch_->Arm(this, cq, live,
              [this](const grpc::ServerContextBase& context) { return Denied(context); });
}

}  // namespace ringside::daemon
