#include "daemon/aggregator/metrics/link_snapshot.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "daemon/aggregator/metrics/analysis_metrics.h"

namespace ringside::daemon {
namespace {

// What ranks a link, and its record (LinkRef::record).
struct Rank {
  int health = 0;
  uint32_t flaps = 0;
  absl::Time last_change;
  const void* record = nullptr;
};

bool Worse(int ha, uint32_t fa, absl::Time ca, int hb, uint32_t fb, absl::Time cb) {
  if (ha != hb) return ha > hb;
  if (fa != fb) return fa > fb;
  return ca > cb;
}

bool Worse(const Rank& a, const Rank& b) {
  return Worse(a.health, a.flaps, a.last_change, b.health, b.flaps, b.last_change);
}

// The node of a link key ("r\x1fnode\x1f...").
absl::string_view NodeOfKey(absl::string_view key) {
  if (key.size() < 2) return {};
  key.remove_prefix(2);
  return key.substr(0, key.find('\x1f'));
}

// Whether the topology places a link (PeerOfLink), with the LLDP neighbours indexed once for the
// whole pass instead of searched for each netdev.
class PeerCheck {
 public:
  explicit PeerCheck(const TopologyState& topology) : topology_(topology) {
    if (topology.lldp_peers != nullptr) {
      for (const LldpPortPeer& p : *topology.lldp_peers) {
        lldp_.insert(absl::StrCat(p.node, absl::string_view("\0", 1), p.netdev));
      }
    }
    topology_.lldp_peers = nullptr;  // PeerOfLink below: the topology alone
  }

  bool HasPeer(const analysis::LinkRef& l) {
    if (l.source == "netdev" && !lldp_.empty()) {
      key_.assign(l.node.data(), l.node.size());
      key_.push_back('\0');
      key_.append(l.device.data(), l.device.size());
      if (lldp_.contains(key_)) return true;
    }
    if (topology_.topology == nullptr) return false;
    return PeerOfLink(topology_, l.node, l.source, l.device, l.port).has_value();
  }

 private:
  TopologyState topology_;
  absl::flat_hash_set<std::string> lldp_;
  std::string key_;  // scratch
};

}  // namespace

std::string LinkKeyOf(absl::string_view source, absl::string_view node, absl::string_view device,
                      absl::string_view port) {
  if (source == "nvlink") return absl::StrCat("n\x1f", node, "\x1f", device, "\x1f", port);
  if (source == "netdev") return absl::StrCat("e\x1f", node, "\x1f", device);
  return absl::StrCat("r\x1f", node, "\x1f", device, "\x1f", port);
}

bool WorseLink(const LinkHealthView& a, const LinkHealthView& b) {
  return Worse(a.health, a.view.flaps_in_window, a.view.last_change, b.health,
               b.view.flaps_in_window, b.view.last_change);
}

LinkSnapshot SnapshotLinks(const analysis::FabricAnalysis& analysis, absl::Time now, size_t max,
                           const LinkFlags& flags, const TopologyState& topology) {
  LinkSnapshot out;
  // Only the links of nodes with an open link incident need their key built and looked up.
  absl::flat_hash_set<absl::string_view> flagged_nodes;
  for (const auto& [key, bits] : flags) flagged_nodes.insert(NodeOfKey(key));
  auto health_of = [&](const analysis::LinkRef& l) {
    int bits = 0;
    if (!flagged_nodes.empty() && flagged_nodes.contains(l.node)) {
      auto f = flags.find(LinkKeyOf(l.source, l.node, l.device, l.port));
      if (f != flags.end()) bits = f->second;
    }
    if (l.state == analysis::LinkState::kDown) return static_cast<int>(LinkHealth::kDown);
    if (bits & 2) return static_cast<int>(LinkHealth::kFlapping);
    if (bits & 1) return static_cast<int>(LinkHealth::kDegraded);
    return static_cast<int>(LinkHealth::kHealthy);
  };

  // One pass: rank every link, keeping the `max` worst in a heap whose top is the best of them
  // (a link tied with it does not displace it: the first visited stay); then copy those alone,
  // by their records, still under the caller's lock.
  PeerCheck peers(topology);
  // A heap under `worse_first`: its front is the least bad of the kept.
  auto worse_first = [](const Rank& a, const Rank& b) { return Worse(a, b); };
  std::vector<Rank> kept;
  kept.reserve(std::min<size_t>(max, 1 << 16));
  analysis.VisitLinks(now, [&](const analysis::LinkRef& l) {
    ++out.total;
    if ((l.source == "infiniband" || l.source == "netdev") && !peers.HasPeer(l)) {
      ++out.ports_without_peer;
    }
    if (max == 0) return;
    const Rank r{health_of(l), l.flaps_in_window, l.last_change, l.record};
    if (kept.size() < max) {
      kept.push_back(r);
      std::push_heap(kept.begin(), kept.end(), worse_first);
    } else if (Worse(r, kept.front())) {
      std::pop_heap(kept.begin(), kept.end(), worse_first);
      kept.back() = r;
      std::push_heap(kept.begin(), kept.end(), worse_first);
    }
  });
  out.worst.reserve(kept.size());
  for (const Rank& r : kept) out.worst.push_back({analysis.LinkViewOf(r.record, now), r.health});
  return out;
}

}  // namespace ringside::daemon
