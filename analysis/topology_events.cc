#include "analysis/topology_events.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "analysis/topology_merge.h"

namespace ringside::analysis {
namespace {

using Key = std::tuple<std::string, std::string, int>;  // host, device, CA port

std::map<Key, std::vector<const HcaAttachment*>> ByPort(const Topology& t) {
  std::map<Key, std::vector<const HcaAttachment*>> out;
  for (const HcaAttachment& h : t.attachments()) {
    if (h.host.empty()) continue;
    out[{h.host, h.device, h.ca_port}].push_back(&h);
  }
  return out;
}

bool SamePort(const LeafPort& a, const LeafPort& b) {
  return SameSwitch(a, b) && a.port == b.port && a.port_name == b.port_name;
}

}  // namespace

absl::string_view TopologyEventKindName(TopologyEventKind k) {
  switch (k) {
    case TopologyEventKind::kMoved:
      return "moved";
    case TopologyEventKind::kPortChanged:
      return "port_changed";
    case TopologyEventKind::kGone:
      return "gone";
    case TopologyEventKind::kNew:
      return "new";
  }
  return "unknown";
}

std::string DescribeTopologyEvent(const TopologyEvent& e) {
  std::string where = e.host;
  if (!e.device.empty()) absl::StrAppend(&where, " ", e.device);
  if (e.ca_port != 0) absl::StrAppend(&where, "/", e.ca_port);
  return absl::StrCat(where, " ", TopologyEventKindName(e.kind), ": ", DescribeLeafPort(e.before),
                      " → ", DescribeLeafPort(e.after));
}

std::vector<TopologyEvent> DiffTopologies(const Topology& before, const Topology& after) {
  std::map<Key, std::vector<const HcaAttachment*>> b = ByPort(before), a = ByPort(after);
  std::vector<TopologyEvent> out;
  auto emit = [&out](const Key& k, TopologyEventKind kind, const HcaAttachment* from,
                     const HcaAttachment* to) {
    TopologyEvent e;
    e.kind = kind;
    std::tie(e.host, e.device, e.ca_port) = k;
    if (from != nullptr) e.before = from->leaf;
    if (to != nullptr) e.after = to->leaf;
    out.push_back(std::move(e));
  };
  std::map<Key, bool> keys;
  for (const auto& [k, v] : b) keys[k] = true;
  for (const auto& [k, v] : a) keys[k] = true;
  for (const auto& [key, unused] : keys) {
    // A named reference: the lambda below may not capture the structured binding itself (clang
    // accepts that only from 16, and the fuzz build uses Debian 12's clang 14).
    const Key& k = key;
    std::vector<const HcaAttachment*> was = b[k], now = a[k];
    // Unchanged ends first, then the same switch on another port, then the rest in order.
    auto drop_pairs = [&](auto same, std::optional<TopologyEventKind> kind) {
      for (auto w = was.begin(); w != was.end();) {
        auto n = std::find_if(now.begin(), now.end(),
                              [&](const HcaAttachment* x) { return same((*w)->leaf, x->leaf); });
        if (n == now.end()) {
          ++w;
          continue;
        }
        if (kind) emit(k, *kind, *w, *n);
        now.erase(n);
        w = was.erase(w);
      }
    };
    drop_pairs(SamePort, std::nullopt);
    drop_pairs(SameSwitch, TopologyEventKind::kPortChanged);
    size_t i = 0;
    for (; i < was.size() && i < now.size(); ++i) emit(k, TopologyEventKind::kMoved, was[i], now[i]);
    for (size_t j = i; j < was.size(); ++j) emit(k, TopologyEventKind::kGone, was[j], nullptr);
    for (size_t j = i; j < now.size(); ++j) emit(k, TopologyEventKind::kNew, nullptr, now[j]);
  }
  return out;
}

void TopologyEventLog::Add(const TopologyEvent& e) {
  ++total_;
  if (capacity_ == 0) return;
  if (events_.size() == capacity_) events_.pop_front();
  events_.push_back(e);
}

std::vector<TopologyEvent> TopologyEventLog::Recent(size_t limit) const {
  size_t n = limit == 0 ? events_.size() : std::min(limit, events_.size());
  return {events_.end() - static_cast<std::ptrdiff_t>(n), events_.end()};
}

}  // namespace ringside::analysis
