#include "collectors/lldp/lldp_collector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringside::collectors {
namespace {

bool SamePeer(const LldpNeighbor& a, const LldpNeighbor& b) {
  return a.chassis_id == b.chassis_id && a.port_id == b.port_id && a.chassis_name == b.chassis_name;
}

}  // namespace

InfoRecord LldpInfoRecord(const LldpNeighbor& n) {
  InfoRecord r{"lldp", n.netdev, "", {}};
  auto put = [&](const char* key, const std::string& value) {
    if (!value.empty()) r.labels[key] = value;
  };
  put("protocol", n.protocol);
  put("chassis_id_subtype", n.chassis_id_subtype);
  put("chassis_id", n.chassis_id);
  put("chassis_name", n.chassis_name);
  put("chassis_descr", n.chassis_descr);
  put("port_id_subtype", n.port_id_subtype);
  put("port_id", n.port_id);
  put("port_descr", n.port_descr);
  put("mgmt_addr", n.mgmt_addr);
  if (n.pvid > 0) r.labels["pvid"] = absl::StrCat(n.pvid);
  put("vlans", n.vlans);
  if (n.neighbors_on_port > 1) r.labels["neighbors"] = absl::StrCat(n.neighbors_on_port);
  return r;
}

std::string DescribeNeighbor(const LldpNeighbor& n) {
  std::string port = !n.port_descr.empty() ? n.port_descr : n.port_id;
  return absl::StrCat(n.chassis_name.empty() ? "(no system name)" : n.chassis_name, " port ", port,
                      " (chassis ", n.chassis_id_subtype, n.chassis_id_subtype.empty() ? "" : " ",
                      n.chassis_id, ", port id ", n.port_id, ")");
}

LldpCollector::LldpCollector(LldpOptions options)
    : options_(std::move(options)), table_(std::make_shared<SeriesTable>()) {
  if (!options_.read) {
    options_.read = [client = options_.client] { return ReadLldpNeighbors(client); };
  }
}

void LldpCollector::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

void LldpCollector::Refresh(absl::Time now) {
  last_refresh_ = now;
  absl::StatusOr<std::vector<LldpNeighbor>> read = options_.read();
  if (!read.ok()) {
    availability_ = read.status();
    if (!reported_failure_) {
      Log(absl::StrCat("lldp: ", read.status().ToString(), "; no neighbours until lldpd answers (",
                       "retried every ", absl::FormatDuration(options_.refresh_interval), ")"));
      reported_failure_ = true;
    }
    // What lldpd said last is no longer known to be true: no records, but the last neighbours
    // stay for comparison, so an lldpd restart is not taken for a recabling.
    if (!table_->info.empty() || !table_->defs.empty()) {
      table_ = std::make_shared<SeriesTable>();
    }
    for (auto& [netdev, p] : netdevs_) p.present = false;
    return;
  }
  if (reported_failure_) {
    Log(absl::StrCat("lldp: lldpd answers again (", read->size(), " neighbours)"));
    reported_failure_ = false;
  }
  availability_ = absl::OkStatus();

  // The first neighbour of each netdev.
  std::map<std::string, const LldpNeighbor*> now_seen;
  for (const LldpNeighbor& n : *read) now_seen.emplace(n.netdev, &n);

  for (auto& [netdev, p] : netdevs_) {
    if (p.present && now_seen.count(netdev) == 0) {
      Log(absl::StrCat("lldp: ", netdev, " lost its neighbour ", DescribeNeighbor(p.neighbor)));
      p.present = false;
      ++p.changes;
    }
  }
  for (const auto& [netdev, n] : now_seen) {
    auto [it, fresh] = netdevs_.try_emplace(netdev);
    PerNetdev& p = it->second;
    const bool had = !fresh && !p.neighbor.chassis_id.empty();
    if (!had) {
      Log(absl::StrCat("lldp: ", netdev, " neighbour ", DescribeNeighbor(*n)));
    } else if (!SamePeer(p.neighbor, *n)) {
      Log(absl::StrCat("lldp: ", netdev, " neighbour changed from ", DescribeNeighbor(p.neighbor),
                       " to ", DescribeNeighbor(*n)));
      ++p.changes;
    } else if (!p.present) {
      ++p.changes;  // came back after being lost: the loss was counted, so is the return
    }
    p.neighbor = *n;
    p.present = true;
  }

  auto table = std::make_shared<SeriesTable>();
  for (const auto& [netdev, p] : netdevs_) {
    if (p.present) table->info.push_back(LldpInfoRecord(p.neighbor));
    SeriesDef neighbors{"lldp", netdev, "", "neighbors", SeriesKind::kGauge, 0, Unit::kCount};
    SeriesDef changes{"lldp", netdev, "", "neighbor_changes", SeriesKind::kCounter, 64,
                      Unit::kCount};
    table->defs.push_back(std::move(neighbors));
    table->defs.push_back(std::move(changes));
  }
  // Publish a new table only when something in it differs (the uploader resends on change).
  auto same_info = [](const InfoRecord& a, const InfoRecord& b) {
    return a.source == b.source && a.device == b.device && a.port == b.port &&
           a.labels == b.labels;
  };
  const bool same =
      table->defs.size() == table_->defs.size() && table->info.size() == table_->info.size() &&
      std::equal(table->info.begin(), table->info.end(), table_->info.begin(), same_info) &&
      std::equal(table->defs.begin(), table->defs.end(), table_->defs.begin(),
                 [](const SeriesDef& a, const SeriesDef& b) {
                   return a.device == b.device && a.counter == b.counter;
                 });
  if (!same) table_ = std::move(table);
}

void LldpCollector::Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& /*errors*/) {
  if (now - last_refresh_ >= options_.refresh_interval) Refresh(now);
  out.collector = std::string(name());
  out.table = table_;
  out.values.assign(table_->defs.size(), Value{});
  for (size_t i = 0; i < table_->defs.size(); ++i) {
    const SeriesDef& def = table_->defs[i];
    auto it = netdevs_.find(def.device);
    if (it == netdevs_.end()) continue;
    const PerNetdev& p = it->second;
    Value& v = out.values[i];
    v.status = ValueStatus::kOk;
    if (def.counter == "neighbors") {
      v.raw = p.present ? static_cast<uint64_t>(p.neighbor.neighbors_on_port) : 0;
    } else {
      v.raw = p.changes;
    }
  }
}

}  // namespace ringside::collectors
