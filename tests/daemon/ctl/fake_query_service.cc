#include "tests/daemon/ctl/fake_query_service.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "analysis/incidents.h"
#include "grpcpp/server_builder.h"

namespace ringside::testing {
namespace {

int64_t Ns(absl::Time t) { return absl::ToUnixNanos(t); }

v1::Incident MakeIncident(uint64_t id, const std::string& kind, const std::string& severity,
                          std::map<std::string, std::string> entity, absl::Time opened,
                          absl::Time updated, bool open, const std::string& summary) {
  v1::Incident i;
  i.set_id(id);
  i.set_kind(kind);
  i.set_severity(severity);
  for (const auto& [k, v] : entity) (*i.mutable_entity())[k] = v;
  i.set_opened_unix_nanos(Ns(opened));
  i.set_updated_unix_nanos(Ns(updated));
  if (!open) i.set_resolved_unix_nanos(Ns(updated));
  i.set_open(open);
  i.set_summary(summary);
  i.set_revision(1);
  if (auto k = analysis::ParseIncidentKind(kind)) {
    i.set_key(analysis::StableIncidentKey(*k, entity, opened));  // as the aggregator fills it
  }
  return i;
}

v1::CauseLink Cause(uint64_t id, const std::string& kind, const std::string& scope,
                    std::map<std::string, std::string> entity, const std::string& summary) {
  v1::CauseLink c;
  c.set_incident_id(id);
  c.set_kind(kind);
  c.set_scope(scope);
  for (const auto& [k, v] : entity) (*c.mutable_entity())[k] = v;
  c.set_summary(summary);
  return c;
}

v1::LinkStatus Link(const std::string& node, const std::string& device, const std::string& state,
                    uint32_t flaps, absl::Time changed, absl::Time seen,
                    std::vector<std::pair<uint64_t, std::string>> incidents) {
  v1::LinkStatus l;
  l.set_node(node);
  l.set_source("infiniband");
  l.set_device(device);
  l.set_port("1");
  l.set_state(state);
  l.set_flaps_in_window(flaps);
  l.set_last_change_unix_nanos(Ns(changed));
  l.set_last_seen_unix_nanos(Ns(seen));
  for (const auto& [id, kind] : incidents) {
    l.add_open_incident_ids(id);
    l.add_open_incident_kinds(kind);
  }
  l.set_healthy(state == "up" && incidents.empty() && flaps < 2);
  return l;
}

v1::RankScore Rank(const std::string& job, int64_t rank, const std::string& node, double score,
                   double margin, double wait, uint32_t instances, uint64_t incident) {
  v1::RankScore r;
  r.set_job(job);
  r.set_rank(rank);
  r.set_node(node);
  r.set_comm("0x7f01");
  r.set_score(score);
  r.set_margin(margin);
  r.set_wait_fraction(wait);
  r.set_instances(instances);
  r.set_flagged(incident != 0);
  r.set_incident_id(incident);
  return r;
}

const std::set<std::string>& Kinds() {
  static const auto* kinds =
      new std::set<std::string>{"link_down",  "link_flapping", "link_degraded", "pause_storm",
                                "congestion", "straggler",     "job_slowdown"};
  return *kinds;
}

std::string Label(const v1::Incident& i, const std::string& key) {
  auto it = i.entity().find(key);
  return it == i.entity().end() ? "" : it->second;
}

bool Matches(const v1::Incident& i, const std::string& kind, const std::string& node,
             const std::string& job) {
  if (!kind.empty() && i.kind() != kind) return false;
  if (!node.empty() && Label(i, "node") != node) return false;
  if (!job.empty() && Label(i, "job") != job) {
    bool affected = false;
    for (const v1::AffectedJob& a : i.affected()) affected = affected || a.job() == job;
    if (!affected) return false;
  }
  return true;
}

}  // namespace

FakeQueryData CannedCluster(absl::Time now) {
  FakeQueryData d;
  const std::map<std::string, std::string> storm = {
      {"node", "node-b"}, {"device", "mlx5_0"}, {"priority", "3"}, {"source", "ethtool"}};
  v1::Incident i12 = MakeIncident(12, "pause_storm", "critical", storm, now - absl::Minutes(10),
                                  now - absl::Minutes(1), true,
                                  "rx pause 82% of the time on prio 3; spreads to node-c mlx5_1");
  (*i12.mutable_evidence())["pause_fraction"] = 0.82;
  (*i12.mutable_evidence())["storm_events"] = 3;
  v1::AffectedJob* a = i12.add_affected();
  a->set_job("j1");
  for (int r : {7, 4, 5, 6}) a->add_ranks(r);
  a->add_nodes("node-b");
  a->add_pods("train/j1-worker-4");  // the ranks whose plugin knew its Kubernetes pod
  a->add_pods("train/j1-worker-5");
  i12.set_revision(4);

  v1::Incident i15 =
      MakeIncident(15, "straggler", "warning", {{"job", "j1"}, {"rank", "5"}, {"node", "node-b"}},
                   now - absl::Minutes(8), now - absl::Seconds(30), true,
                   "rank 5 arrived last in 36 of the last 40 collectives");
  (*i15.mutable_evidence())["score"] = 0.9;
  (*i15.mutable_evidence())["margin"] = 0.31;
  *i15.add_causes() =
      Cause(12, "pause_storm", "node", storm, "pause storm on the rank's node in the same window");
  i15.set_revision(2);

  v1::Incident i3 = MakeIncident(
      3, "link_flapping", "warning",
      {{"node", "node-a"}, {"source", "infiniband"}, {"device", "mlx5_1"}, {"port", "1"}},
      now - absl::Hours(3), now - absl::Hours(2), false, "4 down→up cycles in 10m");
  i3.set_resolution("no transition for 10m0s");

  v1::Incident i20 =
      MakeIncident(20, "job_slowdown", "info", {{"job", "j2"}}, now - absl::Minutes(5),
                   now - absl::Minutes(2), true, "collectives 40% slower than the job's baseline");
  *i20.add_causes() = Cause(21, "congestion", "leaf", {{"node", "node-c"}}, "");
  *i20.add_causes() = Cause(99, "link_down", "node", {{"node", "node-d"}}, "");
  v1::Incident i21 = MakeIncident(
      21, "congestion", "warning", {{"node", "node-c"}, {"device", "mlx5_0"}},
      now - absl::Minutes(30), now - absl::Minutes(20), false, "ECN marks above threshold");
  *i21.add_causes() = Cause(20, "job_slowdown", "host", {{"job", "j2"}}, "");
  d.incidents = {i12, i15, i3, i20, i21};

  d.links = {
      Link("node-a", "mlx5_0", "up", 0, now - absl::Hours(5), now - absl::Seconds(2), {}),
      Link("node-a", "mlx5_1", "down", 3, now - absl::Seconds(40), now - absl::Seconds(2), {}),
      Link("node-b", "mlx5_0", "up", 0, now - absl::Hours(4), now - absl::Seconds(1),
           {{12, "pause_storm"}}),
  };
  // The switch ends the topology knows: node-a mlx5_1 by its port number, node-b by LLDP's name.
  d.links[1].set_peer_switch("leaf-01");
  d.links[1].set_peer_switch_port("7");
  d.links[2].set_peer_switch("leaf-02");
  d.links[2].set_peer_switch_port("Ethernet12");

  v1::NodeStatus a_node;
  a_node.set_node("node-a");
  a_node.set_last_seen_unix_nanos(Ns(now - absl::Seconds(2)));
  a_node.set_agent_version("0.1.0");
  a_node.set_series(412);
  *a_node.add_links() = d.links[0];
  v1::SeriesRate* rate = a_node.add_rates();
  rate->set_source("infiniband");
  rate->set_device("mlx5_0");
  rate->set_port("1");
  rate->set_counter("port_xmit_data");
  rate->set_priority(-1);
  rate->set_unit("bytes");
  rate->set_rate_per_second(1.25e9);
  rate->set_value(9.9e12);
  rate->set_is_counter(true);
  d.nodes["node-a"] = a_node;
  v1::NodeStatus b_node;
  b_node.set_node("node-b");
  b_node.set_last_seen_unix_nanos(Ns(now - absl::Seconds(1)));
  b_node.set_agent_version("0.1.0");
  b_node.set_series(388);
  *b_node.add_open_incidents() = i12;
  *b_node.add_open_incidents() = i15;
  *b_node.add_links() = d.links[2];
  d.nodes["node-b"] = b_node;
  v1::NodeStatus c_node;
  c_node.set_node("node-c");
  c_node.set_stale(true);
  c_node.set_last_seen_unix_nanos(Ns(now - absl::Minutes(7)));
  d.nodes["node-c"] = c_node;

  d.stragglers = {Rank("j1", 5, "node-b", 0.9, 0.31, 0.02, 40, 15),
                  Rank("j2", 0, "node-c", 0.4, 0.05, 0.3, 40, 0),
                  Rank("j1", 2, "node-a", 0.05, 0.01, 0.6, 40, 0)};
  d.stragglers[0].set_where("host");  // issue #27: where its lateness is
  d.stragglers[1].set_where("gpu");
  d.stragglers[1].set_gpu_sharing_ranks(4);
  d.stragglers[0].set_pod("j1-worker-5");  // from a plugin that knew its Kubernetes pod
  d.stragglers[0].set_pod_namespace("train");

  v1::ClusterStatus& s = d.status;
  s.set_nodes(3);
  s.set_stale_nodes(1);
  s.set_links(3);
  s.set_unhealthy_links(2);
  (*s.mutable_open_incidents_by_kind())["pause_storm"] = 1;
  (*s.mutable_open_incidents_by_kind())["straggler"] = 1;
  (*s.mutable_open_incidents_by_kind())["job_slowdown"] = 1;
  *s.add_open_incidents() = i12;
  *s.add_open_incidents() = i15;
  *s.add_open_incidents() = i20;
  s.add_jobs("j1");
  s.add_jobs("j2");
  s.set_aggregator_version("test-0.1");
  return d;
}

void FakeQueryService::Delay() {
  absl::Duration d;
  {
    absl::MutexLock l(&mu_);
    d = delay_;
  }
  if (d > absl::ZeroDuration()) absl::SleepFor(d);
}

grpc::Status FakeQueryService::ListIncidents(grpc::ServerContext*,
                                             const v1::ListIncidentsRequest* req,
                                             v1::ListIncidentsResponse* resp) {
  Delay();
  absl::MutexLock l(&mu_);
  last_list_incidents_ = *req;
  if (!req->kind().empty() && Kinds().count(req->kind()) == 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("unknown incident kind \"", req->kind(), "\""));
  }
  std::vector<v1::Incident> out;
  for (const v1::Incident& i : data_.incidents) {
    if (req->open_only() && !i.open()) continue;
    if (!Matches(i, req->kind(), req->node(), req->job())) continue;
    if (req->since_unix_nanos() != 0 && i.updated_unix_nanos() < req->since_unix_nanos()) continue;
    out.push_back(i);
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.updated_unix_nanos() > b.updated_unix_nanos();
  });
  const size_t limit = req->limit() == 0 ? 100 : req->limit();
  if (out.size() > limit) out.resize(limit);
  for (auto& i : out) *resp->add_incidents() = std::move(i);
  return grpc::Status::OK;
}

