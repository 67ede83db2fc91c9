#include "analysis/topology_merge.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringside::analysis {
namespace {

bool PortsDiffer(const LeafPort& a, const LeafPort& b) {
  if (a.port != 0 && b.port != 0 && a.port != b.port) return true;
  return !a.port_name.empty() && !b.port_name.empty() && a.port_name != b.port_name;
}

// Compared port by port: every entry names its device.
bool ByDevice(const std::vector<const HcaAttachment*>& v) {
  for (const HcaAttachment* h : v) {
    if (h->device.empty() || (h->any_device && h->ca_port == 0)) return false;
  }
  return true;
}

TopologyDisagreement Make(DisagreementKind kind, const std::string& host, const HcaAttachment* f,
                          const HcaAttachment* d, bool by_device) {
  TopologyDisagreement x;
  x.kind = kind;
  x.host = host;
  const HcaAttachment* a = f != nullptr ? f : d;
  if (by_device && a != nullptr) {
    x.device = a->device;
    x.ca_port = a->ca_port;
  }
  if (f != nullptr) x.file = f->leaf;
  if (d != nullptr) x.discovered = d->leaf;
  return x;
}

void CompareByDevice(const std::string& host, const std::vector<const HcaAttachment*>& file,
                     const std::vector<const HcaAttachment*>& disc, bool complete,
                     std::vector<TopologyDisagreement>& out) {
  std::vector<bool> used(disc.size(), false);
  for (const HcaAttachment* f : file) {
    const HcaAttachment* match = nullptr;
    for (size_t i = 0; i < disc.size(); ++i) {
      const HcaAttachment* d = disc[i];
      if (used[i] || d->device != f->device) continue;
      if (f->ca_port != 0 && d->ca_port != 0 && f->ca_port != d->ca_port) continue;
      used[i] = true;
      match = d;
      break;
    }
    if (match == nullptr) {
      if (complete) out.push_back(Make(DisagreementKind::kMissingInDiscovery, host, f, nullptr, true));
    } else if (!SameSwitch(f->leaf, match->leaf)) {
      out.push_back(Make(DisagreementKind::kOtherSwitch, host, f, match, true));
    } else if (PortsDiffer(f->leaf, match->leaf)) {
      out.push_back(Make(DisagreementKind::kOtherSwitchPort, host, f, match, true));
    }
  }
  for (size_t i = 0; i < disc.size(); ++i) {
    if (!used[i]) out.push_back(Make(DisagreementKind::kMissingInFile, host, nullptr, disc[i], true));
  }
}

// Switch by switch: the switches only one side names, paired up as other_switch, the rest missing
// on the other side.
void CompareByHost(const std::string& host, const std::vector<const HcaAttachment*>& file,
                   const std::vector<const HcaAttachment*>& disc, bool complete,
                   std::vector<TopologyDisagreement>& out) {
  auto unmatched = [](const std::vector<const HcaAttachment*>& a,
                      const std::vector<const HcaAttachment*>& b) {
    std::vector<const HcaAttachment*> left;
    for (const HcaAttachment* x : a) {
      bool seen = std::any_of(b.begin(), b.end(),
                              [&](const HcaAttachment* y) { return SameSwitch(x->leaf, y->leaf); });
      bool dup = std::any_of(left.begin(), left.end(),
                             [&](const HcaAttachment* y) { return SameSwitch(x->leaf, y->leaf); });
      if (!seen && !dup) left.push_back(x);
    }
    return left;
  };
  std::vector<const HcaAttachment*> uf = unmatched(file, disc), ud = unmatched(disc, file);
  size_t i = 0;
  for (; i < uf.size() && i < ud.size(); ++i) {
    out.push_back(Make(DisagreementKind::kOtherSwitch, host, uf[i], ud[i], false));
  }
  for (size_t j = i; j < uf.size() && complete; ++j) {
    out.push_back(Make(DisagreementKind::kMissingInDiscovery, host, uf[j], nullptr, false));
  }
  for (size_t j = i; j < ud.size(); ++j) {
    out.push_back(Make(DisagreementKind::kMissingInFile, host, nullptr, ud[j], false));
  }
}

std::vector<const HcaAttachment*> Named(const Topology& t, const std::string& host) {
  std::vector<const HcaAttachment*> out;
  for (const HcaAttachment* h : t.HcasOf(host)) out.push_back(h);
  return out;
}

}  // namespace

