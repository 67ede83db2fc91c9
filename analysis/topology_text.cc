#include "analysis/topology_text.h"

#include <algorithm>
#include <map>
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
  std::map<std::string, std::vector<const HcaAttachment*>> by_switch;  // switch id → CA ports
  std::map<std::string, std::vector<const HcaAttachment*>> by_ca;      // CA node id → its ports
  for (const HcaAttachment& h : topology.attachments()) {
    if (h.leaf.id.empty()) continue;
    by_switch[h.leaf.id].push_back(&h);
    by_ca[NodeId('H', h.ca_guid.empty() ? Clean(h.description) : h.ca_guid)].push_back(&h);
  }
  auto ca_id = [](const HcaAttachment& h) {
    return NodeId('H', h.ca_guid.empty() ? Clean(h.description) : h.ca_guid);
  };
  std::string out = absl::StrCat("# Topology: ", topology.hosts(), " hosts, ", by_ca.size(),
                                 " CAs, ", by_switch.size(), " switches (ringside topology)\n");
  for (auto& [id, ports] : by_switch) {
    std::sort(ports.begin(), ports.end(), [](const HcaAttachment* a, const HcaAttachment* b) {
      return a->leaf.port < b->leaf.port;
    });
    int nports = 0;
    for (const HcaAttachment* h : ports) nports = std::max(nports, h->leaf.port);
    std::string name = topology.LeafName(id);
    if (name.empty()) name = ports.front()->leaf.name;
    absl::StrAppend(&out, "\nvendid=0x0\ndevid=0x0\n");
    if (IsGuid(id)) absl::StrAppend(&out, "switchguid=", id, "\n");
    absl::StrAppend(&out, "Switch\t", std::max(nports, 1), " \"", NodeId('S', Clean(id)),
                    "\"\t\t# \"", Clean(name), "\" base port 0 lid 0 lmc 0\n");
    for (const HcaAttachment* h : ports) {
      absl::StrAppend(&out, "[", h->leaf.port, "]\t\"", ca_id(*h), "\"[", h->ca_port, "]\t\t# \"",
                      Clean(h->description), "\" lid 0\n");
    }
  }
  for (auto& [id, ports] : by_ca) {
    std::sort(ports.begin(), ports.end(), [](const HcaAttachment* a, const HcaAttachment* b) {
      return a->ca_port < b->ca_port;
    });
    const HcaAttachment& first = *ports.front();
    absl::StrAppend(&out, "\nvendid=0x0\ndevid=0x0\n");
    if (IsGuid(first.ca_guid)) absl::StrAppend(&out, "caguid=", first.ca_guid, "\n");
    absl::StrAppend(&out, "Ca\t", ports.size(), " \"", id, "\"\t\t# \"", Clean(first.description),
                    "\"\n");
    for (const HcaAttachment* h : ports) {
      std::string name = topology.LeafName(h->leaf.id);
      if (name.empty()) name = h->leaf.name;
      absl::StrAppend(&out, "[", h->ca_port, "]\t\"", NodeId('S', Clean(h->leaf.id)), "\"[",
                      h->leaf.port, "]\t\t# lid 0 lmc 0 \"", Clean(name), "\" lid 0\n");
    }
  }
  return out;
}

}  // namespace ringside::analysis
