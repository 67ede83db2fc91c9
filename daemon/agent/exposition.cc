#include "daemon/agent/exposition.h"

#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "collectors/ethtool/ethtool_names.h"
#include "collectors/nvml/nvml_collector.h"
#include "daemon/agent/metric_catalog.h"
#include "prometheus/client_metric.h"

namespace ringside::daemon {
namespace {

using collectors::InfoRecord;
using collectors::SeriesDef;
using collectors::ValueStatus;
using prometheus::ClientMetric;
using prometheus::MetricFamily;

// Families in catalog order, created on first use.
class FamilySet {
 public:
  MetricFamily& Get(const MetricSpec& spec) {
    auto [it, inserted] = index_.try_emplace(spec.name, families_.size());
    if (inserted) {
      MetricFamily f;
      f.name = std::string(spec.name);
      f.help = std::string(spec.help);
      f.type = spec.type == MetricType::kCounter ? prometheus::MetricType::Counter
                                                 : prometheus::MetricType::Gauge;
      families_.push_back(std::move(f));
    }
    return families_[it->second];
  }
  void Add(const MetricSpec& spec, std::vector<ClientMetric::Label> labels, double value) {
    ClientMetric m;
    m.label = std::move(labels);
    if (spec.type == MetricType::kCounter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    Get(spec).metric.push_back(std::move(m));
  }
  std::vector<MetricFamily> Take() { return std::move(families_); }

 private:
  std::map<absl::string_view, size_t> index_;
  std::vector<MetricFamily> families_;
};

struct PortRef {
  std::string device;
  std::string port;
};

}  // namespace

std::vector<MetricFamily> SnapshotToFamilies(const AgentSnapshot& snap,
                                             const ExpositionOptions& options) {
  const std::string& version = options.version;
  const LinkEventLog* links = options.links;
  FamilySet out;
  const std::string& node = snap.node;

  // netdev ↔ RDMA port, from the netdev collector's info records.
  std::map<std::string, PortRef> netdev_to_port;
  std::map<std::pair<std::string, std::string>, std::string> port_to_netdev;
  for (const collectors::CollectorSnapshot& cs : snap.collectors) {
    if (!cs.table) continue;
    for (const InfoRecord& info : cs.table->info) {
      if (info.source != "netdev") continue;
      auto dev = info.labels.find("rdma_device");
      auto port = info.labels.find("rdma_port");
      if (dev == info.labels.end() || port == info.labels.end()) continue;
      netdev_to_port[info.device] = PortRef{dev->second, port->second};
      port_to_netdev[{dev->second, port->second}] = info.device;
    }
  }

  for (const collectors::CollectorSnapshot& cs : snap.collectors) {
    if (!cs.table) continue;
    const std::vector<SeriesDef>& defs = cs.table->defs;
    for (size_t i = 0; i < defs.size() && i < cs.values.size(); ++i) {
      // Stale: a slow source's last reading, kept on /metrics between its reads.
      if (cs.values[i].status != ValueStatus::kOk && cs.values[i].status != ValueStatus::kStale) {
        continue;
      }
      const SeriesDef& def = defs[i];
      // Driver statistics are matched by their name template (rx_prio3_pause → rx_prio<N>_pause).
      const MetricSpec* spec =
          def.source == "ethtool"
              ? FindMetricSpec(def.source, collectors::EthtoolNameTemplate(def.counter))
              : FindMetricSpec(def.source, def.counter);
      if (spec == nullptr) continue;
      if (def.source == "ethtool" && spec->counter == "*" && !options.ethtool_all) continue;
      std::vector<ClientMetric::Label> labels;
      labels.push_back({"node", node});
      if (def.source == "nvlink") {
        labels.push_back({"gpu", def.device});
        labels.push_back({"link", def.port});
      } else if (def.source == "gpu") {
        labels.push_back({"gpu", def.device});
      } else if (def.source == "host") {
        // node-wide: no device
      } else if (def.source == "cgroup") {
        labels.push_back({"cgroup", def.device});
      } else if (def.source == "ibmad") {
        labels.push_back({"node_guid", def.device});
        labels.push_back({"port", def.port});
      } else if (def.source == "netdev" || def.source == "ethtool" || def.source == "lldp") {
        labels.push_back({"netdev", def.device});
        if (auto it = netdev_to_port.find(def.device); it != netdev_to_port.end()) {
          labels.push_back({"device", it->second.device});
          labels.push_back({"port", it->second.port});
        }
      } else {
        labels.push_back({"device", def.device});
        if (!def.port.empty()) labels.push_back({"port", def.port});
      }
      if (def.priority >= 0) labels.push_back({"priority", absl::StrCat(def.priority)});
      if (spec->counter == "*") labels.push_back({"counter", def.counter});
      // NVML's packed bit-error rates are decoded; everything else is raw x scale.
      const double value = def.unit == collectors::Unit::kPackedBer
                               ? collectors::DecodeNvlinkBer(cs.values[i].raw)
                               : static_cast<double>(cs.values[i].raw) * spec->scale;
      out.Add(*spec, std::move(labels), value);
    }
    for (const InfoRecord& info : cs.table->info) {
      std::vector<ClientMetric::Label> labels{{"node", node}};
      if (info.source == "infiniband_device") {
        labels.push_back({"device", info.device});
        for (const auto& [key, value] : info.labels) {
          labels.push_back({key == "fw_ver" ? "firmware_version" : key, value});
        }
        out.Add(AgentFamily("ringside_ib_device_info"), std::move(labels), 1);
      } else if (info.source == "infiniband_port") {
        labels.push_back({"device", info.device});
        labels.push_back({"port", info.port});
        for (const auto& [key, value] : info.labels) labels.push_back({key, value});
        if (auto it = port_to_netdev.find({info.device, info.port}); it != port_to_netdev.end()) {
          labels.push_back({"netdev", it->second});
        }
        out.Add(AgentFamily("ringside_ib_port_info"), std::move(labels), 1);
      } else if (info.source == "ibmad_node") {
        std::map<std::string, std::string> l = info.labels;
        l.erase("node");
        l.emplace("node_guid", info.device);
        for (const char* drop : {"pma_cap_mask", "counters"}) l.erase(drop);
        for (const auto& [key, value] : l) labels.push_back({key, value});
        out.Add(AgentFamily("ringside_ib_fabric_node_info"), std::move(labels), 1);
      } else if (info.source == "gpu") {
        labels.push_back({"gpu", info.device});
        for (const auto& [key, value] : info.labels) labels.push_back({key, value});
        out.Add(AgentFamily("ringside_gpu_info"), std::move(labels), 1);
      } else if (info.source == "gpu_processes") {
        labels.push_back({"gpu", info.device});
        for (const auto& [key, value] : info.labels) labels.push_back({key, value});
        out.Add(AgentFamily("ringside_gpu_processes_info"), std::move(labels), 1);
      } else if (info.source == "ethtool_caps") {
        labels.push_back({"netdev", info.device});
        if (auto it = netdev_to_port.find(info.device); it != netdev_to_port.end()) {
          labels.push_back({"device", it->second.device});
          labels.push_back({"port", it->second.port});
        }
        for (const auto& [key, value] : info.labels) labels.push_back({key, value});
        out.Add(AgentFamily("ringside_ethtool_capabilities_info"), std::move(labels), 1);
      } else if (info.source == "netdev") {
        labels.push_back({"netdev", info.device});
        if (auto it = netdev_to_port.find(info.device); it != netdev_to_port.end()) {
          labels.push_back({"device", it->second.device});
          labels.push_back({"port", it->second.port});
        }
        out.Add(AgentFamily("ringside_netdev_info"), std::move(labels), 1);
      } else if (info.source == "lldp") {
        labels.push_back({"netdev", info.device});
        for (const auto& [key, value] : info.labels) labels.push_back({key, value});
        out.Add(AgentFamily("ringside_lldp_neighbor_info"), std::move(labels), 1);
      }
    }
  }

  // Link transitions from event sources (netlink, verbs): a flap shorter than the sampling interval
  // still counts here.
  if (links != nullptr) {
    for (const LinkEventLog::Count& c : links->Counts()) {
      // XIDs ride the link-event path to the aggregator but are no transition: they have their
      // own series (gpu xid_events, last_xid).
      if (c.source == collectors::kXidEventSource) continue;
      std::vector<ClientMetric::Label> labels{{"node", node}, {"source", c.source}};
      if (c.source == "netlink") {
        labels.push_back({"netdev", c.device});
        if (auto it = netdev_to_port.find(c.device); it != netdev_to_port.end()) {
          labels.push_back({"device", it->second.device});
          labels.push_back({"port", it->second.port});
        }
      } else {
        labels.push_back({"device", c.device});
        if (!c.port.empty()) labels.push_back({"port", c.port});
      }
      labels.push_back({"to", std::string(collectors::LinkStateName(c.to))});
      out.Add(AgentFamily("ringside_link_transitions_total"), std::move(labels),
              static_cast<double>(c.count));
    }
    out.Add(AgentFamily("ringside_link_events_evicted_total"), {{"node", node}},
            static_cast<double>(links->evicted()));
  }
  if (const LinkEventReader* r = options.link_reader; r != nullptr) {
    if (r->has_netlink()) {
      out.Add(AgentFamily("ringside_agent_netlink_overflows_total"), {{"node", node}},
              static_cast<double>(r->netlink_overflows()));
      out.Add(AgentFamily("ringside_agent_netlink_resync_dump_errors_total"), {{"node", node}},
              static_cast<double>(r->netlink_dump_errors()));
      out.Add(AgentFamily("ringside_agent_netlink_vanished_links_total"), {{"node", node}},
              static_cast<double>(r->netlink_vanished()));
      out.Add(AgentFamily("ringside_agent_netlink_receive_buffer_bytes"), {{"node", node}},
              r->netlink_receive_buffer_bytes());
      out.Add(AgentFamily("ringside_agent_netlink_receive_buffer_capped"), {{"node", node}},
              r->netlink_receive_buffer_bytes() < r->netlink_receive_buffer_wanted() ? 1 : 0);
    }
    if (r->has_port_states()) {
      out.Add(AgentFamily("ringside_agent_port_state_watch_ports"), {{"node", node}},
              static_cast<double>(r->port_state_ports()));
      out.Add(AgentFamily("ringside_agent_port_state_watch_read_failures_total"), {{"node", node}},
              static_cast<double>(r->port_state_read_failures()));
    }
    if (r->has_verbs()) {
      out.Add(AgentFamily("ringside_agent_verbs_device_removals_total"), {{"node", node}},
              static_cast<double>(r->verbs_removals()));
      out.Add(AgentFamily("ringside_agent_verbs_device_reopens_total"), {{"node", node}},
              static_cast<double>(r->verbs_reopens()));
    }
  }

  // The agent's own health.
  out.Add(AgentFamily("ringside_agent_build_info"), {{"node", node}, {"version", version}}, 1);
  out.Add(AgentFamily("ringside_agent_cycles_total"), {{"node", node}},
          static_cast<double>(snap.cycle));
  out.Add(AgentFamily("ringside_agent_cycle_overruns_total"), {{"node", node}},
          static_cast<double>(snap.overruns_total));
  out.Add(AgentFamily("ringside_agent_early_cycles_total"), {{"node", node}},
          static_cast<double>(snap.early_total));
  out.Add(AgentFamily("ringside_agent_last_cycle_timestamp_seconds"), {{"node", node}},
          absl::ToDoubleSeconds(snap.timestamp - absl::UnixEpoch()));
  for (const CollectorHealth& h : snap.health) {
    std::vector<ClientMetric::Label> labels{{"node", node}, {"collector", h.name}};
    out.Add(AgentFamily("ringside_agent_collector_duration_seconds"), labels,
            absl::ToDoubleSeconds(h.last_duration));
    out.Add(AgentFamily("ringside_agent_collector_read_errors_total"), labels,
            static_cast<double>(h.read_errors_total));
    out.Add(AgentFamily("ringside_agent_collector_series"), labels, static_cast<double>(h.series));
    std::string reason =
        h.availability.ok() ? "ok" : absl::AsciiStrToLower(absl::StatusCodeToString(h.availability.code()));
    out.Add(AgentFamily("ringside_agent_collector_up"),
            {{"node", node}, {"collector", h.name}, {"reason", reason}},
            h.availability.ok() ? 1 : 0);
  }
  std::vector<MetricFamily> families = out.Take();
  if (options.extra_families) {
    for (MetricFamily& f : options.extra_families()) families.push_back(std::move(f));
  }
  return families;
}

std::vector<MetricFamily> SnapshotCollectable::Collect() const {
  std::shared_ptr<const AgentSnapshot> snap = sampler_->Latest();
  if (!snap) return {};
  return SnapshotToFamilies(*snap, options_);
}

}  // namespace ringside::daemon
