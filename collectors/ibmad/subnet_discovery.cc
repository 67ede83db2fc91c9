#include "collectors/ibmad/subnet_discovery.h"

#include <infiniband/mad.h>

#include <algorithm>
#include <deque>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringside::collectors {
namespace {

// PortInfo.CapabilityMask bit 14: IsExtendedSpeedsSupported (LinkSpeedExt* are valid).
constexpr uint32_t kCapExtendedSpeeds = 1u << 14;
constexpr uint8_t kLinkStateInit = 2;

uint8_t* Bytes(const MadData& data) { return const_cast<uint8_t*>(data.data()); }

DiscoveredPort DecodePort(uint8_t num, const MadData& d) {
  DiscoveredPort p;
  p.num = num;
  p.lid = static_cast<uint16_t>(mad_get_field(Bytes(d), 0, IB_PORT_LID_F));
  p.lmc = static_cast<uint8_t>(mad_get_field(Bytes(d), 0, IB_PORT_LMC_F));
  p.state = static_cast<uint8_t>(mad_get_field(Bytes(d), 0, IB_PORT_STATE_F));
  p.phys_state = static_cast<uint8_t>(mad_get_field(Bytes(d), 0, IB_PORT_PHYS_STATE_F));
  p.width_active = static_cast<uint8_t>(mad_get_field(Bytes(d), 0, IB_PORT_LINK_WIDTH_ACTIVE_F));
  p.speed_active = static_cast<uint8_t>(mad_get_field(Bytes(d), 0, IB_PORT_LINK_SPEED_ACTIVE_F));
  if (mad_get_field(Bytes(d), 0, IB_PORT_CAPMASK_F) & kCapExtendedSpeeds) {
    p.speed_ext_active =
        static_cast<uint8_t>(mad_get_field(Bytes(d), 0, IB_PORT_LINK_SPEED_EXT_ACTIVE_F));
  }
  return p;
}

// One pass's state: the pacing, the deadline and the counts.
class Walker {
 public:
  Walker(DrSmpTransport& t, const DiscoveryOptions& o, DiscoveryStats& s)
      : transport_(t), options_(o), stats_(s), start_(o.now()) {}

  // False once the pass must stop (deadline or a local failure); `out` is valid only on OK.
  absl::Status Get(const std::vector<uint8_t>& path, uint16_t attr, uint32_t mod, MadData& out) {
    if (stopped_) return absl::CancelledError("discovery stopped");
    if (options_.cancelled && options_.cancelled()) {
      stopped_ = true;
      return Fail(absl::CancelledError("discovery cancelled"));
    }
    absl::Time now = options_.now();
    if (options_.max_mads_per_second > 0 && next_send_ > now) {
      options_.sleep(std::min(next_send_ - now, start_ + options_.max_duration - now));
      now = options_.now();
    }
    if (now - start_ >= options_.max_duration) {
      stopped_ = true;
      return Fail(absl::DeadlineExceededError(
          absl::StrCat("discovery pass stopped after ", absl::FormatDuration(now - start_))));
    }
    if (options_.max_mads_per_second > 0) {
      next_send_ = std::max(now, next_send_) + absl::Seconds(1) / options_.max_mads_per_second;
    }
    ++stats_.mads;
    absl::Status s = transport_.SmpGetDr(path, attr, mod, out);
    if (!s.ok()) {
      if (s.code() == absl::StatusCode::kUnavailable) stopped_ = true;  // the local port is gone
      return Fail(s);
    }
    return s;
  }
  bool stopped() const { return stopped_; }
  absl::Duration elapsed() const { return options_.now() - start_; }

 private:
  absl::Status Fail(absl::Status s) {
    ++stats_.errors;
    if (stats_.messages.size() < 8) stats_.messages.emplace_back(s.ToString());
    return s;
  }

  DrSmpTransport& transport_;
  const DiscoveryOptions& options_;
  DiscoveryStats& stats_;
  absl::Time start_;
  absl::Time next_send_ = absl::InfinitePast();
  bool stopped_ = false;
};

}  // namespace

bool DiscoveredLink::operator<(const DiscoveredLink& o) const {
  return std::tie(a_guid, a_port, b_guid, b_port) < std::tie(o.a_guid, o.a_port, o.b_guid, o.b_port);
}
bool DiscoveredLink::operator==(const DiscoveredLink& o) const {
  return std::tie(a_guid, a_port, b_guid, b_port) ==
         std::tie(o.a_guid, o.a_port, o.b_guid, o.b_port);
}

