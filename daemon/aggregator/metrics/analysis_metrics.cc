#include "daemon/aggregator/metrics/analysis_metrics.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "analysis/finding.h"
#include "analysis/incidents.h"
#include "daemon/aggregator/metrics/catalog_families.h"

namespace ringside::daemon {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

constexpr int kKinds = static_cast<int>(analysis::kLastIncidentKind) + 1;
constexpr int kSeverities = static_cast<int>(analysis::Severity::kCritical) + 1;
constexpr int kChangeTypes = 3;  // opened, updated, resolved

constexpr absl::string_view kLinkHealth = "ringside_link_health";
constexpr absl::string_view kLinkFlaps = "ringside_link_flaps_in_window";
constexpr absl::string_view kPaused = "ringside_pfc_paused_ratio";
constexpr absl::string_view kEcn = "ringside_roce_ecn_marked_packets_per_second";
constexpr absl::string_view kCnpSent = "ringside_roce_cnp_sent_packets_per_second";
constexpr absl::string_view kCnpHandled = "ringside_roce_cnp_handled_packets_per_second";
constexpr absl::string_view kScore = "ringside_straggler_score";
constexpr absl::string_view kLag = "ringside_straggler_lag_ratio";
constexpr absl::string_view kWait = "ringside_straggler_wait_ratio";
constexpr absl::string_view kDropped = "ringside_metrics_series_dropped";


// Keeps the `max` items ranking first under `worse` (stable for equal ones); returns how many
// were dropped.
template <typename T, typename Worse>
size_t KeepWorst(std::vector<T>& items, size_t max, Worse worse) {
  if (items.size() <= max) return 0;
  std::partial_sort(items.begin(), items.begin() + static_cast<ptrdiff_t>(max), items.end(), worse);
  const size_t dropped = items.size() - max;
  items.resize(max);
  return dropped;
}

std::string Str(absl::string_view s) { return std::string(s); }

// One collective-duration histogram as a metric (+Inf is added by the serializer from the count).
ClientMetric HistogramMetric(std::vector<ClientMetric::Label> labels, const DurationHistogram& h) {
  ClientMetric m;
  m.label = std::move(labels);
  m.histogram.sample_count = h.count;
  m.histogram.sample_sum = h.sum;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kCollectiveDurationBuckets.size(); ++i) {
    cumulative += h.counts[i];
    m.histogram.bucket.push_back({cumulative, kCollectiveDurationBuckets[i]});
  }
  return m;
}

}  // namespace

struct AnalysisMetrics::ChangeCounts {
  absl::Mutex mu;
  uint64_t counts[kKinds][kChangeTypes] ABSL_GUARDED_BY(mu) = {};
};

