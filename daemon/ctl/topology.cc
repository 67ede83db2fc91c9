// `ringside topology`: the fabric's topology as the aggregator's detectors use it (GetTopology):
// every host port and the switch port it is cabled to, the switches, the --topology file's
// disagreements with the discovery; `--events` the changes the discovery saw;
// `--format=ibnetdiscover` the InfiniBand part as ibnetdiscover prints it.
#include <algorithm>
#include <map>
#include <ostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "analysis/topology.h"
#include "analysis/topology_text.h"
#include "daemon/ctl/fleet.h"
#include "daemon/ctl/fleet_merge.h"
#include "daemon/ctl/query_client.h"
#include "daemon/ctl/query_commands.h"
#include "daemon/ctl/query_json.h"
#include "daemon/ctl/relative_time.h"
#include "daemon/ctl/table.h"

namespace ringside::daemon::ctl {
namespace {

constexpr char kName[] = "topology";

const std::vector<FlagSpec>& Specs() {
  static const auto* specs = new std::vector<FlagSpec>{
      {"events", "", false, "", "the topology events (ports moved, recabled, gone, new) instead", ""},
      {"max-events", "", true, "N", "with --events: the latest N (default: every one kept)", ""},
      {"node", "", true, "NODE", "only this host's ports, disagreements and events", ""},
      {"format", "", true, "FORMAT",
       "table (default) or ibnetdiscover: the InfiniBand ports as ibnetdiscover prints them", "table"},
  };
  return *specs;
}

constexpr char kUsage[] =
    "Usage: ringside topology [--node N] [--format=table|ibnetdiscover] [--events [--max-events N]]\n"
    "\n"
    "Prints the topology the aggregator's detectors use: the --topology file merged with what the\n"
    "fabric tells (InfiniBand subnet discovery, else LLDP); the file wins for the hosts it names.\n"
    "A table of host ports and the switch port each is cabled to, the switches, and where the file\n"
    "disagrees with the discovery. --format=ibnetdiscover writes the InfiniBand ports (those with a\n"
    "CA GUID) as ibnetdiscover does, which the aggregator's --topology reads back. --events lists\n"
    "the changes the discovery saw (moved, port_changed, gone, new), oldest first. With several\n"
    "aggregators (shards), their topologies are merged: each knows its own nodes' ports.\n"
    "\n"
    "Exit codes: 0 printed; 1 the file disagrees with the discovery (not with --events);\n"
    "2 usage error or the aggregator could not be asked.\n";

std::string End(bool has, const v1::SwitchEnd& e) {
  if (!has || e.id().empty()) return "-";
  std::string s = e.name().empty() ? e.id() : e.name();
  if (e.port() != 0) return absl::StrCat(s, " port ", e.port());
  if (!e.port_name().empty()) return absl::StrCat(s, " ", e.port_name());
  return s;
}

std::string HostPort(const std::string& device, uint32_t port) {
  if (device.empty()) return "-";
  return port == 0 ? device : absl::StrCat(device, "/", port);
}

analysis::LeafPort FromProto(const v1::SwitchEnd& e) {
  analysis::LeafPort l;
  l.id = e.id();
  l.name = e.name();
  l.port = static_cast<int>(e.port());
  l.port_name = e.port_name();
  return l;
}

// The InfiniBand graph of the reply as a Topology, for FormatIbnetdiscover: the ports with a CA
// GUID (not those of a `node switch` map or LLDP), the switch-to-switch links, switch port counts.
analysis::Topology IbTopology(const v1::TopologyView& t) {
  std::vector<analysis::HcaAttachment> hcas;
  std::map<std::string, std::string> switches;
  std::map<std::string, int> num_ports;
  for (const v1::TopologySwitch& s : t.switches()) {
    switches[s.id()] = s.name();
    if (s.num_ports() > 0) num_ports[s.id()] = static_cast<int>(s.num_ports());
  }
  std::vector<analysis::SwitchLink> links;
  for (const v1::TopologySwitchLink& l : t.switch_links()) {
    links.push_back({l.a().id(), static_cast<int>(l.a().port()), l.b().id(),
                     static_cast<int>(l.b().port())});
    switches.emplace(l.a().id(), l.a().name());
    switches.emplace(l.b().id(), l.b().name());
  }
  for (const v1::TopologyPort& p : t.ports()) {
    if (p.ca_guid().empty()) continue;
    analysis::HcaAttachment& h = hcas.emplace_back();
    h.host = p.host();
    h.device = p.device();
    h.description = p.description();
    h.ca_guid = p.ca_guid();
    h.ca_port = static_cast<int>(p.ca_port());
    h.leaf = FromProto(p.peer());
  }
  return analysis::Topology::FromAttachments(analysis::Topology::Format::kIbnetdiscover,
                                             std::move(hcas), std::move(switches),
                                             std::move(links), std::move(num_ports));
}

void PrintEvents(const v1::TopologyView& t, std::ostream& out) {
  if (t.events().empty()) {
    out << "No topology events.\n";
    return;
  }
  Table table({"TIME", "KIND", "HOST", "PORT", "BEFORE", "AFTER", "SOURCE", "REPORTED BY"});
  for (const v1::TopologyEvent& e : t.events()) {
    table.AddRow({Rfc3339(e.time_unix_nanos()), e.kind(), e.host(),
                  HostPort(e.device(), e.ca_port()), End(e.has_before(), e.before()),
                  End(e.has_after(), e.after()), e.source(), e.reporter()});
  }
  table.Render(out);
  if (t.events_total() > static_cast<uint64_t>(t.events_size())) {
    out << "(" << t.events_size() << " of " << t.events_total() << " events shown)\n";
  }
}

void PrintTable(const v1::TopologyView& t, std::ostream& out) {
  out << "Topology: " << t.source();
  if (!t.discovery().empty() && t.discovery() != t.source()) out << " merged with " << t.discovery();
  out << "; " << t.ports_size() << " ports on " << t.switches_size() << " switches";
  if (t.source() == "file" && !t.discovery().empty()) {
    out << "; " << t.disagreements_size() << " disagreements";
  }
  out << "\n";
  if (t.ports().empty()) {
    out << "No ports.\n";
    return;
  }
  out << "\n";
  Table ports({"HOST", "PORT", "SWITCH", "SWITCH PORT", "CA GUID"});
  for (const v1::TopologyPort& p : t.ports()) {
    const v1::SwitchEnd& e = p.peer();
    std::string sw_port = e.port() != 0 ? absl::StrCat(e.port()) : e.port_name();
    ports.AddRow({p.host().empty() ? Cell(p.description(), 40) : p.host(),
                  p.host_level() && p.device().empty() ? "*" : HostPort(p.device(), p.ca_port()),
                  Cell(e.name().empty() ? e.id() : e.name(), 48), sw_port.empty() ? "-" : sw_port,
                  p.ca_guid().empty() ? "-" : p.ca_guid()});
  }
  ports.Render(out);
  out << "\n";
  Table switches({"SWITCH", "ID", "HOSTS", "PORTS"});
  switches.RightAlign(2);
  switches.RightAlign(3);
  for (const v1::TopologySwitch& s : t.switches()) {
    switches.AddRow({Cell(s.name(), 48), s.id(), absl::StrCat(s.hosts()), absl::StrCat(s.ports())});
  }
  switches.Render(out);
  if (!t.disagreements().empty()) {
    out << "\nWhere the --topology file disagrees with " << t.discovery() << ":\n";
    Table d({"HOST", "PORT", "DISAGREEMENT", "FILE", "DISCOVERED"});
    for (const v1::TopologyDisagreement& x : t.disagreements()) {
      d.AddRow({x.host(), HostPort(x.device(), x.ca_port()), x.kind(), End(x.has_file(), x.file()),
                End(x.has_discovered(), x.discovered())});
    }
    d.Render(out);
  }
}

}  // namespace

int RunTopology(const std::vector<std::string>& argv, CommandContext& ctx) {
  QueryInvocation q;
  if (auto code = PrepareQueryCommand(kName, kUsage, Specs(), argv, ctx, q)) return *code;
  if (!q.args.positional.empty()) {
    return FailCommand(
        ctx, kName,
        absl::StrCat("unexpected argument \"", q.args.positional[0], "\" (see --help)"));
  }
  const std::string format = q.args.Get("format", "table");
  if (format != "table" && format != "ibnetdiscover") {
    return FailCommand(ctx, kName,
                       absl::StrCat("--format \"", format, "\": expected table or ibnetdiscover"));
  }
  const bool events = q.args.Flag("events");
  if (format == "ibnetdiscover" && (events || q.format == OutputFormat::kJson)) {
    return FailCommand(ctx, kName, "--format=ibnetdiscover goes with neither --events nor -o json");
  }
  v1::GetTopologyRequest req;
  req.set_events_only(events);
  req.set_node(q.args.Get("node"));
  if (q.args.Has("max-events")) {
    uint32_t n = 0;
    if (!events || !absl::SimpleAtoi(q.args.Get("max-events"), &n) || n == 0) {
      return FailCommand(ctx, kName,
                         absl::StrCat("--max-events \"", q.args.Get("max-events"),
                                      "\" is not a count > 0 (with --events)"));
    }
    req.set_max_events(n);
  }
  auto answers = Gather(
      q.fleet->All<v1::TopologyView>([&req](QueryClient& c) { return c.GetTopology(req); }),
      ctx.err);
  if (!answers.ok()) return FailCommand(ctx, kName, std::string(answers.status().message()));
  // Each shard knows the ports of its own nodes: the fleet's topology is the union (replicas of
  // a shard answer the same and count once).
  std::vector<const v1::TopologyView*> views;
  for (const auto& a : *answers) views.push_back(&a.value);
  const v1::TopologyView t = views.size() == 1 ? *views.front()
                                                : MergeTopologies(views, req.max_events());
  if (q.format == OutputFormat::kJson) {
    WriteJson(TopologyJson(t), ctx.out);
  } else if (events) {
    PrintEvents(t, ctx.out);
  } else if (format == "ibnetdiscover") {
    analysis::Topology ib = IbTopology(t);
    if (ib.attachments().empty()) {
      return FailCommand(ctx, kName,
                         absl::StrCat("no InfiniBand ports in the topology (source ", t.source(),
                                      "); the table or -o json show it"));
    }
    ctx.out << analysis::FormatIbnetdiscover(ib);
  } else {
    PrintTable(t, ctx.out);
  }
  ctx.out.flush();
  return !events && !t.disagreements().empty() ? kExitProblems : kExitOk;
}

}  // namespace ringside::daemon::ctl