SubnetGraph DiscoverSubnet(DrSmpTransport& transport, const DiscoveryOptions& options,
                           DiscoveryStats& stats) {
  SubnetGraph g;
  Walker w(transport, options, stats);
  std::set<DiscoveredLink> links;
  auto add_link = [&](uint64_t g1, uint8_t p1, uint64_t g2, uint8_t p2) {
    DiscoveredLink l{g1, p1, g2, p2};
    if (std::tie(g2, p2) < std::tie(g1, p1)) l = DiscoveredLink{g2, p2, g1, p1};
    links.insert(l);
  };
  // Reads PortInfo `port` of the node at `path` into it; the port's state, or 0 on failure.
  auto read_port = [&](DiscoveredNode& n, const std::vector<uint8_t>& path, uint8_t port) {
    MadData d;
    if (!w.Get(path, kAttrPortInfo, port, d).ok()) return uint8_t{0};
    DiscoveredPort p = DecodePort(port, d);
    if (auto it = n.ports.find(port); it != n.ports.end()) p.port_guid = it->second.port_guid;
    n.ports[port] = p;
    return p.state;
  };

  // The start node: the local CA (or switch) the MADs leave from.
  MadData d;
  if (!w.Get({}, kAttrNodeInfo, 0, d).ok()) {
    stats.duration = w.elapsed();
    return g;
  }
  struct Pending {
    uint64_t guid;
    uint8_t entry_port;  // 0 for the start node
    uint64_t from_guid;  // the node and port it was reached from (0 for the start)
    uint8_t from_port;
  };
  std::deque<Pending> queue;
  {
    DiscoveredNode start;
    start.info = DecodeNodeInfo(d);
    g.start_guid = start.info.node_guid;
    start.ports[start.info.local_port].port_guid = start.info.port_guid;
    queue.push_back({start.info.node_guid, start.info.local_port, 0, 0});
    g.nodes.emplace(start.info.node_guid, std::move(start));
  }
  while (!queue.empty() && !w.stopped()) {
    const Pending cur = queue.front();
    queue.pop_front();
    DiscoveredNode& node = g.nodes[cur.guid];
    const std::vector<uint8_t> path = node.path;
    if (w.Get(path, kAttrNodeDescription, 0, d).ok()) node.description = DecodeNodeDescription(d);
    std::vector<uint8_t> ports;
    if (node.info.node_type == IB_NODE_SWITCH) {
      // Port 0 (the management port) carries the switch's LID.
      if (w.Get(path, kAttrPortInfo, 0, d).ok()) {
        DiscoveredPort p0 = DecodePort(0, d);
        node.lid = p0.lid;
      }
      for (int p = 1; p <= node.info.num_ports; ++p) ports.push_back(static_cast<uint8_t>(p));
    } else {
      // A CA or router answers for the port the SMP came in by; its other ports are reached,
      // if cabled, through their own links.
      ports.push_back(node.info.local_port);
    }
    for (uint8_t port : ports) {
      const uint8_t state = read_port(node, path, port);
      if (node.info.node_type == IB_NODE_SWITCH) {
        if (auto it = node.ports.find(port); it != node.ports.end()) it->second.lid = node.lid;
      }
      if (state < kLinkStateInit) continue;  // down (or unreadable): nothing behind it
      if (cur.from_guid != 0 && port == cur.entry_port) {
        add_link(cur.guid, port, cur.from_guid, cur.from_port);  // the way in: already known
        continue;
      }
      // A CA (or router) is only a transit for SMPs it originates: never go through one.
      if (node.info.node_type != IB_NODE_SWITCH && cur.from_guid != 0) continue;
      if (path.size() >= kMaxDrHops) continue;
      std::vector<uint8_t> next = path;
      next.push_back(port);
      if (!w.Get(next, kAttrNodeInfo, 0, d).ok()) continue;
      NodeInfo peer = DecodeNodeInfo(d);
      add_link(cur.guid, port, peer.node_guid, peer.local_port);
      auto [it, inserted] = g.nodes.try_emplace(peer.node_guid);
      DiscoveredNode& pn = it->second;
      if (inserted) {
        pn.info = peer;
        pn.path = std::move(next);
        pn.ports[peer.local_port].port_guid = peer.port_guid;
        queue.push_back({peer.node_guid, peer.local_port, cur.guid, port});
      } else if (peer.node_type != IB_NODE_SWITCH && !pn.ports.count(peer.local_port)) {
        // Another port of a known CA: read that port through the new path.
        pn.ports[peer.local_port].port_guid = peer.port_guid;
        read_port(pn, next, peer.local_port);
      } else if (peer.node_type != IB_NODE_SWITCH) {
        pn.ports[peer.local_port].port_guid = peer.port_guid;
      }
    }
  }
  // A CA's LID: that of its lowest discovered port with one.
  for (auto& [guid, n] : g.nodes) {
    if (n.info.node_type == IB_NODE_SWITCH) continue;
    n.lid = 0;
    for (const auto& [num, p] : n.ports) {
      if (p.lid != 0) {
        n.lid = p.lid;
        break;
      }
    }
  }
  g.links.assign(links.begin(), links.end());
  g.complete = !w.stopped();
  stats.duration = w.elapsed();
  return g;
}

std::string LinkWidthName(uint8_t w) {
  switch (w) {
    case 1:
      return "1x";
    case 2:
      return "4x";
    case 4:
      return "8x";
    case 8:
      return "12x";
    case 16:
      return "2x";
    default:
      return "?";
  }
}

std::string LinkSpeedName(uint8_t speed_active, uint8_t speed_ext_active) {
  switch (speed_ext_active) {
    case 1:
      return "FDR";
    case 2:
      return "EDR";
    case 4:
      return "HDR";
    case 8:
      return "NDR";
    default:
      break;
  }
  switch (speed_active) {
    case 1:
      return "SDR";
    case 2:
      return "DDR";
    case 4:
      return "QDR";
    default:
      return "?";
  }
}

std::string DrPathString(const std::vector<uint8_t>& path) {
  return absl::StrCat("0", path.empty() ? "" : ",", absl::StrJoin(path, ","));
}

}  // namespace ringside::collectors

namespace ringside::collectors {

std::vector<ScanTarget> SwitchScanTargets(const SubnetGraph& graph) {
  std::vector<ScanTarget> out;
  for (const auto& [guid, node] : graph.nodes) {
    if (node.info.node_type != IB_NODE_SWITCH || node.lid == 0) continue;
    out.push_back(ScanTarget{node.lid, {}});
  }
  std::sort(out.begin(), out.end(),
            [](const ScanTarget& a, const ScanTarget& b) { return a.lid < b.lid; });
  return out;
}

}  // namespace ringside::collectors
