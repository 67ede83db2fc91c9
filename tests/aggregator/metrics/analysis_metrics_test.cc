// The aggregator's analysis metrics (daemon/aggregator/metrics/analysis_metrics.h): names and docs, the
// PFC paused ratio and congestion rates from counter steps, collective duration histograms, link
// health and straggler scores from a real AnalysisHost, the cardinality bounds, and the rendered
// page passing promtool.
#include "daemon/aggregator/metrics/analysis_metrics.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "prometheus/check_names.h"
#include "prometheus/text_serializer.h"
#include "tests/testing/process.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

using analysis::ObservedSample;
using analysis::SeriesKind;
using analysis::StepKind;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

std::string AggregatorSectionOfDocs() {
  std::string doc = testing::ReadFileOrEmpty(std::string(RINGSIDE_SOURCE_DIR) + "/docs/metrics.md");
  size_t start = doc.find("## Aggregator");
  if (start == std::string::npos) return "";
  size_t end = doc.find("\n## ", start + 1);
  return doc.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string TypeName(prometheus::MetricType t) {
  switch (t) {
    case prometheus::MetricType::Counter:
      return "counter";
    case prometheus::MetricType::Histogram:
      return "histogram";
    default:
      return "gauge";
  }
}

// A counter step of `delta` over `seconds` ending at kT0 + at.
ObservedSample Step(absl::string_view source, absl::string_view device, absl::string_view port,
                    absl::string_view counter, int32_t priority, uint64_t delta, double seconds,
                    absl::Duration at = absl::ZeroDuration()) {
  ObservedSample s;
  s.source = source;
  s.device = device;
  s.port = port;
  s.counter = counter;
  s.priority = priority;
  s.kind = SeriesKind::kCounter;
  s.time_ns = absl::ToUnixNanos(kT0 + at);
  s.prev_time_ns = s.time_ns - static_cast<int64_t>(seconds * 1e9);
  s.step.accepted = true;
  s.step.kind = StepKind::kNormal;
  s.step.delta = delta;
  return s;
}

v1::CollectiveBatch Collective(const std::string& job, const std::string& function, int n,
                               int64_t duration_ns) {
  v1::CollectiveBatch b;
  for (int i = 0; i < n; ++i) {
    v1::CollectiveRecord* r = b.add_records();
    r->set_job_id(job);
    r->set_function(function);
    r->set_kernel_start_unix_nanos(1'000'000);
    r->set_kernel_stop_unix_nanos(1'000'000 + duration_ns);
  }
  return b;
}

testing::PromText Render(const AnalysisMetrics& m, std::string* text = nullptr) {
  std::string body = prometheus::TextSerializer().Serialize(m.Collect());
  if (text != nullptr) *text = body;
  return testing::ParsePromText(body);
}

double Value(const testing::PromText& p, const std::string& name,
             const std::map<std::string, std::string>& labels) {
  std::vector<testing::PromSample> v = p.Find(name, labels);
  EXPECT_EQ(v.size(), 1u) << name;
  return v.empty() ? -1 : v[0].value;
}

TEST(AnalysisMetricsTest, NamesAreValidConventionalAndDocumented) {
  const std::string docs = AggregatorSectionOfDocs();
  ASSERT_FALSE(docs.empty());
  std::set<std::string> seen;
  for (const AnalysisMetricSpec& m : AnalysisMetricCatalog()) {
    const std::string name(m.name);
    EXPECT_TRUE(prometheus::CheckMetricName(name)) << name;
    EXPECT_TRUE(absl::StartsWith(name, "ringside_")) << name;
    // The ringside_aggregator_ prefix belongs to AggregatorMetricCatalog (its own docs test),
    // but for the topology the detectors use (issue #16), which the analysis knows.
    EXPECT_FALSE(absl::StartsWith(name, "ringside_aggregator_") &&
                 !absl::StartsWith(name, "ringside_aggregator_topology_"))
        << name;
    EXPECT_EQ(absl::EndsWith(name, "_total"), m.type == prometheus::MetricType::Counter) << name;
    EXPECT_FALSE(m.help.empty()) << name;
    EXPECT_TRUE(seen.insert(name).second) << name << " twice";
    std::regex row("\\|\\s*`" + name + "`\\s*\\|\\s*" + TypeName(m.type) + "\\s*\\|");
    EXPECT_TRUE(std::regex_search(docs, row))
        << name << " (" << TypeName(m.type) << ") is not in docs/metrics.md ## Aggregator";
  }
}

TEST(AnalysisMetricsTest, PausedRatioAndCongestionRatesFromSteps) {
  absl::Time now = kT0;
  AnalysisMetricsOptions o;
  o.now = [&now] { return now; };
  AnalysisMetrics m(o, nullptr);
  std::vector<ObservedSample> batch = {
      // 600 ms paused in 1 s on prio 3 (rx): 0.6; tx prio 3: 2 s in 1 s is clamped to 1.
      Step("ethtool", "eth2", "", "rx_prio3_pause_duration", 3, 600'000, 1.0),
      Step("ethtool", "eth2", "", "tx_prio3_pause_duration", -1, 2'000'000, 1.0),
      // Frames and unrelated counters are not ratios.
      Step("ethtool", "eth2", "", "rx_prio3_pause", 3, 1000, 1.0),
      Step("ethtool", "eth2", "", "rx_global_pause_duration", -1, 1000, 1.0),
      Step("infiniband_hw", "mlx5_2", "1", "np_ecn_marked_roce_packets", -1, 5000, 0.5),
      Step("infiniband_hw", "mlx5_2", "1", "np_cnp_sent", -1, 100, 0.5),
      Step("infiniband_hw", "mlx5_2", "1", "rp_cnp_handled", -1, 30, 0.5),
      Step("infiniband", "mlx5_2", "1", "symbol_error", -1, 30, 0.5),
  };
  ObservedSample reset = Step("ethtool", "eth3", "", "rx_prio0_pause_duration", 0, 900'000, 1.0);
  reset.step.kind = StepKind::kReset;  // no rate from a reset
  batch.push_back(reset);
  m.OnSamples("n1", batch);

  std::string text;
  testing::PromText p = Render(m, &text);
  EXPECT_DOUBLE_EQ(
      Value(p, "ringside_pfc_paused_ratio",
            {{"node", "n1"}, {"netdev", "eth2"}, {"priority", "3"}, {"direction", "rx"}}),
      0.6);
  EXPECT_DOUBLE_EQ(
      Value(p, "ringside_pfc_paused_ratio",
            {{"node", "n1"}, {"netdev", "eth2"}, {"priority", "3"}, {"direction", "tx"}}),
      1.0);
  EXPECT_EQ(p.Find("ringside_pfc_paused_ratio").size(), 2u) << text;
  EXPECT_DOUBLE_EQ(Value(p, "ringside_roce_ecn_marked_packets_per_second",
                         {{"node", "n1"}, {"device", "mlx5_2"}, {"port", "1"}}),
                   10000);
  EXPECT_DOUBLE_EQ(Value(p, "ringside_roce_cnp_sent_packets_per_second", {{"device", "mlx5_2"}}),
                   200);
  EXPECT_DOUBLE_EQ(Value(p, "ringside_roce_cnp_handled_packets_per_second", {{"device", "mlx5_2"}}),
                   60);
  // Without detectors: no incident, link or straggler families.
  EXPECT_TRUE(p.Find("ringside_incidents_open").empty());
  EXPECT_TRUE(p.Find("ringside_link_health").empty());

  // The next step replaces the value; a port silent for longer than port_stale_after is gone.
  m.OnSamples(
      "n1", std::vector<ObservedSample>{Step("ethtool", "eth2", "", "rx_prio3_pause_duration", 3, 0,
                                             1.0, absl::Seconds(1))});
  p = Render(m);
  EXPECT_DOUBLE_EQ(Value(p, "ringside_pfc_paused_ratio", {{"direction", "rx"}}), 0);
  now += o.port_stale_after + absl::Seconds(1);
  p = Render(m);
  EXPECT_TRUE(p.Find("ringside_pfc_paused_ratio").empty());
  EXPECT_TRUE(p.Find("ringside_roce_ecn_marked_packets_per_second").empty());
}

TEST(AnalysisMetricsTest, PortFamiliesKeepTheWorstPastTheBound) {
  AnalysisMetricsOptions o;
  o.max_ports = 2;
  AnalysisMetrics m(o, nullptr);
  std::vector<ObservedSample> batch;
  std::vector<std::string> names;
  for (int p = 0; p < 5; ++p) names.push_back(absl::StrCat("rx_prio", p, "_pause_duration"));
  for (int p = 0; p < 5; ++p) {
    batch.push_back(Step("ethtool", "eth0", "", names[p], p, 100'000 * (p + 1), 1.0));
  }
  m.OnSamples("n1", batch);
  testing::PromText p = Render(m);
  std::vector<testing::PromSample> kept = p.Find("ringside_pfc_paused_ratio");
  ASSERT_EQ(kept.size(), 2u);
  std::set<std::string> prios;
  for (const auto& s : kept) prios.insert(s.labels.at("priority"));
  EXPECT_EQ(prios, (std::set<std::string>{"3", "4"}));
  EXPECT_EQ(Value(p, "ringside_metrics_series_dropped", {{"family", "ringside_pfc_paused_ratio"}}),
            3);
}

TEST(AnalysisMetricsTest, CollectiveDurationHistogramWithJobBound) {
  AnalysisMetricsOptions o;
  o.histograms.max_jobs = 2;
  o.histograms.max_functions = 2;
  AnalysisMetrics m(o, nullptr);
  m.OnCollectives("n1", 1, 1, kT0, Collective("jobA", "AllReduce", 3, 2'000'000));   // 2 ms
  m.OnCollectives("n1", 1, 2, kT0, Collective("jobA", "AllReduce", 1, 20'000'000));  // 20 ms
  m.OnCollectives("n1", 1, 3, kT0, Collective("jobB", "AllGather", 2, 50'000));      // 50 µs
  m.OnCollectives("n1", 1, 4, kT0, Collective("jobC", "AllGather", 4, 1'000'000));   // no room
  m.OnCollectives("n1", 1, 5, kT0, Collective("jobA", "Broadcast", 1, 1'000'000));
  m.OnCollectives("n1", 1, 6, kT0, Collective("jobA", "ReduceScatter", 1, 1'000'000));  // 3rd fn
  v1::CollectiveBatch bad = Collective("jobA", "AllReduce", 1, 0);
  bad.mutable_records(0)->set_kernel_stop_unix_nanos(0);  // no stop: not counted
  m.OnCollectives("n1", 1, 7, kT0, bad);

  std::string text;
  testing::PromText p = Render(m, &text);
  EXPECT_EQ(p.types["ringside_collective_duration_seconds"], "histogram");
  const std::map<std::string, std::string> a = {{"job", "jobA"}, {"function", "AllReduce"}};
  EXPECT_EQ(Value(p, "ringside_collective_duration_seconds_count", a), 4);
  EXPECT_NEAR(Value(p, "ringside_collective_duration_seconds_sum", a), 0.026, 1e-9);
  auto bucket = [&](const std::map<std::string, std::string>& l, const std::string& le) {
    std::map<std::string, std::string> m2 = l;
    m2["le"] = le;
    return Value(p, "ringside_collective_duration_seconds_bucket", m2);
  };
  EXPECT_EQ(bucket(a, "0.001"), 0);
  EXPECT_EQ(bucket(a, "0.0025"), 3);
  EXPECT_EQ(bucket(a, "0.01"), 3);
  EXPECT_EQ(bucket(a, "0.025"), 4);
  EXPECT_EQ(bucket(a, "+Inf"), 4);
  EXPECT_EQ(bucket({{"job", "jobB"}, {"function", "AllGather"}}, "0.0001"), 2);
  EXPECT_EQ(Value(p, "ringside_collective_duration_seconds_count",
                  {{"job", "_other"}, {"function", "AllGather"}}),
            4);
  EXPECT_EQ(Value(p, "ringside_collective_duration_seconds_count",
                  {{"job", "jobA"}, {"function", "_other"}}),
            1);
  EXPECT_EQ(Value(p, "ringside_metrics_other_job_records_total", {}), 4);
  EXPECT_TRUE(p.Find("ringside_collective_duration_seconds_count", {{"job", "jobC"}}).empty());

  testing::RunResult check = testing::Run({"promtool", "check", "metrics"}, text);
  if (check.exit_code == 127) GTEST_SKIP() << "promtool not installed";
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err << text;
}

class AnalysisMetricsHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AnalysisHostOptions ho;
    ho.flush_interval = absl::Hours(1);  // the test flushes
    ho.now = [this] { return now_; };
    auto host = AnalysisHost::Start(ho);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = std::move(*host);
  }
  void LinkEvent(const std::string& node, const std::string& device, v1::LinkState from,
                 v1::LinkState to) {
    v1::LinkEvents events;
    v1::LinkEvent* e = events.add_events();
    e->set_time_unix_nanos(absl::ToUnixNanos(now_));
    e->set_source("verbs");
    e->set_device(device);
    e->set_port("1");
    e->set_from(from);
    e->set_to(to);
    host_->OnLinkEvents(node, 1, 1, now_, events);
  }
  // `n` allreduces of 4 ranks of job "train" on nodes n0..n3; rank 2 arrives 4 ms late each time.
  void Collectives(int n) {
    v1::CollectiveBatch b;
    for (int i = 0; i < n; ++i) {
      const int64_t base = absl::ToUnixNanos(now_) + i * 50'000'000LL;
      for (uint32_t r = 0; r < 4; ++r) {
        v1::CollectiveRecord* c = b.add_records();
        c->set_job_id("train");
        c->set_comm_id(9);
        c->set_rank(r);
        c->set_nranks(4);
        c->set_global_rank(r);
        c->set_function("AllReduce");
        c->set_seq(seq_ + static_cast<uint64_t>(i));
        c->set_bytes(1 << 20);
        c->set_kernel_start_unix_nanos(base + (r == 2 ? 4'000'000 : 0));
        c->set_kernel_stop_unix_nanos(base + 5'000'000);
        c->set_host(absl::StrCat("n", r));
      }
    }
    seq_ += static_cast<uint64_t>(n);
    host_->OnCollectives("n0", 1, 2, now_, b);
  }

  absl::Time now_ = kT0;
  uint64_t seq_ = 1;
  std::unique_ptr<AnalysisHost> host_;
};

TEST_F(AnalysisMetricsHostTest, IncidentsLinkHealthAndStragglers) {
  AnalysisMetricsOptions o;
  o.now = [this] { return now_; };
  o.refresh_interval = absl::ZeroDuration();
  AnalysisMetrics m(o, host_.get());
  // Three links: n1 mlx5_0 goes down (link_down), n1 mlx5_1 and n2 mlx5_0 stay up.
  LinkEvent("n1", "mlx5_0", v1::LINK_STATE_UP, v1::LINK_STATE_DOWN);
  LinkEvent("n1", "mlx5_1", v1::LINK_STATE_DOWN, v1::LINK_STATE_UP);
  LinkEvent("n2", "mlx5_0", v1::LINK_STATE_DOWN, v1::LINK_STATE_UP);
  Collectives(30);
  now_ += absl::Seconds(2);
  host_->Flush(now_);

  std::string text;
  testing::PromText p = Render(m, &text);
  // Every kind x severity pair, zeros included; the open link_down counted.
  EXPECT_EQ(p.Find("ringside_incidents_open").size(), 33u);  // 11 kinds x 3 severities
  double link_down = 0;
  for (const auto& s : p.Find("ringside_incidents_open", {{"kind", "link_down"}}))
    link_down += s.value;
  EXPECT_EQ(link_down, 1) << text;
  EXPECT_EQ(
      Value(p, "ringside_incident_changes_total", {{"kind", "link_down"}, {"type", "opened"}}), 1);
  EXPECT_EQ(Value(p, "ringside_link_health", {{"node", "n1"}, {"device", "mlx5_0"}, {"port", "1"}}),
            3)
      << text;
  EXPECT_EQ(Value(p, "ringside_link_health", {{"node", "n1"}, {"device", "mlx5_1"}}), 0);
  EXPECT_EQ(Value(p, "ringside_link_health", {{"node", "n2"}, {"source", "infiniband"}}), 0);
  EXPECT_EQ(Value(p, "ringside_metrics_series_dropped", {{"family", "ringside_link_health"}}), 0);
  // The late rank scores near 1, the others near 0.
  EXPECT_GT(Value(p, "ringside_straggler_score", {{"job", "train"}, {"rank", "2"}, {"node", "n2"}}),
            0.9)
      << text;
  EXPECT_LT(Value(p, "ringside_straggler_score", {{"job", "train"}, {"rank", "0"}}), 0.1);
  EXPECT_GT(Value(p, "ringside_straggler_lag_ratio", {{"rank", "2"}}), 0.5);
  EXPECT_LT(Value(p, "ringside_straggler_wait_ratio", {{"rank", "2"}}),
            Value(p, "ringside_straggler_wait_ratio", {{"rank", "0"}}));
  EXPECT_EQ(Value(p, "ringside_analysis_links", {}), 3);
  EXPECT_EQ(Value(p, "ringside_analysis_ranks", {}), 4);
  EXPECT_GE(Value(p, "ringside_analysis_flushes_total", {}), 1);
  // The collectives went to the host directly, not through these metrics' observer.
  EXPECT_TRUE(p.Find("ringside_collective_duration_seconds_count").empty());
}

TEST_F(AnalysisMetricsHostTest, FlappingLinkIsCodeTwo) {
  AnalysisMetricsOptions o;
  o.now = [this] { return now_; };
  o.refresh_interval = absl::ZeroDuration();
  AnalysisMetrics m(o, host_.get());
  LinkEvent("n1", "mlx5_0", v1::LINK_STATE_DOWN, v1::LINK_STATE_UP);
  for (int cycle = 0; cycle < 2; ++cycle) {
    now_ += absl::Seconds(5);
    LinkEvent("n1", "mlx5_0", v1::LINK_STATE_UP, v1::LINK_STATE_DOWN);
    now_ += absl::Seconds(5);
    LinkEvent("n1", "mlx5_0", v1::LINK_STATE_DOWN, v1::LINK_STATE_UP);
    host_->Flush(now_);
  }
  std::string text;
  testing::PromText p = Render(m, &text);
  EXPECT_EQ(Value(p, "ringside_link_health", {{"node", "n1"}, {"device", "mlx5_0"}}), 2) << text;
  EXPECT_EQ(Value(p, "ringside_link_flaps_in_window", {{"node", "n1"}, {"device", "mlx5_0"}}), 2);
  double flapping = 0;
  for (const auto& s : p.Find("ringside_incidents_open", {{"kind", "link_flapping"}})) {
    flapping += s.value;
  }
  EXPECT_EQ(flapping, 1);
}

TEST_F(AnalysisMetricsHostTest, BoundsKeepTheWorstLinksAndRanks) {
  AnalysisMetricsOptions o;
  o.now = [this] { return now_; };
  o.refresh_interval = absl::ZeroDuration();
  o.max_links = 1;
  o.max_ranks = 1;
  AnalysisMetrics m(o, host_.get());
  LinkEvent("n1", "mlx5_1", v1::LINK_STATE_DOWN, v1::LINK_STATE_UP);
  LinkEvent("n1", "mlx5_0", v1::LINK_STATE_UP, v1::LINK_STATE_DOWN);
  LinkEvent("n2", "mlx5_0", v1::LINK_STATE_DOWN, v1::LINK_STATE_UP);
  Collectives(30);
  now_ += absl::Seconds(2);
  host_->Flush(now_);
  testing::PromText p = Render(m);
  std::vector<testing::PromSample> links = p.Find("ringside_link_health");
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].labels["device"], "mlx5_0");
  EXPECT_EQ(links[0].labels["node"], "n1");
  EXPECT_EQ(Value(p, "ringside_metrics_series_dropped", {{"family", "ringside_link_health"}}), 2);
  std::vector<testing::PromSample> ranks = p.Find("ringside_straggler_score");
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].labels["rank"], "2");
  EXPECT_EQ(Value(p, "ringside_metrics_series_dropped", {{"family", "ringside_straggler_score"}}),
            3);
}

v1::SeriesDefs LldpInfo(const std::string& leaf, const std::string& port) {
  v1::SeriesDefs d;
  d.set_has_info(true);
  v1::InfoRecord* nd = d.add_info();
  nd->set_source("netdev");
  nd->set_device("eth0");
  (*nd->mutable_labels())["rdma_device"] = "mlx5_0";
  (*nd->mutable_labels())["rdma_port"] = "1";
  v1::InfoRecord* l = d.add_info();
  l->set_source("lldp");
  l->set_device("eth0");
  (*l->mutable_labels())["chassis_name"] = leaf;
  (*l->mutable_labels())["port_id"] = port;
  return d;
}

// issue #16: the topology families, with LLDP as the only source: links per leaf, the ports whose
// switch end is unknown, the source, and the events of a recabling.
TEST_F(AnalysisMetricsHostTest, TopologyFamilies) {
  AnalysisMetricsOptions o;
  o.now = [this] { return now_; };
  o.refresh_interval = absl::ZeroDuration();
  AnalysisMetrics m(o, host_.get());
  testing::PromText p = Render(m);
  EXPECT_EQ(Value(p, "ringside_aggregator_topology_source", {{"source", "none"}, {"discovery", ""}}),
            1);
  host_->OnInfo("n1", LldpInfo("leaf-01", "Ethernet1"));
  host_->OnInfo("n2", LldpInfo("leaf-01", "Ethernet2"));
  host_->OnInfo("n3", LldpInfo("leaf-02", "Ethernet1"));
  // Links: n1 and n2's mlx5_0 (peers known), n2's mlx5_1 (no LLDP neighbour).
  LinkEvent("n1", "mlx5_0", v1::LINK_STATE_DOWN, v1::LINK_STATE_UP);
  LinkEvent("n2", "mlx5_0", v1::LINK_STATE_DOWN, v1::LINK_STATE_UP);
  LinkEvent("n2", "mlx5_1", v1::LINK_STATE_DOWN, v1::LINK_STATE_UP);
  p = Render(m);
  EXPECT_EQ(Value(p, "ringside_aggregator_topology_source",
                  {{"source", "lldp"}, {"discovery", "lldp"}}),
            1);
  EXPECT_EQ(Value(p, "ringside_aggregator_topology_links", {{"leaf", "leaf-01"}}), 2);
  EXPECT_EQ(Value(p, "ringside_aggregator_topology_links", {{"leaf", "leaf-02"}}), 1);
  EXPECT_EQ(Value(p, "ringside_aggregator_topology_ports_without_peer", {}), 1);
  EXPECT_EQ(Value(p, "ringside_aggregator_topology_disagreements", {}), 0);
  EXPECT_EQ(Value(p, "ringside_aggregator_topology_events_total", {}), 0);
  host_->OnInfo("n2", LldpInfo("leaf-02", "Ethernet5"));  // recabled
  p = Render(m);
  EXPECT_EQ(Value(p, "ringside_aggregator_topology_links", {{"leaf", "leaf-01"}}), 1);
  EXPECT_EQ(Value(p, "ringside_aggregator_topology_links", {{"leaf", "leaf-02"}}), 2);
  EXPECT_EQ(Value(p, "ringside_aggregator_topology_events_total", {}), 1);
}

}  // namespace
}  // namespace ringside::daemon
