#include "daemon/aggregator/metrics/link_snapshot.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "daemon/aggregator/metrics/analysis_metrics.h"

namespace ringside::daemon {
namespace {

// What ranks a link, and where the first pass met it.
struct Rank {
  int health = 0;
  uint32_t flaps = 0;
  absl::Time last_change;
  size_t index = 0;
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

  // First pass: rank every link, keeping the `max` worst in a heap whose top is the best of them
  // (a link tied with it does not displace it: the first visited stay).
  PeerCheck peers(topology);
  auto better_first = [](const Rank& a, const Rank& b) { return Worse(a, b); };
  std::priority_queue<Rank, std::vector<Rank>, decltype(better_first)> kept(better_first);
  size_t index = 0;
  analysis.VisitLinks(now, [&](const analysis::LinkRef& l) {
    if ((l.source == "infiniband" || l.source == "netdev") && !peers.HasPeer(l)) {
      ++out.ports_without_peer;
    }
    const Rank r{health_of(l), l.flaps_in_window, l.last_change, index++};
    if (max == 0) return;
    if (kept.size() < max) {
      kept.push(r);
    } else if (Worse(r, kept.top())) {
      kept.pop();
      kept.push(r);
    }
  });
  out.total = index;

  // Second pass (the same map, unchanged under the same lock: the same order): copy the kept.
  std::vector<Rank> chosen;
  chosen.reserve(kept.size());
  while (!kept.empty()) {
    chosen.push_back(kept.top());
    kept.pop();
  }
  std::sort(chosen.begin(), chosen.end(),
            [](const Rank& a, const Rank& b) { return a.index < b.index; });
  out.worst.reserve(chosen.size());
  size_t at = 0;
  index = 0;
  analysis.VisitLinks(now, [&](const analysis::LinkRef& l) {
    if (at < chosen.size() && chosen[at].index == index) {
      out.worst.push_back({l.ToView(), chosen[at].health});
      ++at;
    }
    ++index;
  });
  return out;
}

}  // namespace ringside::daemon
