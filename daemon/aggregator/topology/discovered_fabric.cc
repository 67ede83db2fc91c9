#include "daemon/aggregator/topology/discovered_fabric.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectors/ibmad/mad_fields.h"
#include "collectors/ibmad/subnet_graph.h"
#include "collectors/ibmad/subnet_topology.h"

namespace ringside::daemon {
namespace {

// A change of more lines than this is logged as one line of counts (a new rail plane).
constexpr size_t kMaxChangeLines = 12;

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

std::string Summary(const collectors::SubnetGraph& g, const analysis::Topology& t) {
  return absl::StrCat(g.nodes.size(), " nodes, ", g.links.size(), " links, ", t.switches(),
                      " switches, ", t.cas(), " CAs on ", t.leaves(), " leaves");
}

// What changed from `before` to `after`, one line each (prefix first).
std::vector<std::string> Changes(const std::string& prefix, const collectors::SubnetGraph& before,
                                 const collectors::SubnetGraph& after,
                                 const analysis::Topology* topology) {
  std::vector<std::string> lines;
  size_t links_gone = 0, links_new = 0, nodes_gone = 0, nodes_new = 0;
  const std::set<collectors::DiscoveredLink> old_links(before.links.begin(), before.links.end());
  const std::set<collectors::DiscoveredLink> new_links(after.links.begin(), after.links.end());
  for (const auto& link : old_links) {
    if (new_links.count(link)) continue;
    ++links_gone;
    lines.push_back(absl::StrCat(prefix, ": link gone: ", LinkText(before, link)));
  }
  for (const auto& link : new_links) {
    if (old_links.count(link)) continue;
    ++links_new;
    lines.push_back(absl::StrCat(prefix, ": new link: ", LinkText(after, link)));
  }
  for (const auto& [guid, n] : before.nodes) {
    if (after.nodes.count(guid)) continue;
    ++nodes_gone;
    lines.push_back(absl::StrCat(prefix, ": node gone: ", Name(before, guid)));
  }
  for (const auto& [guid, n] : after.nodes) {
    if (before.nodes.count(guid)) continue;
    ++nodes_new;
    lines.push_back(absl::StrCat(prefix, ": new node: ", Name(after, guid)));
  }
  if (lines.empty()) {
    lines.push_back(absl::StrCat(prefix, ": node details changed (descriptions, LIDs, rates)"));
  }
  if (lines.size() <= kMaxChangeLines) return lines;
  return {absl::StrCat(prefix, ": ", nodes_new, " new nodes, ", nodes_gone, " nodes gone, ",
                       links_new, " new links, ", links_gone, " links gone; now ",
                       topology != nullptr ? Summary(after, *topology)
                                           : absl::StrCat(after.nodes.size(), " nodes"))};
}

// Without the nodes no link reaches (a discoverer that sees only itself): they tell nothing
// about the fabric, and a node record without port lines is not ibnetdiscover text.
collectors::SubnetGraph Linked(collectors::SubnetGraph g) {
  std::set<uint64_t> linked;
  for (const collectors::DiscoveredLink& l : g.links) linked.insert(l.a_guid), linked.insert(l.b_guid);
  std::erase_if(g.nodes, [&](const auto& n) { return !linked.count(n.first); });
  return g;
}

}  // namespace

DiscoveredFabric::DiscoveredFabric(std::function<void(const std::string&)> log,
                                   DiscoveredFabricOptions options)
    : log_(std::move(log)), options_(std::move(options)) {}

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
  const absl::Time now = options_.now();
  if (records.empty()) {
    // No graph in this node's set (any more): it no longer refreshes the one it sent.
    absl::ReaderMutexLock l(&mu_);
    auto it = reporters_.find(node);
    if (it != reporters_.end()) it->second->holds.store(false, std::memory_order_relaxed);
    return;
  }
  absl::StatusOr<collectors::SubnetGraph> graph = collectors::GraphFromInfoRecords(records);
  if (graph.ok()) {
    // A graph that cannot be turned into a topology is refused whole.
    collectors::SubnetGraph linked = Linked(*graph);
    absl::StatusOr<analysis::Topology> t =
        linked.nodes.empty() ? analysis::Topology() : collectors::TopologyFromGraph(linked);
    if (!t.ok()) graph = t.status();
  }
  if (!graph.ok()) {
    log_(absl::StrCat("fabric discovery from ", node, ": ", graph.status().ToString()));
    return;
  }
  std::vector<std::string> lines;
  {
    absl::MutexLock l(&mu_);
    std::unique_ptr<Reporter>& r = reporters_[std::string(node)];
    const bool same = r != nullptr && collectors::IbnetdiscoverText(r->graph) ==
                                          collectors::IbnetdiscoverText(*graph);
    if (r == nullptr) r = std::make_unique<Reporter>();
    r->seen_ns.store(absl::ToUnixNanos(now), std::memory_order_relaxed);
    r->holds.store(true, std::memory_order_relaxed);
    // The same graph again (a new session resends the node's info set) is not news: it keeps
    // its place in the order, so a stale resend does not outrank another discoverer's report.
    if (!same) {
      r->graph = *std::move(graph);
      r->received = ++received_;
      lines = Remerge(absl::StrCat("fabric discovery from ", node));
    }
    std::vector<std::string> expired = ExpireLocked(now);
    lines.insert(lines.end(), expired.begin(), expired.end());
  }
  for (const std::string& line : lines) log_(line);
}