grpc::Status FakeQueryService::GetIncident(grpc::ServerContext*, const v1::GetIncidentRequest* req,
                                           v1::Incident* resp) {
  Delay();
  absl::MutexLock l(&mu_);
  for (const v1::Incident& i : data_.incidents) {
    if (i.id() == req->id()) {
      *resp = i;
      return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no incident ", req->id()));
}

grpc::Status FakeQueryService::WatchIncidents(grpc::ServerContext* ctx,
                                              const v1::WatchIncidentsRequest* req,
                                              grpc::ServerWriter<v1::IncidentChange>* writer) {
  std::vector<v1::IncidentChange> snapshot;
  size_t next = 0;
  int generation = 0;
  {
    absl::MutexLock l(&mu_);
    ++watch_calls_;
    last_watch_ = *req;
    if (refuse_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "refusing watches (test)");
    if (!req->kind().empty() && Kinds().count(req->kind()) == 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("unknown incident kind \"", req->kind(), "\""));
    }
    for (const v1::Incident& i : data_.incidents) {
      if (!i.open() || !Matches(i, req->kind(), req->node(), req->job())) continue;
      v1::IncidentChange c;
      c.set_type(v1::IncidentChange::OPENED);
      c.set_initial(true);
      *c.mutable_incident() = i;
      snapshot.push_back(std::move(c));
    }
    next = log_.size();
    generation = generation_;
    ++open_watches_;
  }
  grpc::Status result = grpc::Status::OK;
  for (const auto& c : snapshot) {
    if (!writer->Write(c)) result = grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  }
  while (result.ok() && !ctx->IsCancelled()) {
    std::vector<v1::IncidentChange> batch;
    {
      absl::MutexLock l(&mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return log_.size() > next || generation_ != generation;
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(50));
      if (generation_ != generation) break;
      for (; next < log_.size(); ++next) {
        if (Matches(log_[next].incident(), req->kind(), req->node(), req->job())) {
          batch.push_back(log_[next]);
        }
      }
    }
    for (const auto& c : batch) {
      if (!writer->Write(c)) {
        result = grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
        break;
      }
    }
  }
  absl::MutexLock l(&mu_);
  --open_watches_;
  return result;
}

grpc::Status FakeQueryService::ListLinks(grpc::ServerContext*, const v1::ListLinksRequest* req,
                                         v1::ListLinksResponse* resp) {
  Delay();
  absl::MutexLock l(&mu_);
  last_list_links_ = *req;
  for (const v1::LinkStatus& link : data_.links) {
    if (req->unhealthy_only() && link.healthy()) continue;
    if (req->flapping_only() && link.flaps_in_window() < 2) continue;
    if (!req->node().empty() && link.node() != req->node()) continue;
    *resp->add_links() = link;
  }
  return grpc::Status::OK;
}

grpc::Status FakeQueryService::GetNode(grpc::ServerContext*, const v1::GetNodeRequest* req,
                                       v1::NodeStatus* resp) {
  Delay();
  absl::MutexLock l(&mu_);
  auto it = data_.nodes.find(req->node());
  if (it == data_.nodes.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no node ", req->node()));
  }
  *resp = it->second;
  return grpc::Status::OK;
}

grpc::Status FakeQueryService::TopStragglers(grpc::ServerContext*,
                                             const v1::TopStragglersRequest* req,
                                             v1::TopStragglersResponse* resp) {
  Delay();
  absl::MutexLock l(&mu_);
  last_top_stragglers_ = *req;
  const int limit = req->limit() == 0 ? 10 : static_cast<int>(req->limit());
  for (const v1::RankScore& r : data_.stragglers) {
    if (!req->job().empty() && r.job() != req->job()) continue;
    if (resp->ranks_size() >= limit) break;
    *resp->add_ranks() = r;
  }
  return grpc::Status::OK;
}

grpc::Status FakeQueryService::GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*,
                                         v1::ClusterStatus* resp) {
  Delay();
  absl::MutexLock l(&mu_);
  *resp = data_.status;
  resp->set_now_unix_nanos(absl::ToUnixNanos(absl::Now()));
  return grpc::Status::OK;
}

