#include "daemon/agent/shard_placement.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collectors/ibmad/subnet_topology.h"
#include "collectors/lldp/lldp_collector.h"
#include "collectors/lldp/lldp_leaf.h"
#include "daemon/agent/metric_catalog.h"

namespace ringside::daemon {
namespace {

const std::string* Label(const collectors::InfoRecord& r, const char* key) {
  auto it = r.labels.find(key);
  return it == r.labels.end() ? nullptr : &it->second;
}

}  // namespace

absl::StatusOr<ShardPlacementMode> ParseShardPlacementMode(absl::string_view text) {
  if (text == "auto") return ShardPlacementMode::kAuto;
  if (text == "topology") return ShardPlacementMode::kTopology;
  if (text == "lldp") return ShardPlacementMode::kLldp;
  if (text == "name") return ShardPlacementMode::kName;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text, "\": want auto, topology, lldp or name"));
}

absl::string_view ShardPlacementModeName(ShardPlacementMode mode) {
  switch (mode) {
    case ShardPlacementMode::kAuto: return "auto";
    case ShardPlacementMode::kTopology: return "topology";
    case ShardPlacementMode::kLldp: return "lldp";
    case ShardPlacementMode::kName: return "name";
  }
  return "auto";
}

std::string LldpLeafOfNode(absl::string_view node,
                           const std::vector<const collectors::InfoRecord*>& records) {
  std::set<std::string> roce;  // netdevs with an RDMA device
  for (const collectors::InfoRecord* r : records) {
    if (r->source != "netdev") continue;
    if (const std::string* dev = Label(*r, "rdma_device"); dev != nullptr && !dev->empty()) {
      roce.insert(r->device);
    }
  }
  std::set<std::string> leaves;
  for (const collectors::InfoRecord* r : records) {
    if (r->source != "lldp" || roce.count(r->device) == 0) continue;
    const std::string* name = Label(*r, "chassis_name");
    const std::string* id = Label(*r, "chassis_id");
    const std::string sw = collectors::LldpSwitchName(name ? *name : "", id ? *id : "");
    if (sw.empty() || sw == node) continue;  // no neighbour, or a cable back to this host
    leaves.insert(collectors::LldpLeafId(sw));
  }
  return leaves.empty() ? std::string() : *leaves.begin();
}

std::string LldpLeafOfSnapshot(const AgentSnapshot& snap) {
  std::vector<const collectors::InfoRecord*> records;
  for (const collectors::CollectorSnapshot& cs : snap.collectors) {
    if (!cs.table || (cs.collector != "netdev" && cs.collector != "lldp")) continue;
    for (const collectors::InfoRecord& r : cs.table->info) records.push_back(&r);
  }
  return LldpLeafOfNode(snap.node, records);
}

std::string LldpLeafFromNeighbors(absl::string_view node,
                                  const std::vector<collectors::LldpNeighbor>& neighbors,
                                  const std::map<std::string, collectors::RdmaPortRef>& rdma) {
  std::vector<collectors::InfoRecord> owned;
  owned.reserve(neighbors.size() + rdma.size());
  for (const auto& [netdev, ref] : rdma) {
    owned.push_back({"netdev", netdev, "", {{"rdma_device", ref.device}, {"rdma_port", ref.port}}});
  }
  std::set<std::string> seen;
  for (const collectors::LldpNeighbor& n : neighbors) {
    if (seen.insert(n.netdev).second) owned.push_back(collectors::LldpInfoRecord(n));
  }
  std::vector<const collectors::InfoRecord*> records;
  for (const collectors::InfoRecord& r : owned) records.push_back(&r);
  return LldpLeafOfNode(node, records);
}

std::string IbLeafOfNode(absl::string_view node, const std::vector<collectors::InfoRecord>& records) {
  std::vector<collectors::InfoRecord> ib;
  for (const collectors::InfoRecord& r : records) {
    if (r.source == "ib_node" || r.source == "ib_link") ib.push_back(r);
  }
  if (ib.empty()) return "";
  absl::StatusOr<analysis::Topology> t = collectors::TopologyFromInfoRecords(ib);
  if (!t.ok()) return "";
  std::vector<std::string> leaves = t->LeavesOf(node);
  return leaves.empty() ? std::string() : leaves.front();
}

absl::StatusOr<std::string> WaitForLeaf(
    const std::function<absl::StatusOr<std::string>()>& leaf_now, absl::Duration wait,
    absl::Duration poll) {
  const absl::Time deadline = absl::Now() + wait;
  while (true) {
    absl::StatusOr<std::string> leaf = leaf_now();
    if (!leaf.ok() && (absl::IsNotFound(leaf.status()) || absl::IsPermissionDenied(leaf.status()))) {
      return leaf.status();
    }
    if (leaf.ok() && !leaf->empty()) return leaf;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return "";
    absl::SleepFor(std::min(poll, left));
  }
}

