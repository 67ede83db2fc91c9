#include "collectors/ibmad/ibmad_collector.h"

#include <algorithm>
#include <array>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringside::collectors {
namespace {

constexpr uint16_t AttrOf(MadQuery q) {
  switch (q) {
    case MadQuery::kPortInfo:
      return kAttrPortInfo;
    case MadQuery::kPortCounters:
      return kAttrPortCounters;
    case MadQuery::kPortCountersExtended:
      return kAttrPortCountersExtended;
  }
  return 0;
}

}  // namespace

bool IbmadCollector::Node::operator==(const Node& o) const {
  return lid == o.lid && info.node_guid == o.info.node_guid && info.node_type == o.info.node_type &&
         info.num_ports == o.info.num_ports && info.local_port == o.info.local_port &&
         desc == o.desc && cap_mask == o.cap_mask && ports == o.ports;
}

std::unique_ptr<IbmadCollector> IbmadCollector::Create(IbmadOptions options) {
  absl::StatusOr<std::unique_ptr<LibibmadTransport>> transport =
      LibibmadTransport::Open(options.port);
  if (!transport.ok()) {
    return std::make_unique<IbmadCollector>(std::move(options), nullptr, transport.status());
  }
  return std::make_unique<IbmadCollector>(std::move(options), *std::move(transport));
}

std::unique_ptr<IbmadCollector> IbmadCollector::Create(IbmadOptions options,
                                                       std::shared_ptr<SharedIbmadPort> port) {
  if (port == nullptr) return Create(std::move(options));
  return std::make_unique<IbmadCollector>(std::move(options),
                                          LibibmadTransport::OnPort(std::move(port)));
}

IbmadCollector::IbmadCollector(IbmadOptions options, std::unique_ptr<MadTransport> transport,
                               absl::Status availability)
    : options_(std::move(options)),
      transport_(std::move(transport)),
      availability_(std::move(availability)),
      table_(std::make_shared<SeriesTable>()) {
  if (transport_ == nullptr && availability_.ok()) {
    availability_ = absl::FailedPreconditionError("ibmad: no MAD transport");
  }
  for (const ScanTarget& t : options_.targets) {
    Target target;
    target.spec = t;
    targets_.push_back(std::move(target));
  }
}

absl::StatusOr<IbmadCollector::Node> IbmadCollector::Discover(const ScanTarget& t,
                                                              CycleErrors& errors) {
  MadData data;
  Node node;
  node.lid = t.lid;
  if (absl::Status s = transport_->SmpGet(t.lid, kAttrNodeInfo, 0, data); !s.ok()) return s;
  node.info = DecodeNodeInfo(data);
  if (node.info.num_ports == 0) {
    return absl::DataLossError(absl::StrCat("LID ", t.lid, ": NodeInfo says 0 ports"));
  }
  node.device = GuidString(node.info.node_guid);
  if (absl::Status s = transport_->SmpGet(t.lid, kAttrNodeDescription, 0, data); s.ok()) {
    node.desc = DecodeNodeDescription(data);
  } else if (absl::IsDeadlineExceeded(s)) {
    return s;
  } else {
    errors.Add(s);  // a node without a description is still scanned
  }
  // PortSelect of a ClassPortInfo query is ignored; perfquery sends the first port it reads.
  const uint8_t first_port =
      t.ports.empty() ? std::max<uint8_t>(1, node.info.local_port) : t.ports.front();
  if (absl::Status s = transport_->PmaGet(t.lid, kAttrClassPortInfo, first_port, data); !s.ok()) {
    return s;
  }
  node.cap_mask = DecodeClassPortInfoCapMask(data);

  if (t.ports.empty()) {
    if (node.info.node_type == 2) {  // switch: every external port
      for (int p = 1; p <= node.info.num_ports; ++p) node.ports.push_back(static_cast<uint8_t>(p));
    } else {
      node.ports.push_back(std::max<uint8_t>(1, node.info.local_port));
    }
  } else {
    for (uint8_t p : t.ports) {
      if (p > node.info.num_ports) {
        errors.Add(absl::InvalidArgumentError(absl::StrCat("LID ", t.lid, " (", node.device,
                                                           ") has ", node.info.num_ports,
                                                           " ports; port ", p, " is not scanned")));
        continue;
      }
      node.ports.push_back(p);
    }
  }
  node.fields = PortScanFields(node.cap_mask, options_.use_extended);
  return node;
}