const std::vector<AnalysisMetricSpec>& AnalysisMetricCatalog() {
  static const auto* catalog = new std::vector<AnalysisMetricSpec>{
      {"ringside_incidents_open", MetricType::Gauge, "kind, severity",
       "Incidents open now, by kind (link_flapping, link_down, link_degraded, pause_storm, "
       "congestion, straggler, job_slowdown, gpu_throttled, gpu_xid, gpu_memory_error, "
       "gpu_pcie_degraded) and severity (info, warning, critical); every pair "
       "is exported, 0 included."},
      {"ringside_incident_changes_total", MetricType::Counter, "kind, type",
       "Incident changes since the aggregator started, by kind and type (opened, updated, "
       "resolved)."},
      {kLinkHealth, MetricType::Gauge, "node, source, device, port",
       "Health of each link the link detector knows: 0 up and healthy, 1 degraded (a "
       "link_degraded incident is open), 2 flapping (link_flapping open), 3 down. source: "
       "infiniband (device, port: RDMA port), netdev (device: interface), nvlink (device: GPU "
       "index, port: link index)."},
      {kLinkFlaps, MetricType::Gauge, "node, source, device, port",
       "Down-to-up cycles of the link completed within the link detector's flap window."},
      {kPaused, MetricType::Gauge, "node, netdev, priority, direction",
       "Fraction of the latest sampling interval the port spent paused on the PFC priority "
       "(ethtool <direction>_prio<N>_pause_duration µs per second / 1e6, clamped to 0..1): "
       "direction rx = paused by its peer (could not send), tx = pausing its peer."},
      {kEcn, MetricType::Gauge, "node, device, port",
       "RoCEv2 packets received with ECN CE marked per second over the latest interval "
       "(hw_counters np_ecn_marked_roce_packets)."},
      {kCnpSent, MetricType::Gauge, "node, device, port",
       "CNPs sent per second by the notification point over the latest interval (hw_counters "
       "np_cnp_sent)."},
      {kCnpHandled, MetricType::Gauge, "node, device, port",
       "CNPs handled per second by the reaction point (DCQCN throttling) over the latest "
       "interval (hw_counters rp_cnp_handled)."},
      {kScore, MetricType::Gauge, "job, rank, node",
       "Fraction of the straggler detector's recent collectives in which the rank arrived late "
       "(the highest over its communicators); near 1: it holds the others back."},
      {kLag, MetricType::Gauge, "job, rank, node",
       "Median lag of the rank behind the communicator's median arrival when it arrived late, "
       "as a fraction of the collective's duration (0 if never late)."},
      {kWait, MetricType::Gauge, "job, rank, node",
       "Share of the rank's collective time spent waiting for the others (low for the culprit, "
       "high for its victims)."},
      {"ringside_collective_duration_seconds", MetricType::Histogram, "job, function",
       "GPU kernel time of each collective record received (one rank's view: kernel stop - "
       "start), by job and function; buckets 100 µs to 100 s. At most --metrics-max-jobs jobs "
       "and 16 functions a job, then \"_other\"."},
      {"ringside_analysis_flushes_total", MetricType::Counter, "",
       "Analysis flushes run (detectors advanced, findings applied, incidents correlated)."},
      {"ringside_analysis_flush_errors_total", MetricType::Counter, "",
       "Flushes whose incident store writes failed (retried by the next flush)."},
      {"ringside_analysis_flush_duration_seconds_total", MetricType::Counter, "",
       "Wall time spent in flushes (divide its rate by the flushes' rate for the mean)."},
      {"ringside_analysis_last_flush_duration_seconds", MetricType::Gauge, "",
       "Wall time of the latest flush."},
      {"ringside_analysis_pending_findings", MetricType::Gauge, "",
       "Findings waiting for the next flush."},
      {"ringside_analysis_unsaved_incidents", MetricType::Gauge, "",
       "Incidents changed in memory but not written to incidents.db because its writes fail "
       "(a full disk, an I/O error); served from memory meanwhile and written by the first "
       "flush that succeeds. 0 when the store keeps up."},
      {"ringside_analysis_links", MetricType::Gauge, "", "Links the link detector tracks."},
      {"ringside_analysis_ranks", MetricType::Gauge, "",
       "Ranks (of every job and communicator) the straggler detector has judged."},
      {"ringside_metrics_snapshot_lock_seconds", MetricType::Gauge, "",
       "How long the latest /metrics snapshot held the analysis lock (ingest waits that long)."},
      {kDropped, MetricType::Gauge, "family",
       "Series left out of the latest scrape of the family by its --metrics-max-* bound (the "
       "worst are kept)."},
      {"ringside_aggregator_topology_source", MetricType::Gauge, "source, discovery",
       "1, labelled with what the detectors' topology comes from: source file, ib-discovery, "
       "lldp or none (what wins); discovery ib-discovery, lldp or \"\" (what the fabric tells, "
       "merged with the file and compared with it)."},
      {"ringside_aggregator_topology_links", MetricType::Gauge, "leaf",
       "Host ports cabled to each leaf switch (by its name) in the topology the detectors use."},
      {"ringside_aggregator_topology_ports_without_peer", MetricType::Gauge, "",
       "Links (InfiniBand ports and netdevs the link detector knows) whose switch end the "
       "topology does not know."},
      {"ringside_aggregator_topology_disagreements", MetricType::Gauge, "",
       "Differences between the --topology file and the discovery (a host port on another "
       "switch or switch port, a cable only one of them has); each is logged when it appears."},
      {"ringside_aggregator_topology_events_total", MetricType::Counter, "",
       "Topology events recorded (a discovered port moved, recabled, gone or new; `ringside "
       "topology --events`)."},
      {"ringside_metrics_other_job_records_total", MetricType::Counter, "",
       "Collective records counted under job=\"_other\" in ringside_collective_duration_seconds "
       "because --metrics-max-jobs jobs were active."},
  };
  return *catalog;
}

std::string LinkKeyOf(const analysis::LinkView& link) {
  return LinkKeyOf(link.source, link.node, link.device, link.port);
}

std::string LinkKeyOf(const std::map<std::string, std::string>& entity) {
  auto get = [&entity](const char* k) -> std::string {
    auto it = entity.find(k);
    return it == entity.end() ? std::string() : it->second;
  };
  const std::string node = get("node");
  if (node.empty()) return "";
  if (entity.count("gpu"))
    return absl::StrCat("n\x1f", node, "\x1f", get("gpu"), "\x1f", get("link"));
  if (entity.count("device")) {
    return absl::StrCat("r\x1f", node, "\x1f", get("device"), "\x1f", get("port"));
  }
  if (entity.count("netdev")) return absl::StrCat("e\x1f", node, "\x1f", get("netdev"));
  return "";
}