grpc::Status FakeQueryService::GetTopology(grpc::ServerContext*, const v1::GetTopologyRequest* req,
                                           v1::TopologyView* resp) {
  Delay();
  absl::MutexLock l(&mu_);
  *resp = data_.topology;
  if (req->events_only()) {
    resp->clear_ports();
    resp->clear_switches();
    resp->clear_disagreements();
  }
  return grpc::Status::OK;
}

void FakeQueryService::Publish(const v1::IncidentChange& change, bool to_watchers) {
  absl::MutexLock l(&mu_);
  bool replaced = false;
  for (v1::Incident& i : data_.incidents) {
    if (i.id() == change.incident().id()) {
      i = change.incident();
      replaced = true;
    }
  }
  if (!replaced) data_.incidents.push_back(change.incident());
  if (to_watchers) log_.push_back(change);
}

void FakeQueryService::EndStreams() {
  absl::MutexLock l(&mu_);
  ++generation_;
}

void FakeQueryService::RefuseWatches(bool refuse) {
  absl::MutexLock l(&mu_);
  refuse_ = refuse;
}

void FakeQueryService::SetDelay(absl::Duration d) {
  absl::MutexLock l(&mu_);
  delay_ = d;
}

int FakeQueryService::open_watches() const {
  absl::MutexLock l(&mu_);
  return open_watches_;
}
int FakeQueryService::watch_calls() const {
  absl::MutexLock l(&mu_);
  return watch_calls_;
}
v1::ListIncidentsRequest FakeQueryService::last_list_incidents() const {
  absl::MutexLock l(&mu_);
  return last_list_incidents_;
}
v1::ListLinksRequest FakeQueryService::last_list_links() const {
  absl::MutexLock l(&mu_);
  return last_list_links_;
}
v1::TopStragglersRequest FakeQueryService::last_top_stragglers() const {
  absl::MutexLock l(&mu_);
  return last_top_stragglers_;
}
v1::WatchIncidentsRequest FakeQueryService::last_watch() const {
  absl::MutexLock l(&mu_);
  return last_watch_;
}

FakeQueryServer::FakeQueryServer(FakeQueryData data, std::shared_ptr<grpc::ServerCredentials> creds)
    : service_(std::move(data)) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", creds ? creds : grpc::InsecureServerCredentials(),
                           &port_);
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
}

FakeQueryServer::~FakeQueryServer() { Shutdown(); }

std::string FakeQueryServer::address() const { return absl::StrCat("127.0.0.1:", port_); }

void FakeQueryServer::Shutdown() {
  if (server_ == nullptr) return;
  service_.EndStreams();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  server_->Wait();
  server_.reset();
}

}  // namespace ringside::testing