bool IbmadCollector::DiscoverDue(absl::Time now, CycleErrors& errors) {
  const bool rediscover = now - last_rediscovery_ >= options_.rediscover_interval;
  if (rediscover) last_rediscovery_ = now;
  bool changed = false;
  for (Target& t : targets_) {
    const bool due = t.discovered ? rediscover : now - t.last_attempt >= options_.retry_interval;
    if (!due) continue;
    t.last_attempt = now;
    absl::StatusOr<Node> node = Discover(t.spec, errors);
    if (!node.ok()) {
      // A known node that does not answer keeps its series (its values are errors this cycle).
      errors.Add(absl::Status(node.status().code(), absl::StrCat("discovery of LID ", t.spec.lid,
                                                                 ": ", node.status().message())));
      continue;
    }
    if (!t.discovered || !(t.node == *node)) {
      t.node = *std::move(node);
      t.discovered = true;
      changed = true;
    }
  }
  return changed;
}

void IbmadCollector::BuildTable() {
  auto table = std::make_shared<SeriesTable>();
  scanned_.clear();
  std::set<std::pair<uint64_t, uint8_t>> seen;  // (node GUID, port) already scanned
  for (const Target& t : targets_) {
    if (!t.discovered) continue;
    Node node = t.node;
    std::vector<uint8_t> ports;
    for (uint8_t p : node.ports) {
      if (seen.insert({node.info.node_guid, p}).second) ports.push_back(p);
    }
    node.ports = std::move(ports);
    if (node.ports.empty()) continue;
    node.first_value = table->defs.size();

    InfoRecord info{"ibmad_node", node.device, "", {}};
    info.labels["node_guid"] = node.device;
    info.labels["node_desc"] = node.desc;
    info.labels["lid"] = absl::StrCat(node.lid);
    info.labels["node_type"] = std::string(NodeTypeName(node.info.node_type));
    info.labels["num_ports"] = absl::StrCat(node.info.num_ports);
    info.labels["pma_cap_mask"] = absl::StrFormat("0x%04x", node.cap_mask);
    info.labels["counters"] =
        UsesExtendedCounters(node.cap_mask, options_.use_extended) ? "extended" : "basic";
    table->info.push_back(std::move(info));

    for (uint8_t p : node.ports) {
      for (const ScanField& f : node.fields) {
        SeriesDef def;
        def.source = "ibmad";
        def.device = node.device;
        def.port = absl::StrCat(p);
        def.counter = std::string(f.counter);
        def.kind = f.kind;
        def.width = f.width;
        def.unit = f.unit;
        def.saturates = f.saturates;
        table->defs.push_back(std::move(def));
      }
    }
    scanned_.push_back(std::move(node));
  }
  table_ = std::move(table);
}