AnalysisMetrics::AnalysisMetrics(AnalysisMetricsOptions options, AnalysisHost* host)
    : options_(std::move(options)),
      host_(host),
      changes_(std::make_shared<ChangeCounts>()),
      ports_(options_.port_stale_after),
      histograms_(options_.histograms) {
  if (host_ == nullptr) return;
  host_->AddListener([counts = changes_](const std::vector<analysis::IncidentChange>& changes) {
    absl::MutexLock lock(&counts->mu);
    for (const analysis::IncidentChange& c : changes) {
      const int kind = static_cast<int>(c.incident.kind);
      const int type = static_cast<int>(c.type);
      if (kind >= 0 && kind < kKinds && type >= 0 && type < kChangeTypes) {
        ++counts->counts[kind][type];
      }
    }
  });
}

void AnalysisMetrics::OnSamples(absl::string_view node,
                                absl::Span<const analysis::ObservedSample> samples) {
  ports_.Observe(node, samples, options_.now());
}

void AnalysisMetrics::OnCollectives(absl::string_view, uint64_t, uint64_t, absl::Time received,
                                    const v1::CollectiveBatch& batch) {
  histograms_.Observe(batch, received);
}

std::shared_ptr<const AnalysisMetrics::Views> AnalysisMetrics::CurrentViews() const {
  const absl::Time now = options_.now();
  {
    absl::MutexLock lock(&views_mu_);
    if (views_ != nullptr && now - views_->taken < options_.refresh_interval) return views_;
  }
  auto v = std::make_shared<Views>();
  v->taken = now;
  v->topology = host_->topology_state();
  const absl::Time start = absl::Now();
  host_->WithAnalysis([&](const analysis::FabricAnalysis& a) {
    v->pending_findings = a.pending_findings();
    v->unsaved_incidents = a.incidents().unsaved();
    LinkFlags link_flags;
    for (const analysis::Incident* i : a.incidents().Open()) {
      v->incidents.push_back({static_cast<int>(i->kind), static_cast<int>(i->severity)});
      const int bit = i->kind == analysis::IncidentKind::kLinkDegraded   ? 1
                      : i->kind == analysis::IncidentKind::kLinkFlapping ? 2
                      : i->kind == analysis::IncidentKind::kLinkDown     ? 4
                                                                         : 0;
      if (bit == 0) continue;
      std::string key = LinkKeyOf(i->entity);
      if (!key.empty()) link_flags[std::move(key)] |= bit;
    }
    LinkSnapshot links = SnapshotLinks(a, now, options_.max_links, link_flags, v->topology);
    v->links = std::move(links.worst);
    v->links_total = links.total;
    v->ports_without_peer = links.ports_without_peer;
    v->ranks = a.Stragglers("");
  });
  v->lock_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::sort(v->links.begin(), v->links.end(), WorseLink);
  absl::MutexLock lock(&views_mu_);
  views_ = v;
  return v;
}