absl::string_view DisagreementKindName(DisagreementKind k) {
  switch (k) {
    case DisagreementKind::kOtherSwitch:
      return "other_switch";
    case DisagreementKind::kOtherSwitchPort:
      return "other_switch_port";
    case DisagreementKind::kMissingInDiscovery:
      return "missing_in_discovery";
    case DisagreementKind::kMissingInFile:
      return "missing_in_file";
  }
  return "unknown";
}

bool TopologyDisagreement::operator<(const TopologyDisagreement& o) const {
  return std::tie(host, device, ca_port, kind, file.id, file.port, discovered.id, discovered.port) <
         std::tie(o.host, o.device, o.ca_port, o.kind, o.file.id, o.file.port, o.discovered.id,
                  o.discovered.port);
}

std::string DescribeLeafPort(const LeafPort& p) {
  if (p.id.empty()) return "-";
  std::string s = p.name.empty() ? p.id : p.name;
  if (p.port != 0) return absl::StrCat(s, " port ", p.port);
  if (!p.port_name.empty()) return absl::StrCat(s, " ", p.port_name);
  return s;
}

std::string DescribeDisagreement(const TopologyDisagreement& d) {
  std::string where = d.host;
  if (!d.device.empty()) absl::StrAppend(&where, " ", d.device);
  if (d.ca_port != 0) absl::StrAppend(&where, "/", d.ca_port);
  return absl::StrCat(where, ": ", DisagreementKindName(d.kind), ": file ",
                      DescribeLeafPort(d.file), ", discovered ", DescribeLeafPort(d.discovered));
}

bool SameSwitch(const LeafPort& a, const LeafPort& b) {
  if (a.id.empty() || b.id.empty()) return false;
  return a.id == b.id || a.id == b.name || a.name == b.id || (!a.name.empty() && a.name == b.name);
}

MergedTopology MergeTopologies(const Topology* file, const Topology* discovered,
                               MergeOptions options) {
  MergedTopology m;
  if (file == nullptr && discovered == nullptr) return m;
  const Topology* only = file == nullptr ? discovered : discovered == nullptr ? file : nullptr;
  if (only != nullptr) {
    m.topology = *only;
    return m;
  }
  // Both: the file's entries, then the discovery's for hosts the file does not name.
  const bool both_maps = file->format() == Topology::Format::kNodeSwitchMap &&
                         discovered->format() == Topology::Format::kNodeSwitchMap;
  std::vector<HcaAttachment> merged = file->attachments();
  std::map<std::string, std::string> switches = file->switch_names();
  for (const auto& [id, name] : discovered->switch_names()) switches.emplace(id, name);
  for (HcaAttachment h : discovered->attachments()) {
    if (!h.host.empty() && !file->HcasOf(h.host).empty()) continue;
    if (discovered->format() == Topology::Format::kNodeSwitchMap) h.any_device = true;
    merged.push_back(std::move(h));
  }
  // Switch-to-switch cables: the file's when it has any, else the discovery's.
  const Topology& links = file->switch_links().empty() ? *discovered : *file;
  std::map<std::string, int> switch_ports = discovered->switch_ports();
  for (const auto& [id, n] : file->switch_ports()) switch_ports[id] = n;
  m.topology = Topology::FromAttachments(
      both_maps ? Topology::Format::kNodeSwitchMap : Topology::Format::kIbnetdiscover,
      std::move(merged), std::move(switches), links.switch_links(), std::move(switch_ports));

  std::set<std::string> hosts;
  for (const HcaAttachment& h : file->attachments()) {
    if (!h.host.empty()) hosts.insert(h.host);
  }
  for (const std::string& host : hosts) {
    std::vector<const HcaAttachment*> f = Named(*file, host);
    std::vector<const HcaAttachment*> d = Named(*discovered, host);
    if (d.empty()) {
      if (!options.discovery_complete) continue;
      for (const HcaAttachment* x : f) {
        m.disagreements.push_back(
            Make(DisagreementKind::kMissingInDiscovery, host, x, nullptr, ByDevice(f)));
      }
      continue;
    }
    if (ByDevice(f) && ByDevice(d)) {
      CompareByDevice(host, f, d, options.discovery_complete, m.disagreements);
    } else {
      CompareByHost(host, f, d, options.discovery_complete, m.disagreements);
    }
  }
  std::sort(m.disagreements.begin(), m.disagreements.end());
  return m;
}

}  // namespace ringside::analysis
