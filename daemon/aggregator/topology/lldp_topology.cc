#include "daemon/aggregator/topology/lldp_topology.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "collectors/lldp/lldp_leaf.h"

namespace ringside::daemon {
namespace {

std::string Label(const v1::InfoRecord& r, const char* key) {
  auto it = r.labels().find(key);
  return it == r.labels().end() ? std::string() : it->second;
}

}  // namespace

std::vector<LldpPortPeer> LldpPeers(const std::map<std::string, NodeInfoRecords>& nodes) {
  std::vector<LldpPortPeer> out;
  for (const auto& [node, info] : nodes) {
    std::map<std::string, std::pair<std::string, std::string>> rdma;  // netdev → (device, port)
    for (const v1::InfoRecord& r : info.records) {
      if (r.source() != "netdev") continue;
      std::string dev = Label(r, "rdma_device");
      if (!dev.empty()) rdma[r.device()] = {dev, Label(r, "rdma_port")};
    }
    for (const v1::InfoRecord& r : info.records) {
      if (r.source() != "lldp") continue;
      LldpPortPeer p;
      p.node = node;
      p.netdev = r.device();
      if (auto it = rdma.find(p.netdev); it != rdma.end()) {
        p.rdma_device = it->second.first;
        p.rdma_port = it->second.second;
      }
      p.switch_id = Label(r, "chassis_id");
      p.switch_name = collectors::LldpSwitchName(Label(r, "chassis_name"), p.switch_id);
      p.switch_port = Label(r, "port_id");
      p.switch_port_descr = Label(r, "port_descr");
      p.mgmt_addr = Label(r, "mgmt_addr");
      if (p.switch_name.empty()) continue;
      out.push_back(std::move(p));
    }
  }
  std::sort(out.begin(), out.end(), [](const LldpPortPeer& a, const LldpPortPeer& b) {
    return std::tie(a.node, a.netdev) < std::tie(b.node, b.netdev);
  });
  return out;
}

std::map<std::string, std::vector<std::string>> LldpLeaves(const std::vector<LldpPortPeer>& peers) {
  std::set<std::string> nodes;
  for (const LldpPortPeer& p : peers) nodes.insert(p.node);
  std::map<std::string, std::set<std::string>> hosts;
  for (const LldpPortPeer& p : peers) {
    if (p.rdma_device.empty()) continue;           // not a RoCE port
    if (nodes.count(p.switch_name) > 0) continue;  // host-to-host cable
    hosts[collectors::LldpLeafId(p.switch_name)].insert(p.node);
  }
  std::map<std::string, std::vector<std::string>> out;
  for (auto& [leaf, h] : hosts) out[leaf].assign(h.begin(), h.end());
  return out;
}

std::string LldpNodeSwitchLines(const std::vector<LldpPortPeer>& peers) {
  std::set<std::pair<std::string, std::string>> lines;
  for (const auto& [leaf, hosts] : LldpLeaves(peers)) {
    for (const std::string& h : hosts) lines.emplace(h, leaf);
  }
  std::string out;
  for (const auto& [node, leaf] : lines) absl::StrAppend(&out, node, " ", leaf, "\n");
  return out;
}

analysis::Topology LldpPortTopology(const std::vector<LldpPortPeer>& peers) {
  std::set<std::string> nodes;
  for (const LldpPortPeer& p : peers) nodes.insert(p.node);
  std::vector<analysis::HcaAttachment> out;
  for (const LldpPortPeer& p : peers) {
    if (p.rdma_device.empty() || nodes.count(p.switch_name) > 0) continue;
    analysis::HcaAttachment& h = out.emplace_back();
    h.host = p.node;
    h.device = p.rdma_device;
    h.description = p.node;
    if (!absl::SimpleAtoi(p.rdma_port, &h.ca_port)) h.ca_port = 0;
    h.leaf.id = collectors::LldpLeafId(p.switch_name);
    h.leaf.name = p.switch_name;
    h.leaf.port_name = p.switch_port;
    h.any_device = true;
  }
  return analysis::Topology::FromAttachments(analysis::Topology::Format::kNodeSwitchMap,
                                             std::move(out));
}

bool LldpTopology::Relines() {
  std::string lines = LldpNodeSwitchLines(Peers());
  if (lines == lines_) return false;
  lines_ = std::move(lines);
  return true;
}

bool LldpTopology::OnInfo(absl::string_view node, const v1::SeriesDefs& defs) {
  if (!defs.has_info()) return false;
  NodeInfoRecords& n = nodes_[std::string(node)];
  n.records.assign(defs.info().begin(), defs.info().end());
  return Relines();
}

bool LldpTopology::ForgetNode(absl::string_view node) {
  if (nodes_.erase(std::string(node)) == 0) return false;
  return Relines();
}

absl::StatusOr<analysis::Topology> LldpTopology::ToTopology() const {
  const std::string& lines = lines_;
  if (lines.empty()) return absl::NotFoundError("no RoCE port has an LLDP switch neighbour yet");
  return analysis::Topology::Parse(lines, analysis::Topology::Format::kNodeSwitchMap);
}

std::string LldpTopologyFeed::OnInfo(absl::string_view node, const v1::SeriesDefs& defs,
                                     analysis::FabricAnalysis* analysis) {
  if (!lldp_.OnInfo(node, defs)) return "";
  absl::StatusOr<analysis::Topology> t = lldp_.ToTopology();
  std::unique_ptr<analysis::Topology> next;
  if (t.ok()) next = std::make_unique<analysis::Topology>(*std::move(t));
  if (analysis != nullptr) analysis->SetTopology(next.get());
  topology_ = std::move(next);  // the previous one is freed only now, after the hand-over
  if (!topology_) return absl::StrCat("topology from LLDP: none (after ", node, "'s update)");
  return absl::StrCat("topology from LLDP (after ", node, "'s update): ", topology_->leaves(),
                      " leaves, ", topology_->hosts(), " hosts");
}

}  // namespace ringside::daemon