std::vector<MetricFamily> AnalysisMetrics::Collect() const {
  CatalogFamilies out(AnalysisMetricCatalog());
  auto dropped = [&out](absl::string_view family, size_t n) {
    out.Add(kDropped, {{"family", Str(family)}}, static_cast<double>(n));
  };

  // --- From the analysis (with detectors) ---
  if (host_ != nullptr) {
    const std::shared_ptr<const Views> v = CurrentViews();
    std::array<std::array<int, kSeverities>, kKinds> open{};
    for (const OpenIncident& i : v->incidents) {
      if (i.kind >= 0 && i.kind < kKinds && i.severity >= 0 && i.severity < kSeverities) {
        ++open[i.kind][i.severity];
      }
    }
    for (int k = 0; k < kKinds; ++k) {
      for (int s = 0; s < kSeverities; ++s) {
        out.Add("ringside_incidents_open",
                {{"kind", Str(analysis::IncidentKindName(static_cast<analysis::IncidentKind>(k)))},
                 {"severity", Str(analysis::SeverityName(static_cast<analysis::Severity>(s)))}},
                open[k][s]);
      }
    }
    {
      absl::MutexLock lock(&changes_->mu);
      static constexpr absl::string_view kTypes[kChangeTypes] = {"opened", "updated", "resolved"};
      for (int k = 0; k < kKinds; ++k) {
        for (int t = 0; t < kChangeTypes; ++t) {
          out.Add(
              "ringside_incident_changes_total",
              {{"kind", Str(analysis::IncidentKindName(static_cast<analysis::IncidentKind>(k)))},
               {"type", Str(kTypes[t])}},
              static_cast<double>(changes_->counts[k][t]));
        }
      }
    }

    // Links: health code, worst first (chosen and ordered by CurrentViews).
    for (const LinkHealthView& l : v->links) {
      std::vector<ClientMetric::Label> labels = {{"node", l.view.node},
                                                 {"source", l.view.source},
                                                 {"device", l.view.device},
                                                 {"port", l.view.port}};
      out.Add(kLinkHealth, labels, l.health);
      out.Add(kLinkFlaps, std::move(labels), l.view.flaps_in_window);
    }
    dropped(kLinkHealth, v->links_total - v->links.size());

    // Ranks: one series per (job, rank, node), from its worst communicator.
    std::map<std::tuple<std::string, int64_t, std::string>, const analysis::RankView*> ranks;
    for (const analysis::RankView& r : v->ranks) {
      auto [it, added] = ranks.try_emplace({r.job, r.rank, r.node}, &r);
      if (!added && r.score > it->second->score) it->second = &r;
    }
    std::vector<const analysis::RankView*> worst;
    worst.reserve(ranks.size());
    for (const auto& [key, r] : ranks) worst.push_back(r);
    const size_t ranks_dropped = KeepWorst(
        worst, options_.max_ranks, [](const analysis::RankView* a, const analysis::RankView* b) {
          return std::tie(a->score, a->margin) > std::tie(b->score, b->margin);
        });
    for (const analysis::RankView* r : worst) {
      std::vector<ClientMetric::Label> labels = {
          {"job", r->job}, {"rank", absl::StrCat(r->rank)}, {"node", r->node}};
      out.Add(kScore, labels, r->score);
      out.Add(kLag, labels, r->margin);
      out.Add(kWait, std::move(labels), r->wait_fraction);
    }
    dropped(kScore, ranks_dropped);

    const AnalysisHost::FlushStats fs = host_->flush_stats();
    out.Add("ringside_analysis_flushes_total", {}, static_cast<double>(fs.flushes));
    out.Add("ringside_analysis_flush_errors_total", {}, static_cast<double>(fs.errors));
    out.Add("ringside_analysis_flush_duration_seconds_total", {}, fs.total_seconds);
    out.Add("ringside_analysis_last_flush_duration_seconds", {}, fs.last_seconds);
    out.Add("ringside_analysis_pending_findings", {}, static_cast<double>(v->pending_findings));
    out.Add("ringside_analysis_unsaved_incidents", {}, static_cast<double>(v->unsaved_incidents));
    out.Add("ringside_analysis_links", {}, static_cast<double>(v->links_total));
    out.Add("ringside_analysis_ranks", {}, static_cast<double>(ranks.size()));
    out.Add("ringside_metrics_snapshot_lock_seconds", {}, v->lock_seconds);

    const TopologyState& t = v->topology;
    out.Add("ringside_aggregator_topology_source",
            {{"source", t.source}, {"discovery", t.discovery}}, 1);
    if (t.topology != nullptr) {
      std::map<std::string, size_t> per_leaf;
      for (const analysis::HcaAttachment& h : t.topology->attachments()) {
        if (h.leaf.id.empty()) continue;
        const std::string name = t.topology->LeafName(h.leaf.id);
        ++per_leaf[name.empty() ? h.leaf.id : name];
      }
      for (const auto& [leaf, n] : per_leaf) {
        out.Add("ringside_aggregator_topology_links", {{"leaf", leaf}}, static_cast<double>(n));
      }
    }
    out.Add("ringside_aggregator_topology_ports_without_peer", {},
            static_cast<double>(v->ports_without_peer));
    out.Add("ringside_aggregator_topology_disagreements", {},
            static_cast<double>(t.disagreements.size()));
    out.Add("ringside_aggregator_topology_events_total", {}, static_cast<double>(t.events));
  }

  // --- From ingest (with or without detectors) ---
  const PortRateTracker::Worst signals = ports_.WorstOf(options_.now(), options_.max_ports);
  constexpr absl::string_view kPortFamilies[4] = {kPaused, kEcn, kCnpSent, kCnpHandled};
  for (size_t i = 0; i < signals.kept.size(); ++i) {
    for (const PortSignalValue& v : signals.kept[i]) {
      const PortSignalValue* s = &v;
      if (i == 0) {
        out.Add(kPortFamilies[i],
                {{"node", s->node},
                 {"netdev", s->device},
                 {"priority", absl::StrCat(s->priority)},
                 {"direction", s->signal == PortSignal::kTxPausedRatio ? "tx" : "rx"}},
                s->value);
      } else {
        out.Add(kPortFamilies[i], {{"node", s->node}, {"device", s->device}, {"port", s->port}},
                s->value);
      }
    }
    dropped(kPortFamilies[i], signals.live[i] - signals.kept[i].size());
  }

  for (const CollectiveHistograms::Series& s : histograms_.Snapshot()) {
    out.AddMetric("ringside_collective_duration_seconds",
                  HistogramMetric({{"job", s.job}, {"function", s.function}}, s.histogram));
  }
  out.Add("ringside_metrics_other_job_records_total", {},
          static_cast<double>(histograms_.other_job_records()));
  return out.Take();
}

}  // namespace ringside::daemon