void IbmadCollector::ReadNode(const Node& node, absl::Time now, std::vector<Value>& values,
                              CycleErrors& errors) {
  // Which queries a port needs.
  std::array<bool, kMadQueryCount> needed{};
  for (const ScanField& f : node.fields) needed[static_cast<int>(f.query)] = true;

  absl::Status unreachable;  // set after a query of this node timed out
  uint64_t skipped = 0;
  std::vector<LinkEvent> events;
  for (size_t pi = 0; pi < node.ports.size(); ++pi) {
    const uint8_t port = node.ports[pi];
    std::array<MadData, kMadQueryCount> data;
    std::array<absl::Status, kMadQueryCount> status;
    for (int q = 0; q < kMadQueryCount; ++q) {
      if (!needed[q]) continue;
      if (!unreachable.ok()) {
        status[q] = unreachable;
        ++skipped;
        continue;
      }
      const auto query = static_cast<MadQuery>(q);
      status[q] = query == MadQuery::kPortInfo
                      ? transport_->SmpGet(node.lid, kAttrPortInfo, port, data[q])
                      : transport_->PmaGet(node.lid, AttrOf(query), port, data[q]);
      if (status[q].ok()) continue;
      if (absl::IsUnimplemented(status[q])) continue;  // the node has no such attribute
      errors.Add(absl::Status(
          status[q].code(), absl::StrCat(node.device, " port ", port, ": ", status[q].message())));
      if (absl::IsDeadlineExceeded(status[q])) unreachable = status[q];
    }

    PortReading reading;
    const size_t base = node.first_value + pi * node.fields.size();
    for (size_t fi = 0; fi < node.fields.size(); ++fi) {
      const ScanField& f = node.fields[fi];
      const int q = static_cast<int>(f.query);
      Value& v = values[base + fi];
      if (!status[q].ok()) {
        v.status =
            absl::IsUnimplemented(status[q]) ? ValueStatus::kUnavailable : ValueStatus::kError;
        continue;
      }
      v.raw = DecodeScanField(data[q], f);
      v.status = ValueStatus::kOk;
      if (f.counter == "link_downed") {
        reading.has_link_downed = true;
        reading.link_downed = v.raw;
      }
    }
    if (status[static_cast<int>(MadQuery::kPortInfo)].ok()) {
      const PortStates states = DecodePortStates(data[static_cast<int>(MadQuery::kPortInfo)]);
      reading.has_state = true;
      reading.state = states.state;
      reading.phys_state = states.phys_state;
    }
    transitions_.Observe(node.device, absl::StrCat(port), reading, now, events);
  }
  if (skipped > 0) {
    // Counted as failed reads, reported once.
    errors.Add(absl::DeadlineExceededError(absl::StrCat(
        node.device, " (LID ", node.lid, ") unreachable: ", skipped, " queries skipped")));
    errors.count += skipped - 1;
  }
  QueueEvents(events);
}

void IbmadCollector::QueueEvents(std::vector<LinkEvent>& events) {
  for (LinkEvent& e : events) pending_events_.push_back(std::move(e));
  if (pending_events_.size() > options_.max_pending_events) {
    const size_t drop = pending_events_.size() - options_.max_pending_events;
    pending_events_.erase(pending_events_.begin(),
                          pending_events_.begin() + static_cast<std::ptrdiff_t>(drop));
    dropped_events_ += drop;
  }
}

void IbmadCollector::Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) {
  out.collector = std::string(name());
  if (transport_ == nullptr) {
    out.table = table_;
    out.values.clear();
    return;
  }
  bool retarget = false;
  if (options_.target_source) {
    uint64_t version = 0;
    std::vector<ScanTarget> targets = options_.target_source(&version);
    if (version != targets_version_) {
      targets_version_ = version;
      SetTargets(targets);
      retarget = true;
    }
  }
  if (DiscoverDue(now, errors) || retarget) BuildTable();
  out.table = table_;
  out.values.assign(table_->defs.size(), Value{});
  for (const Node& node : scanned_) ReadNode(node, now, out.values, errors);
  // Every scanned port was just observed; what was not is no longer scanned (a node replaced
  // behind its LID).
  transitions_.ForgetOlderThan(now - options_.rediscover_interval);
}

void IbmadCollector::SetTargets(const std::vector<ScanTarget>& targets) {
  std::vector<Target> next;
  for (const ScanTarget& spec : targets) {
    Target t;
    t.spec = spec;
    for (Target& old : targets_) {
      if (old.spec.lid == spec.lid && old.spec.ports == spec.ports) {
        t = std::move(old);
        break;
      }
    }
    next.push_back(std::move(t));
  }
  targets_ = std::move(next);
}

std::vector<LinkEvent> IbmadCollector::TakeEvents() {
  std::vector<LinkEvent> events;
  events.swap(pending_events_);
  return events;
}

}  // namespace ringside::collectors
