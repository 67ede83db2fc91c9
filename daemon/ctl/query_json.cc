#include "daemon/ctl/query_json.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "daemon/ctl/relative_time.h"

namespace ringside::daemon::ctl {
namespace {

using nlohmann::json;

json Number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json StringMap(const google::protobuf::Map<std::string, std::string>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = v;
  return out;
}

const char* ChangeType(v1::IncidentChange::Type t) {
  switch (t) {
    case v1::IncidentChange::OPENED:
      return "opened";
    case v1::IncidentChange::UPDATED:
      return "updated";
    case v1::IncidentChange::RESOLVED:
      return "resolved";
    default:
      return "unspecified";
  }
}

}  // namespace

json TimeJson(int64_t unix_nanos) {
  return unix_nanos == 0 ? json(nullptr) : json(Rfc3339(unix_nanos));
}

json CauseLinkJson(const v1::CauseLink& c) {
  return json{{"incident_id", c.incident_id() == 0 ? json(nullptr) : json(c.incident_id())},
              {"kind", c.kind()},
              {"scope", c.scope()},
              {"entity", StringMap(c.entity())},
              {"summary", c.summary()},
              {"key", c.key().empty() ? json(nullptr) : json(c.key())},
              {"shard", c.shard().empty() ? json(nullptr) : json(c.shard())},
              // What was checked to choose it (GPU or host numbers; for "host", what was clean).
              {"evidence", std::map<std::string, double>(c.evidence().begin(), c.evidence().end())}};
}

json IncidentJson(const v1::Incident& i) {
  json evidence = json::object();
  for (const auto& [k, v] : i.evidence()) evidence[k] = Number(v);
  json causes = json::array();
  for (const v1::CauseLink& c : i.causes()) causes.push_back(CauseLinkJson(c));
  json affected = json::array();
  for (const v1::AffectedJob& a : i.affected()) {
    affected.push_back(
        json{{"job", a.job()},
             {"ranks", json(std::vector<int64_t>(a.ranks().begin(), a.ranks().end()))},
             {"nodes", json(std::vector<std::string>(a.nodes().begin(), a.nodes().end()))},
             {"pods", json(std::vector<std::string>(a.pods().begin(), a.pods().end()))}});
  }
  return json{{"id", i.id()},
              {"key", i.key()},
              {"kind", i.kind()},
              {"severity", i.severity()},
              {"entity", StringMap(i.entity())},
              {"opened", TimeJson(i.opened_unix_nanos())},
              {"updated", TimeJson(i.updated_unix_nanos())},
              {"resolved", TimeJson(i.resolved_unix_nanos())},
              {"open", i.open()},
              {"evidence", std::move(evidence)},
              {"summary", i.summary()},
              {"where", i.where().empty() ? json(nullptr) : json(i.where())},
              {"resolution", i.resolution()},
              {"causes", std::move(causes)},
              {"affected", std::move(affected)},
              {"revision", i.revision()}};
}

json LinkJson(const v1::LinkStatus& l) {
  return json{
      {"node", l.node()},
      {"source", l.source()},
      {"device", l.device()},
      {"port", l.port()},
      {"state", l.state()},
      {"flaps_in_window", l.flaps_in_window()},
      {"last_change", TimeJson(l.last_change_unix_nanos())},
      {"last_seen", TimeJson(l.last_seen_unix_nanos())},
      {"open_incident_ids",
       json(std::vector<uint64_t>(l.open_incident_ids().begin(), l.open_incident_ids().end()))},
      {"open_incident_kinds", json(std::vector<std::string>(l.open_incident_kinds().begin(),
                                                            l.open_incident_kinds().end()))},
      {"healthy", l.healthy()},
      {"peer_switch", l.peer_switch().empty() ? json(nullptr) : json(l.peer_switch())},
      {"peer_switch_port",
       l.peer_switch_port().empty() ? json(nullptr) : json(l.peer_switch_port())}};
}

namespace {

json SwitchEndJson(bool has, const v1::SwitchEnd& e) {
  if (!has) return json(nullptr);
  return json{{"id", e.id()},
              {"name", e.name()},
              {"port", e.port() == 0 ? json(nullptr) : json(e.port())},
              {"port_name", e.port_name().empty() ? json(nullptr) : json(e.port_name())}};
}

}  // namespace

json TopologyJson(const v1::TopologyView& t) {
  json ports = json::array();
  for (const v1::TopologyPort& p : t.ports()) {
    ports.push_back(json{{"host", p.host()},
                         {"device", p.device()},
                         {"description", p.description()},
                         {"ca_guid", p.ca_guid().empty() ? json(nullptr) : json(p.ca_guid())},
                         {"ca_port", p.ca_port() == 0 ? json(nullptr) : json(p.ca_port())},
                         {"peer", SwitchEndJson(p.has_peer(), p.peer())},
                         {"host_level", p.host_level()}});
  }
  json switches = json::array();
  for (const v1::TopologySwitch& s : t.switches()) {
    switches.push_back(json{{"id", s.id()},
                            {"name", s.name()},
                            {"hosts", s.hosts()},
                            {"ports", s.ports()},
                            {"num_ports", s.num_ports() == 0 ? json(nullptr) : json(s.num_ports())}});
  }
  json switch_links = json::array();
  for (const v1::TopologySwitchLink& l : t.switch_links()) {
    switch_links.push_back(
        json{{"a", SwitchEndJson(l.has_a(), l.a())}, {"b", SwitchEndJson(l.has_b(), l.b())}});
  }
  json disagreements = json::array();
  for (const v1::TopologyDisagreement& d : t.disagreements()) {
    disagreements.push_back(json{{"kind", d.kind()},
                                 {"host", d.host()},
                                 {"device", d.device()},
                                 {"ca_port", d.ca_port() == 0 ? json(nullptr) : json(d.ca_port())},
                                 {"file", SwitchEndJson(d.has_file(), d.file())},
                                 {"discovered", SwitchEndJson(d.has_discovered(), d.discovered())}});
  }
  json events = json::array();
  for (const v1::TopologyEvent& e : t.events()) {
    events.push_back(json{{"time", TimeJson(e.time_unix_nanos())},
                          {"kind", e.kind()},
                          {"source", e.source()},
                          {"reporter", e.reporter()},
                          {"host", e.host()},
                          {"device", e.device()},
                          {"ca_port", e.ca_port() == 0 ? json(nullptr) : json(e.ca_port())},
                          {"before", SwitchEndJson(e.has_before(), e.before())},
                          {"after", SwitchEndJson(e.has_after(), e.after())}});
  }
  return json{{"source", t.source()},
              {"discovery", t.discovery().empty() ? json(nullptr) : json(t.discovery())},
              {"format", t.format().empty() ? json(nullptr) : json(t.format())},
              {"ports", std::move(ports)},
              {"switches", std::move(switches)},
              {"switch_links", std::move(switch_links)},
              {"disagreements", std::move(disagreements)},
              {"events", std::move(events)},
              {"events_total", t.events_total()}};
}

json NodeJson(const v1::NodeStatus& n) {
  json rates = json::array();
  for (const v1::SeriesRate& r : n.rates()) {
    rates.push_back(json{{"source", r.source()},
                         {"device", r.device()},
                         {"port", r.port()},
                         {"counter", r.counter()},
                         {"priority", r.priority() < 0 ? json(nullptr) : json(r.priority())},
                         {"unit", r.unit()},
                         {"rate_per_second", Number(r.rate_per_second())},
                         {"value", Number(r.value())},
                         {"is_counter", r.is_counter()}});
  }
  json incidents = json::array();
  for (const v1::Incident& i : n.open_incidents()) incidents.push_back(IncidentJson(i));
  json links = json::array();
  for (const v1::LinkStatus& l : n.links()) links.push_back(LinkJson(l));
  return json{{"node", n.node()},
              {"stale", n.stale()},
              {"last_seen", TimeJson(n.last_seen_unix_nanos())},
              {"agent_version", n.agent_version()},
              {"series", n.series()},
              {"rates", std::move(rates)},
              {"open_incidents", std::move(incidents)},
              {"links", std::move(links)}};
}

json RankScoreJson(const v1::RankScore& r) {
  return json{{"job", r.job()},
              {"rank", r.rank()},
              {"node", r.node()},
              {"comm", r.comm()},
              {"pod", r.pod().empty() ? json(nullptr) : json(r.pod())},
              {"namespace", r.pod().empty() ? json(nullptr) : json(r.pod_namespace())},
              {"score", Number(r.score())},
              {"margin", Number(r.margin())},
              {"wait_fraction", Number(r.wait_fraction())},
              {"where", r.where().empty() ? std::string("unknown") : r.where()},
              {"gpu_sharing_ranks", std::max(1, r.gpu_sharing_ranks())},
              {"instances", r.instances()},
              {"flagged", r.flagged()},
              {"incident_id", r.incident_id() == 0 ? json(nullptr) : json(r.incident_id())}};
}

json StatusJson(const v1::ClusterStatus& s) {
  json by_kind = json::object();
  for (const auto& [k, v] : s.open_incidents_by_kind()) by_kind[k] = v;
  json incidents = json::array();
  for (const v1::Incident& i : s.open_incidents()) incidents.push_back(IncidentJson(i));
  return json{{"nodes", s.nodes()},
              {"stale_nodes", s.stale_nodes()},
              {"links", s.links()},
              {"unhealthy_links", s.unhealthy_links()},
              {"open_incidents_by_kind", std::move(by_kind)},
              {"open_incidents", std::move(incidents)},
              {"jobs", json(std::vector<std::string>(s.jobs().begin(), s.jobs().end()))},
              {"aggregator_version", s.aggregator_version()},
              {"now", TimeJson(s.now_unix_nanos())}};
}

json ChangeJson(const v1::IncidentChange& c) {
  return json{{"type", ChangeType(c.type())},
              {"initial", c.initial()},
              {"incident", IncidentJson(c.incident())}};
}

void WriteJson(const nlohmann::json& value, std::ostream& out) {
  out << value.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
}

void WriteJsonLine(const nlohmann::json& value, std::ostream& out) {
  out << value.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
}

}  // namespace ringside::daemon::ctl
