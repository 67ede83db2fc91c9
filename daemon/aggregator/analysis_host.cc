#include "daemon/aggregator/analysis_host.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "analysis/import/record_observation.h"
#include "analysis/pci_bus_id.h"
#include "analysis/populate.h"
#include "analysis/sqlite_incident_store.h"
#include "daemon/aggregator/shards/peer_incidents.h"
#include "daemon/common/steady_time.h"

namespace ringside::daemon {
namespace {

std::optional<analysis::DeltaKind> DeltaOf(analysis::StepKind k) {
  switch (k) {
    case analysis::StepKind::kNormal:
      return analysis::DeltaKind::kNormal;
    case analysis::StepKind::kWrap:
      return analysis::DeltaKind::kWrap;
    case analysis::StepKind::kReset:
      return analysis::DeltaKind::kReset;
    case analysis::StepKind::kSaturated:
      return analysis::DeltaKind::kSaturated;
    default:
      return std::nullopt;  // baseline, invalid, gauges
  }
}

analysis::LinkState StateOf(v1::LinkState s) {
  switch (s) {
    case v1::LINK_STATE_UP:
      return analysis::LinkState::kUp;
    case v1::LINK_STATE_DOWN:
      return analysis::LinkState::kDown;
    default:
      return analysis::LinkState::kUnknown;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<AnalysisHost>> AnalysisHost::Start(AnalysisHostOptions options) {
  std::unique_ptr<AnalysisHost> host(new AnalysisHost(std::move(options)));
  if (!host->options_.log) host->options_.log = [](const std::string&) {};
  if (!host->options_.state_dir.empty()) {
    analysis::SqliteStoreOptions so;
    so.set_aside_damaged = true;  // a damaged incidents.db must not keep the aggregator down
    auto store = analysis::SqliteIncidentStore::Open(host->options_.state_dir, so);
    if (!store.ok()) return store.status();
    if (!(*store)->recovery().empty()) host->options_.log((*store)->recovery());
    host->store_ = std::move(*store);
    absl::StatusOr<size_t> adopted = AdoptIncidents(*host->store_, host->options_.adopt);
    if (!adopted.ok()) return adopted.status();
    if (!host->options_.adopt.empty()) {
      host->options_.log(absl::StrCat("took over ", *adopted, " open incidents from the peers (",
                                      host->options_.adopt.size() - *adopted,
                                      " were open here already)"));
    }
  } else if (!host->options_.adopt.empty()) {
    host->options_.log("the peers' open incidents are not taken over without --state-dir");
  }
  if (!host->options_.topology_file.empty()) {
    std::ifstream in(host->options_.topology_file);
    if (!in) {
      return absl::NotFoundError(absl::StrCat("cannot read --topology ", host->options_.topology_file));
    }
    std::stringstream text;
    text << in.rdbuf();
    auto topo = analysis::Topology::Parse(text.str());
    if (!topo.ok()) {
      return absl::Status(topo.status().code(), absl::StrCat("--topology ", host->options_.topology_file,
                                                             ": ", topo.status().message()));
    }
    host->file_topology_ = std::make_shared<const analysis::Topology>(std::move(*topo));
  }
  if (host->options_.skip_quiet_steps) {
    // A tenth of the shortest time after which a detector takes a port for gone, at most 10 s.
    const analysis::FabricAnalysisOptions& a = host->options_.analysis;
    const absl::Duration stale = std::min(
        {a.link.stale_after, a.pause_storm.stale_after, a.congestion.stale_after});
    host->quiet_heartbeat_ns_ = std::max<int64_t>(
        0, absl::ToInt64Nanoseconds(std::min(stale / 10, absl::Seconds(10))));
  }
  {
    absl::MutexLock lock(&host->mu_);
    host->merged_ = host->file_topology_;  // until the fabric tells more
    host->analysis_ = std::make_unique<analysis::FabricAnalysis>(
        host->options_.analysis, host->store_.get(), host->merged_.get());
    if (absl::Status s = host->analysis_->Start(host->options_.now()); !s.ok()) return s;
  }
  AnalysisHost* raw = host.get();
  host->flusher_ = std::thread([raw] { raw->RunFlushThread(); });
  return host;
}

AnalysisHost::~AnalysisHost() {
  {
    absl::MutexLock lock(&queue_mu_);
    stop_ = true;
  }
  queue_cv_.Notify();
  if (flusher_.joinable()) flusher_.join();
}

void AnalysisHost::RunFlushThread() {
  // The tick is on the monotonic clock (a step back of the wall clock must not hold flushes for
  // the step's length; options_.now, the detectors' time, may be a test's); changes are
  // delivered as soon as they are queued.
  absl::Time next_tick = SteadyNow() + options_.flush_interval;
  while (true) {
    {
      absl::MutexLock lock(&queue_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
        return stop_ || !queue_.empty();
      };
      // Not Mutex::AwaitWithTimeout: this Abseil times it on the wall clock, and a step back
      // while nothing is queued would hold the tick for the step's length.
      queue_cv_.AwaitWithTimeout(queue_mu_, ready, next_tick - SteadyNow());
      if (stop_) return;
    }
    if (SteadyNow() >= next_tick) {
      Flush(options_.now());
      next_tick = SteadyNow() + options_.flush_interval;
    } else {
      Deliver();
    }
  }
}

const analysis::SeriesBinding& AnalysisHost::BindingOf(const analysis::ObservedSample& s) {
  // Handles are dense and reused, so a vector indexed by handle stays about as long as the
  // number of identities alive; a sample without an identity (or a handle far beyond) is bound
  // on the spot.
  constexpr uint32_t kMaxCachedHandles = uint32_t{1} << 22;
  if (s.identity_generation == 0 || s.identity >= kMaxCachedHandles) {
    scratch_binding_ = analysis_->Bind(s.source, s.device, s.port, s.counter, s.priority);
    return scratch_binding_;
  }
  if (s.identity >= bindings_.size()) bindings_.resize(s.identity + 1);
  CachedBinding& c = bindings_[s.identity];
  if (c.generation != s.identity_generation) {
    c.binding = analysis_->Bind(s.source, s.device, s.port, s.counter, s.priority);
    c.generation = s.identity_generation;
  }
  return c.binding;
}

analysis::RecordHint* AnalysisHost::HintOf(NodeHints& hints, const analysis::ObservedSample& s) {
  constexpr uint32_t kMaxSlots = uint32_t{1} << 20;  // beyond any --max-series-per-node in use
  if (s.layout == 0 || s.layout != hints.layout || s.slot >= kMaxSlots) return nullptr;
  if (s.slot >= hints.slots.size()) hints.slots.resize(s.slot + 1);
  return &hints.slots[s.slot];
}

bool AnalysisHost::CrossesHeartbeat(const analysis::ObservedSample& s) const {
  const int64_t beat = quiet_heartbeat_ns_;
  if (beat <= 0 || s.prev_time_ns <= 0 || s.time_ns <= s.prev_time_ns) return true;
  // Each series at its own phase in the beat, so that a node's quiet series do not all go
  // through in the same second.
  const int64_t phase = static_cast<int64_t>((uint64_t{s.slot} * 0x9E3779B97F4A7C15u) %
                                             static_cast<uint64_t>(beat));
  return (s.time_ns + phase) / beat != (s.prev_time_ns + phase) / beat;
}

uint32_t AnalysisHost::NodeNumber(absl::string_view node) {
  auto [it, fresh] = node_numbers_.try_emplace(node, 0);
  if (fresh) it->second = static_cast<uint32_t>(node_numbers_.size());
  return it->second;
}

void AnalysisHost::OnSamples(absl::string_view node,
                             absl::Span<const analysis::ObservedSample> samples) {
  discovered_.OnSamples(node, samples);  // a discoverer's liveness; drops the stale ones
  absl::MutexLock lock(&mu_);
  if (discovered_.updates() != discovered_seen_) {
    TakeDiscovered("expiry of a silent discoverer");
  }
  const uint32_t node_number = NodeNumber(node);
  if (node_number >= hints_.size()) hints_.resize(node_number + 1);
  NodeHints& hints = hints_[node_number];
  // A batch's samples come from one table, in one layout. Another layout than the hints were made
  // from: a slot may name another series now, so every hint goes.
  if (!samples.empty() && samples.front().layout != hints.layout) {
    hints.layout = samples.front().layout;
    hints.slots.clear();
  }
  // Size the node's hints once, exactly, from the batch (its series come in slot order, so the
  // last one has the largest slot): grown one slot at a time the table ended up to twice its
  // size. A new node's table is populated in one call (analysis/populate.h).
  if (!samples.empty() && hints.layout != 0 && samples.back().slot >= hints.slots.size() &&
      samples.back().slot < (uint32_t{1} << 20)) {
    const bool fresh = hints.slots.capacity() == 0;
    hints.slots.reserve(samples.back().slot + 1);
    if (fresh) {
      analysis::PopulateForWrite(hints.slots.data(),
                                 hints.slots.capacity() * sizeof(analysis::RecordHint));
    }
    hints.slots.resize(samples.back().slot + 1);
  }
  // The detectors' records are visited once per sampling interval each, far more of them than fit
  // in the cache: fetch each a few samples before its step. A stale hint may point at freed
  // memory: a prefetch never faults, and the detector checks a hint before it trusts it.
  constexpr size_t kAhead = 8;
  constexpr size_t kHintsAhead = 32;  // the hints themselves, for the record prefetch to read
  for (size_t i = 0; i < samples.size(); ++i) {
    if (i + kHintsAhead < samples.size() && samples[i + kHintsAhead].slot < hints.slots.size()) {
      __builtin_prefetch(&hints.slots[samples[i + kHintsAhead].slot]);
    }
    if (i + kAhead < samples.size()) {
      const analysis::ObservedSample& ahead = samples[i + kAhead];
      if (ahead.slot < hints.slots.size() && hints.slots[ahead.slot].record != nullptr) {
        const char* record = static_cast<const char*>(hints.slots[ahead.slot].record);
        // What a step reads sits in a record's first lines (the detectors keep it there).
        __builtin_prefetch(record);
        __builtin_prefetch(record + 64);
        __builtin_prefetch(record + 128);
        __builtin_prefetch(record + 192);
      }
    }
    const analysis::ObservedSample& s = samples[i];
    const analysis::SeriesBinding& b = BindingOf(s);
    if (b.route == analysis::SeriesRoute::kNone) continue;
    analysis::RecordHint* hint = HintOf(hints, s);
    if (hint != nullptr && s.kind == analysis::SeriesKind::kCounter && hint->quiet &&
        s.step.kind == analysis::StepKind::kNormal && s.step.delta == 0 &&
        !CrossesHeartbeat(s)) {
      continue;  // the detector said it would change nothing
    }
    const absl::Time t = absl::FromUnixNanos(s.time_ns);
    if (s.kind == analysis::SeriesKind::kCounter) {
      std::optional<analysis::DeltaKind> kind = DeltaOf(s.step.kind);
      if (!kind || s.prev_time_ns <= 0) continue;
      analysis::CounterStep step{node, s.source, s.device, s.port, s.counter, s.priority, t,
                                 absl::Nanoseconds(s.time_ns - s.prev_time_ns), s.step.delta,
                                 *kind};
      step.prepared = b.prepared;
      step.port_token = analysis::PortToken(node_number, b);
      step.hint = hint;
      analysis_->OnCounter(step, b.route);
    } else {
      analysis::StateSample st{node, s.source, s.device, s.port, s.counter, t,
                               static_cast<double>(s.raw)};
      if (b.route == analysis::SeriesRoute::kLink) {
        st.prepared = b.prepared;
        st.port_token = analysis::PortToken(node_number, b);
        st.hint = hint;
      }
      analysis_->OnState(st);
    }
  }
  if (analysis_->pending_findings() > 0) ApplyPending();
}

void AnalysisHost::OnCollectives(absl::string_view node, uint64_t, uint64_t, absl::Time,
                                 const v1::CollectiveBatch& batch) {
  absl::MutexLock lock(&mu_);
  const int64_t clock_error_ns = analysis::ClockErrorOf(batch);
  for (const v1::CollectiveRecord& r : batch.records()) {
    if (r.kernel_stop_unix_nanos() <= 0) continue;
    const analysis::CollectiveObservation o =
        analysis::ObservationFromRecord(r, node, clock_error_ns);
    analysis_->OnCollective(o);
  }
  if (analysis_->pending_findings() > 0) ApplyPending();
}

void AnalysisHost::OnLinkEvents(absl::string_view node, uint64_t, uint64_t, absl::Time,
                                const v1::LinkEvents& events) {
  absl::MutexLock lock(&mu_);
  for (const v1::LinkEvent& e : events.events()) {
    analysis::LinkEvent ev{node, e.source(), e.device(), e.port(),
                           absl::FromUnixNanos(e.time_unix_nanos()), StateOf(e.from()),
                           StateOf(e.to()), e.detail()};
    analysis_->OnEvent(ev);
  }
  if (analysis_->pending_findings() > 0) ApplyPending();
}

void AnalysisHost::OnInfo(absl::string_view node, const v1::SeriesDefs& defs) {
  absl::MutexLock lock(&mu_);
  for (const v1::InfoRecord& r : defs.info()) {
    if (r.source() == "gpu") {
      if (auto bus = r.labels().find("pci_bus_id"); bus != r.labels().end()) {
        analysis_->MapGpu(node, r.device(), bus->second);
      }
      continue;
    }
    if (r.source() != "netdev") continue;
    auto dev = r.labels().find("rdma_device");
    auto port = r.labels().find("rdma_port");
    if (dev == r.labels().end() || port == r.labels().end()) continue;
    analysis_->MapNetdev(node, r.device(), dev->second, port->second);
  }
  discovered_.OnInfo(node, defs);
  if (discovered_.updates() != discovered_seen_) {
    TakeDiscovered(node);
    return;
  }
  if (discovered_topology_ != nullptr || !defs.has_info()) return;
  ApplyLldp(node, defs, /*moved_away=*/false);
}

void AnalysisHost::OnCountersElsewhere(absl::string_view node) {
  absl::MutexLock lock(&mu_);
  // The node's LLDP neighbours describe its ports, which this shard no longer watches; kept, they
  // would name the leaf it had before it moved (the move is usually a recabling to another leaf).
  if (discovered_topology_ != nullptr || !lldp_nodes_.contains(node)) return;
  options_.log(absl::StrCat("topology: ", node,
                            "'s counters moved to another shard; its LLDP ports leave this "
                            "shard's topology"));
  v1::SeriesDefs none;
  none.set_has_info(true);
  ApplyLldp(node, none, /*moved_away=*/true);
}

void AnalysisHost::ApplyLldp(absl::string_view node, const v1::SeriesDefs& defs,
                             bool moved_away) {
  std::string line = lldp_feed_.OnInfo(node, defs, nullptr);
  if (!line.empty() && file_topology_ == nullptr) options_.log(line);
  // The port-by-port view changes only with a node that reports LLDP neighbours or did before.
  const bool lldp_now = std::any_of(defs.info().begin(), defs.info().end(),
                                    [](const v1::InfoRecord& r) { return r.source() == "lldp"; });
  const bool lldp_before = lldp_nodes_.contains(node);
  if (lldp_now) lldp_nodes_.insert(std::string(node));
  if (!lldp_now) lldp_nodes_.erase(std::string(node));
  if (!lldp_now && !lldp_before) return;
  auto peers = std::make_shared<const std::vector<LldpPortPeer>>(lldp_feed_.lldp().Peers());
  analysis::Topology ports = LldpPortTopology(*peers);
  const bool had = lldp_ports_ != nullptr;
  const bool has = !ports.attachments().empty();
  if (lldp_peers_ == nullptr || *lldp_peers_ != *peers) lldp_peers_ = std::move(peers);
  if (had == has && (!has || lldp_ports_->attachments() == ports.attachments())) return;
  lldp_ports_ = has ? std::make_shared<const analysis::Topology>(std::move(ports)) : nullptr;
  Remerge(node, moved_away);
}

void AnalysisHost::TakeDiscovered(absl::string_view reporter) {
  discovered_seen_ = discovered_.updates();
  discovered_topology_ = discovered_.current();
  if (discovered_topology_ == nullptr) {
    options_.log("topology: no InfiniBand subnet discovery left (every discoverer is stale)");
  } else {
    options_.log(absl::StrCat("topology: from the InfiniBand subnet discovery of ",
                              discovered_.reporter(), " (update ", discovered_seen_, ")",
                              file_topology_ != nullptr ? ", merged with the --topology file" : ""));
  }
  Remerge(reporter);
}

void AnalysisHost::Remerge(absl::string_view reporter, bool reporter_moved_away) {
  const bool ib = discovered_topology_ != nullptr;
  std::shared_ptr<const analysis::Topology> discovery = ib ? discovered_topology_ : lldp_ports_;
  const std::string source = ib ? "ib-discovery" : discovery != nullptr ? "lldp" : "";
  // Changes of what the same source tells are events; a switch of source is not.
  if (!source.empty() && source == last_discovery_source_ && last_discovery_ != nullptr) {
    const absl::Time now = options_.now();
    for (analysis::TopologyEvent& e : analysis::DiffTopologies(*last_discovery_, *discovery)) {
      // LLDP comes node by node: a node's first report is its agent starting, not a new cable.
      if (source == "lldp" && e.kind == analysis::TopologyEventKind::kNew &&
          last_discovery_->HcasOf(e.host).empty()) {
        continue;
      }
      // Nor is a node whose agent moved to another shard a cable gone: its ports are watched there.
      if (reporter_moved_away && e.host == reporter) continue;
      e.time = now;
      e.source = source;
      e.reporter = std::string(reporter);
      options_.log(absl::StrCat("topology change (", source, ", from ", reporter,
                                "): ", analysis::DescribeTopologyEvent(e)));
      topology_events_.Add(e);
    }
  } else if (!last_discovery_source_.empty() && source != last_discovery_source_) {
    options_.log(absl::StrCat("topology: the discovery now comes from ",
                              source.empty() ? "nowhere" : source, " (was ",
                              last_discovery_source_, ")"));
  }
  last_discovery_ = discovery;
  last_discovery_source_ = source;

  analysis::MergedTopology m = analysis::MergeTopologies(
      file_topology_.get(), discovery.get(), {.discovery_complete = ib});
  if (file_topology_ != nullptr && m.disagreements != disagreements_) {
    // Each disagreement once, when it appears and when it goes; at most 20 lines a change.
    std::vector<std::string> lines;
    for (const analysis::TopologyDisagreement& d : m.disagreements) {
      if (!std::binary_search(disagreements_.begin(), disagreements_.end(), d)) {
        lines.push_back(absl::StrCat("topology: the --topology file disagrees with ", source,
                                     ": ", analysis::DescribeDisagreement(d)));
      }
    }
    for (const analysis::TopologyDisagreement& d : disagreements_) {
      if (!std::binary_search(m.disagreements.begin(), m.disagreements.end(), d)) {
        lines.push_back(absl::StrCat("topology: no longer disagrees: ",
                                     analysis::DescribeDisagreement(d)));
      }
    }
    constexpr size_t kMaxLines = 20;
    for (size_t i = 0; i < lines.size() && i < kMaxLines; ++i) options_.log(lines[i]);
    if (lines.size() > kMaxLines) {
      options_.log(absl::StrCat("topology: ... and ", lines.size() - kMaxLines, " more changes"));
    }
    options_.log(absl::StrCat("topology: ", m.disagreements.size(),
                              " disagreements of the --topology file with ", source));
  }
  disagreements_ = std::move(m.disagreements);
  std::shared_ptr<const analysis::Topology> next;
  if (file_topology_ != nullptr || discovery != nullptr) {
    next = std::make_shared<const analysis::Topology>(std::move(m.topology));
  }
  analysis_->SetTopology(next.get());
  merged_ = std::move(next);  // the previous one is freed only now, after the hand-over
}

std::string AnalysisHost::topology_source() const {
  absl::MutexLock lock(&mu_);
  if (file_topology_ != nullptr) return "file";
  if (discovered_topology_ != nullptr) return "ib-discovery";
  if (lldp_ports_ != nullptr) return "lldp";
  return "none";
}

TopologyState AnalysisHost::topology_state() const {
  TopologyState s;
  s.source = topology_source();
  absl::MutexLock lock(&mu_);
  s.topology = merged_;
  s.discovery = last_discovery_source_;
  s.disagreements = disagreements_;
  s.lldp_peers = lldp_peers_;
  s.events = topology_events_.total();
  return s;
}

std::vector<analysis::TopologyEvent> AnalysisHost::topology_events(size_t limit) const {
  absl::MutexLock lock(&mu_);
  return topology_events_.Recent(limit);
}

std::optional<analysis::LeafPort> PeerOfLink(const TopologyState& state, absl::string_view node,
                                             absl::string_view source, absl::string_view device,
                                             absl::string_view port) {
  if (source == "nvlink") return std::nullopt;
  if (source == "netdev" && state.lldp_peers != nullptr) {
    for (const LldpPortPeer& p : *state.lldp_peers) {
      if (p.node != node || p.netdev != device) continue;
      analysis::LeafPort l;
      l.id = p.switch_id.empty() ? p.switch_name : p.switch_id;
      l.name = p.switch_name;
      l.port_name = p.switch_port;
      return l;
    }
  }
  if (state.topology == nullptr) return std::nullopt;
  const std::vector<const analysis::HcaAttachment*> hcas = state.topology->HcasOf(node);
  if (source != "netdev") {
    int p = 0;
    const bool numbered = !port.empty() && absl::SimpleAtoi(port, &p);
    for (const analysis::HcaAttachment* h : hcas) {
      if (h->device != device) continue;
      if (numbered && h->ca_port != 0 && h->ca_port != p) continue;
      return h->leaf;
    }
  }
  // A host known only as a whole: its leaf, when it has one.
  std::optional<analysis::LeafPort> leaf;
  for (const analysis::HcaAttachment* h : hcas) {
    if (!h->any_device || !h->device.empty()) continue;  // LLDP's entries name their port
    if (leaf && !analysis::SameSwitch(*leaf, h->leaf)) return std::nullopt;  // several leaves
    if (!leaf) {
      leaf = h->leaf;
      leaf->port = 0;
      leaf->port_name.clear();
    }
  }
  return leaf;
}

void AnalysisHost::ReplaceRemote(const std::string& shard,
                                 const std::vector<analysis::Incident>& incidents) {
  absl::MutexLock lock(&mu_);
  analysis_->ReplaceRemote(shard, incidents);
}

void AnalysisHost::ApplyRemote(const std::string& shard, const analysis::Incident& incident) {
  absl::MutexLock lock(&mu_);
  analysis_->ApplyRemote(shard, incident);
}

void AnalysisHost::ApplyPending() {
  std::vector<analysis::IncidentChange> changes;
  const absl::Status s = analysis_->ApplyFindings(options_.now(), &changes);
  {
    absl::MutexLock lock(&stats_mu_);
    ++flush_stats_.applies;
    if (!s.ok()) ++flush_stats_.errors;
  }
  ReportStore(s, analysis_->incidents().unsaved());
  if (!changes.empty()) Queue(std::move(changes));
}

void AnalysisHost::ReportStore(const absl::Status& s, size_t unsaved) {
  const absl::Time now = absl::Now();
  std::string line;
  {
    absl::MutexLock lock(&stats_mu_);
    if (!s.ok()) {
      // The first failure, then at most one line a minute while they go on (each flush retries).
      if (!store_failing_ || now - store_logged_ >= absl::Minutes(1)) {
        line = absl::StrCat("incident store: cannot write ", unsaved,
                            " incidents; they are kept and served from memory and written by the "
                            "first flush that succeeds (ringside_analysis_unsaved_incidents): ",
                            s.ToString());
        store_logged_ = now;
      }
      store_failing_ = true;
    } else if (store_failing_ && unsaved == 0) {
      line = "incident store: writable again; every incident is written";
      store_failing_ = false;
    }
  }
  if (!line.empty()) options_.log(line);
}

void AnalysisHost::Queue(std::vector<analysis::IncidentChange> changes) {
  {
    absl::MutexLock lock(&queue_mu_);
    queue_.push_back(std::move(changes));
  }
  queue_cv_.Notify();  // wakes the flush thread
}

void AnalysisHost::Flush(absl::Time now) {
  absl::Status s;
  size_t unsaved = 0;
  const absl::Time flush_start = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    std::vector<analysis::IncidentChange> changes;
    s = analysis_->Flush(now, &changes);
    unsaved = analysis_->incidents().unsaved();
    if (!changes.empty()) Queue(std::move(changes));
  }
  {
    const double seconds = absl::ToDoubleSeconds(absl::Now() - flush_start);
    absl::MutexLock lock(&stats_mu_);
    ++flush_stats_.flushes;
    if (!s.ok()) ++flush_stats_.errors;
    flush_stats_.last_seconds = seconds;
    flush_stats_.total_seconds += seconds;
  }
  ReportStore(s, unsaved);
  Deliver();
}

void AnalysisHost::Deliver() {
  absl::MutexLock deliver(&deliver_mu_);
  while (true) {
    std::vector<analysis::IncidentChange> changes;
    {
      absl::MutexLock lock(&queue_mu_);
      if (queue_.empty()) return;
      changes = std::move(queue_.front());
      queue_.pop_front();
    }
    for (const analysis::IncidentChange& c : changes) {
      std::string entity;
      for (const auto& [k, v] : c.incident.entity) absl::StrAppend(&entity, " ", k, "=", v);
      options_.log(absl::StrCat("incident ", c.incident.id, " ",
                                analysis::IncidentChangeTypeName(c.type), ": ",
                                analysis::IncidentKindName(c.incident.kind), entity, " — ",
                                c.incident.summary));
    }
    absl::MutexLock lock(&listeners_mu_);
    for (const ChangeListener& l : listeners_) l(changes);
  }
}

void AnalysisHost::AddListener(ChangeListener listener) {
  absl::MutexLock lock(&listeners_mu_);
  listeners_.push_back(std::move(listener));
}

void AnalysisHost::WithAnalysis(
    const std::function<void(const analysis::FabricAnalysis&)>& fn) const {
  absl::MutexLock lock(&mu_);
  fn(*analysis_);
}

std::vector<analysis::Incident> AnalysisHost::OpenIncidents() const {
  absl::MutexLock lock(&mu_);
  std::vector<analysis::Incident> out;
  for (const analysis::Incident* i : analysis_->incidents().Open()) out.push_back(*i);
  return out;
}

AnalysisHost::FlushStats AnalysisHost::flush_stats() const {
  absl::MutexLock lock(&stats_mu_);
  return flush_stats_;
}

}  // namespace ringside::daemon
