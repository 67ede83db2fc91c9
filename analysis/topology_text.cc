#include "analysis/topology_text.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringside::analysis {
namespace {

bool IsGuid(const std::string& s) {
  if (s.size() != 18 || !absl::StartsWith(s, "0x")) return false;
  return std::all_of(s.begin() + 2, s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

// The node id ibnetdiscover prints: "S-<guid>" / "H-<guid>", else the name itself.
std::string NodeId(char type, const std::string& id) {
  return IsGuid(id) ? absl::StrCat(std::string(1, type), "-", id.substr(2)) : id;
}

// Quotes cannot appear inside a quoted field.
std::string Clean(std::string s) {
  std::replace(s.begin(), s.end(), '"', '\'');
  return s;
}

}  // namespace

std::string FormatIbnetdiscover(const Topology& topology) {
  struct PortLine {
    int port = 0;
    std::string text;
  };
  std::map<std::string, std::vector<PortLine>> by_switch;          // switch id → its port lines
  std::map<std::string, std::vector<const HcaAttachment*>> by_ca;  // CA node id → its ports
  auto ca_id = [](const HcaAttachment& h) {
    return NodeId('H', h.ca_guid.empty() ? Clean(h.description) : h.ca_guid);
  };
  auto switch_name = [&topology](const std::string& id, const std::string& fallback) {
    std::string name = topology.LeafName(id);
    return Clean(name.empty() ? (fallback.empty() ? id : fallback) : name);
  };
  for (const HcaAttachment& h : topology.attachments()) {
    if (h.leaf.id.empty()) continue;
    by_switch[h.leaf.id].push_back(
        {h.leaf.port, absl::StrCat("[", h.leaf.port, "]\t\"", ca_id(h), "\"[", h.ca_port,
                                   "]\t\t# \"", Clean(h.description), "\" lid 0\n")});
    by_ca[ca_id(h)].push_back(&h);
  }
  for (const SwitchLink& l : topology.switch_links()) {
    for (const auto& [from, from_port, to, to_port] :
         {std::tuple{l.a_id, l.a_port, l.b_id, l.b_port},
          std::tuple{l.b_id, l.b_port, l.a_id, l.a_port}}) {
      by_switch[from].push_back(
          {from_port, absl::StrCat("[", from_port, "]\t\"", NodeId('S', Clean(to)), "\"[", to_port,
                                   "]\t\t# \"", switch_name(to, ""), "\" lid 0\n")});
    }
  }
  std::string out = absl::StrCat("# Topology: ", topology.hosts(), " hosts, ", by_ca.size(),
                                 " CAs, ", by_switch.size(), " switches, ",
                                 topology.switch_links().size(),
                                 " switch-to-switch links (ringside topology)\n");
  for (auto& [id, ports] : by_switch) {
    std::stable_sort(ports.begin(), ports.end(),
                     [](const PortLine& a, const PortLine& b) { return a.port < b.port; });
    int nports = 1;
    if (auto it = topology.switch_ports().find(id); it != topology.switch_ports().end()) {
      nports = it->second;
    }
    for (const PortLine& p : ports) nports = std::max(nports, p.port);
    absl::StrAppend(&out, "\nvendid=0x0\ndevid=0x0\n");
    if (IsGuid(id)) absl::StrAppend(&out, "switchguid=", id, "\n");
    absl::StrAppend(&out, "Switch\t", nports, " \"", NodeId('S', Clean(id)), "\"\t\t# \"",
                    switch_name(id, ""), "\" base port 0 lid 0 lmc 0\n");
    for (const PortLine& p : ports) out += p.text;
  }
  for (auto& [id, ports] : by_ca) {
    std::stable_sort(ports.begin(), ports.end(),
                     [](const HcaAttachment* a, const HcaAttachment* b) {
                       return a->ca_port < b->ca_port;
                     });
    const HcaAttachment& first = *ports.front();
    absl::StrAppend(&out, "\nvendid=0x0\ndevid=0x0\n");
    if (IsGuid(first.ca_guid)) absl::StrAppend(&out, "caguid=", first.ca_guid, "\n");
    absl::StrAppend(&out, "Ca\t", ports.size(), " \"", id, "\"\t\t# \"", Clean(first.description),
                    "\"\n");
    for (const HcaAttachment* h : ports) {
      absl::StrAppend(&out, "[", h->ca_port, "]\t\"", NodeId('S', Clean(h->leaf.id)), "\"[",
                      h->leaf.port, "]\t\t# lid 0 lmc 0 \"", switch_name(h->leaf.id, h->leaf.name),
                      "\" lid 0\n");
    }
  }
  return out;
}

}  // namespace ringside::analysis