std::string PlacementKey(ShardPlacementMode mode, absl::string_view node,
                         const analysis::Topology* file, absl::string_view discovered_leaf) {
  const bool by_file = mode == ShardPlacementMode::kAuto || mode == ShardPlacementMode::kTopology;
  const bool by_discovery = mode == ShardPlacementMode::kAuto || mode == ShardPlacementMode::kLldp;
  if (by_file && file != nullptr && !file->LeavesOf(node).empty()) {
    return analysis::ShardMap::NodePlacementKey(node, file);
  }
  if (by_discovery && !discovered_leaf.empty()) return absl::StrCat("leaf:", discovered_leaf);
  return analysis::ShardMap::NodePlacementKey(node, nullptr);
}

namespace {

bool UsesDiscovery(ShardPlacementMode mode, absl::string_view node,
                   const analysis::Topology* file) {
  switch (mode) {
    case ShardPlacementMode::kLldp: return true;
    case ShardPlacementMode::kAuto: return file == nullptr || file->LeavesOf(node).empty();
    default: return false;
  }
}

}  // namespace

ShardPlacement::ShardPlacement(std::shared_ptr<const analysis::ShardMap> map,
                               ShardPlacementMode mode, std::string node,
                               std::shared_ptr<const analysis::Topology> file, std::string leaf)
    : map_(std::move(map)),
      mode_(mode),
      node_(std::move(node)),
      file_(std::move(file)),
      uses_discovery_(daemon::UsesDiscovery(mode_, node_, file_.get())) {
  absl::MutexLock l(&mu_);
  leaf_ = std::move(leaf);
  key_ = PlacementKey(mode_, node_, file_.get(), leaf_);
  shard_ = map_->ShardOfKey(key_);
}

ShardPlacement::Change ShardPlacement::Update(absl::string_view leaf) {
  Change c;
  absl::MutexLock l(&mu_);
  if (!uses_discovery_ || leaf.empty() || leaf == leaf_) return c;
  leaf_ = std::string(leaf);
  std::string key = PlacementKey(mode_, node_, file_.get(), leaf_);
  if (key == key_) return c;
  const size_t shard = map_->ShardOfKey(key);
  c.key_changed = true;
  c.moved = shard != shard_;
  c.from = map_->shards()[shard_].name;
  c.to = map_->shards()[shard].name;
  c.key = key;
  c.replicas = map_->shards()[shard].replicas;
  key_ = std::move(key);
  shard_ = shard;
  if (c.moved) ++moves_;
  return c;
}

ShardPlacement::Change ShardPlacement::OnSnapshot(const AgentSnapshot& snap) {
  if (!uses_discovery_) return {};
  // Tables are immutable once published: the same tables, the same leaves.
  std::vector<std::shared_ptr<const collectors::SeriesTable>> lldp_tables;
  for (const collectors::CollectorSnapshot& cs : snap.collectors) {
    if (cs.collector == "netdev" || cs.collector == "lldp") lldp_tables.push_back(cs.table);
    if (cs.collector == "ibdisc" && mode_ == ShardPlacementMode::kAuto &&
        cs.table != ib_table_seen_) {
      ib_table_seen_ = cs.table;
      ib_leaf_ = cs.table != nullptr ? IbLeafOfNode(node_, cs.table->info) : "";
    }
  }
  if (lldp_tables != lldp_tables_seen_) {
    lldp_tables_seen_ = std::move(lldp_tables);
    lldp_leaf_ = LldpLeafOfSnapshot(snap);
  }
  return Update(!ib_leaf_.empty() ? ib_leaf_ : lldp_leaf_);
}

std::string ShardPlacement::shard() const {
  absl::MutexLock l(&mu_);
  return map_->shards()[shard_].name;
}

std::vector<std::string> ShardPlacement::replicas() const {
  absl::MutexLock l(&mu_);
  return map_->shards()[shard_].replicas;
}

std::string ShardPlacement::key() const {
  absl::MutexLock l(&mu_);
  return key_;
}

uint64_t ShardPlacement::moves() const {
  absl::MutexLock l(&mu_);
  return moves_;
}

std::vector<prometheus::MetricFamily> ShardPlacement::MetricFamilies() const {
  absl::MutexLock l(&mu_);
  prometheus::MetricFamily info = AgentMetricFamily("ringside_agent_shard_info");
  prometheus::ClientMetric& i = info.metric.emplace_back();
  i.label = {{"node", node_},
             {"shard", map_->shards()[shard_].name},
             {"placed_by", key_},
             {"placement", std::string(ShardPlacementModeName(mode_))}};
  i.gauge.value = 1;
  prometheus::MetricFamily moves = AgentMetricFamily("ringside_agent_shard_moves_total");
  prometheus::ClientMetric& m = moves.metric.emplace_back();
  m.label = {{"node", node_}};
  m.counter.value = static_cast<double>(moves_);
  return {std::move(info), std::move(moves)};
}

}  // namespace ringside::daemon
