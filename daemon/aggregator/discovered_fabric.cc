#include "daemon/aggregator/discovered_fabric.h"

#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectors/ibmad/mad_fields.h"
#include "collectors/ibmad/subnet_graph.h"
#include "collectors/ibmad/subnet_topology.h"

namespace ringside::daemon {
namespace {

std::string Name(const collectors::SubnetGraph& g, uint64_t guid) {
  auto it = g.nodes.find(guid);
  return it != g.nodes.end() && !it->second.description.empty()
             ? absl::StrCat("\"", it->second.description, "\" ", collectors::GuidString(guid))
             : collectors::GuidString(guid);
}

std::string End(const collectors::SubnetGraph& g, uint64_t guid, uint8_t port) {
  return absl::StrCat(Name(g, guid), "[", port, "]");
}

std::string LinkText(const collectors::SubnetGraph& g, const collectors::DiscoveredLink& l) {
  return absl::StrCat(End(g, l.a_guid, l.a_port), " - ", End(g, l.b_guid, l.b_port));
}

}  // namespace

void DiscoveredFabric::OnInfo(absl::string_view node, const v1::SeriesDefs& defs) {
  std::vector<collectors::InfoRecord> records;
  for (const v1::InfoRecord& r : defs.info()) {
    if (r.source() != "ib_node" && r.source() != "ib_link") continue;
    collectors::InfoRecord& c = records.emplace_back();
    c.source = r.source();
    c.device = r.device();
    c.port = r.port();
    for (const auto& [k, v] : r.labels()) c.labels[k] = v;
  }
  if (records.empty()) return;
  absl::StatusOr<collectors::SubnetGraph> graph = collectors::GraphFromInfoRecords(records);
  absl::StatusOr<analysis::Topology> topo =
      graph.ok() ? collectors::TopologyFromGraph(*graph) : graph.status();
  if (!topo.ok()) {
    log_(absl::StrCat("fabric discovery from ", node, ": ", topo.status().ToString()));
    return;
  }
  auto shared = std::make_shared<const analysis::Topology>(*std::move(topo));
  std::vector<std::string> lines;
  {
    absl::MutexLock l(&mu_);
    const collectors::SubnetGraph& old = graph_;
    if (updates_ == 0) {
      lines.push_back(absl::StrCat("fabric discovery from ", node, ": ", graph->nodes.size(),
                                   " nodes, ", graph->links.size(), " links, ",
                                   shared->switches(), " switches, ", shared->cas(), " CAs on ",
                                   shared->leaves(), " leaves"));
    } else {
      const std::set<collectors::DiscoveredLink> before(old.links.begin(), old.links.end());
      const std::set<collectors::DiscoveredLink> after(graph->links.begin(), graph->links.end());
      for (const auto& link : before) {
        if (!after.count(link)) {
          lines.push_back(absl::StrCat("fabric discovery from ", node,
                                       ": link gone: ", LinkText(old, link)));
        }
      }
      for (const auto& link : after) {
        if (!before.count(link)) {
          lines.push_back(absl::StrCat("fabric discovery from ", node,
                                       ": new link: ", LinkText(*graph, link)));
        }
      }
      for (const auto& [guid, n] : old.nodes) {
        if (!graph->nodes.count(guid)) {
          lines.push_back(absl::StrCat("fabric discovery from ", node, ": node gone: ",
                                       Name(old, guid)));
        }
      }
      for (const auto& [guid, n] : graph->nodes) {
        if (!old.nodes.count(guid)) {
          lines.push_back(absl::StrCat("fabric discovery from ", node, ": new node: ",
                                       Name(*graph, guid)));
        }
      }
    }
    graph_ = *std::move(graph);
    topology_ = std::move(shared);
    reporter_ = std::string(node);
    ++updates_;
  }
  for (const std::string& line : lines) log_(line);
}

std::shared_ptr<const analysis::Topology> DiscoveredFabric::current() const {
  absl::MutexLock l(&mu_);
  return topology_;
}

std::string DiscoveredFabric::reporter() const {
  absl::MutexLock l(&mu_);
  return reporter_;
}

uint64_t DiscoveredFabric::updates() const {
  absl::MutexLock l(&mu_);
  return updates_;
}

}  // namespace ringside::daemon