void DiscoveredFabric::OnSamples(absl::string_view node,
                                 absl::Span<const analysis::ObservedSample>) {
  const int64_t now = absl::ToUnixNanos(options_.now());
  {
    absl::ReaderMutexLock l(&mu_);
    auto it = reporters_.find(node);
    if (it != reporters_.end() && it->second->holds.load(std::memory_order_relaxed)) {
      it->second->seen_ns.store(now, std::memory_order_relaxed);
    }
  }
  if (now >= next_check_ns_.load(std::memory_order_relaxed)) Expire();
}

bool DiscoveredFabric::Expire() {
  const absl::Time now = options_.now();
  const uint64_t before = updates();
  std::vector<std::string> lines;
  {
    absl::MutexLock l(&mu_);
    lines = ExpireLocked(now);
  }
  for (const std::string& line : lines) log_(line);
  return updates() != before;
}

std::vector<std::string> DiscoveredFabric::ExpireLocked(absl::Time now) {
  next_check_ns_.store(absl::ToUnixNanos(now + kExpireCheck), std::memory_order_relaxed);
  std::vector<std::string> lines;
  for (auto it = reporters_.begin(); it != reporters_.end();) {
    const absl::Time seen = absl::FromUnixNanos(it->second->seen_ns.load());
    if (now - seen < options_.stale_after) {
      ++it;
      continue;
    }
    const std::string node = it->first;
    it = reporters_.erase(it);
    lines.push_back(absl::StrCat("fabric discovery: no report from ", node, " for ",
                                 absl::FormatDuration(now - seen),
                                 ", its graph no longer counts"));
    std::vector<std::string> changes = Remerge(absl::StrCat("fabric discovery without ", node));
    lines.insert(lines.end(), changes.begin(), changes.end());
  }
  return lines;
}

std::vector<std::string> DiscoveredFabric::Remerge(const std::string& prefix) {
  // Newest first: each node belongs to the newest graph that has it.
  std::vector<const Reporter*> order;
  for (const auto& [name, r] : reporters_) order.push_back(r.get());
  std::sort(order.begin(), order.end(),
            [](const Reporter* a, const Reporter* b) { return a->received > b->received; });
  collectors::SubnetGraph merged;
  merged.complete = true;
  std::map<uint64_t, const Reporter*> owner;
  for (const Reporter* r : order) {
    for (const auto& [guid, n] : r->graph.nodes) {
      if (owner.try_emplace(guid, r).second) merged.nodes[guid] = n;
    }
  }
  // A link counts when the graph owning both of its ends has it.
  for (const Reporter* r : order) {
    for (const collectors::DiscoveredLink& l : r->graph.links) {
      if (owner[l.a_guid] == r && owner[l.b_guid] == r) merged.links.push_back(l);
    }
  }
  std::sort(merged.links.begin(), merged.links.end());
  merged.links.erase(std::unique(merged.links.begin(), merged.links.end()), merged.links.end());
  merged = Linked(std::move(merged));

  std::string text = merged.nodes.empty() ? "" : collectors::IbnetdiscoverText(merged);
  if (text == merged_text_) return {};
  std::shared_ptr<const analysis::Topology> topology;
  if (!merged.nodes.empty()) {
    absl::StatusOr<analysis::Topology> t = collectors::TopologyFromGraph(merged);
    if (!t.ok()) return {absl::StrCat(prefix, ": the merged graph: ", t.status().ToString())};
    topology = std::make_shared<const analysis::Topology>(*std::move(t));
  }
  std::vector<std::string> lines;
  if (merged_.nodes.empty()) {
    lines.push_back(absl::StrCat(prefix, ": ", Summary(merged, *topology)));
  } else if (merged.nodes.empty()) {
    lines.push_back(absl::StrCat(prefix, ": no discovered graph left"));
  } else {
    lines = Changes(prefix, merged_, merged, topology.get());
  }
  merged_ = std::move(merged);
  merged_text_ = std::move(text);
  topology_ = std::move(topology);
  updates_.fetch_add(1, std::memory_order_acq_rel);
  return lines;
}

std::shared_ptr<const analysis::Topology> DiscoveredFabric::current() const {
  absl::MutexLock l(&mu_);
  return topology_;
}

std::vector<std::string> DiscoveredFabric::reporters() const {
  absl::MutexLock l(&mu_);
  std::vector<std::string> out;
  for (const auto& [name, r] : reporters_) out.push_back(name);
  return out;
}

std::string DiscoveredFabric::reporter() const { return absl::StrJoin(reporters(), ", "); }

}  // namespace ringside::daemon
