// ringside-detector-bench (issue #6): what the detectors cost per sample, in one process and on
// one thread, without gRPC or the load generator competing for the two cores.
//
//   ringside-detector-bench [--agents=64] [--series=1500] [--seconds=60] [--rounds=5] [--only=on|off]
//
// The load is ringside-ingest-bench's (bench/port_series.h): each agent sends one SampleBatch of
// `series` series per simulated second, healthy values. Every batch goes through the aggregator's
// real IngestCore::Apply (series state, counter steps) to its observers, as in the aggregator:
//   off: AnalysisMetrics alone (what --detect=false runs: the PFC / ECN rates for /metrics);
//   on:  AnalysisHost (every detector) + AnalysisMetrics (what --detect=true runs), flushed once per
//        simulated second on the same thread, so Flush (Advance, incidents) is counted too.
// Both pipelines run side by side, fed each batch in turn (which goes first alternates), so the
// machine's noise falls on both alike. It reports the CPU time of this thread per sample for
// both, their difference (the detectors' own nanoseconds per sample) and on/off throughput. The ingest bench's ratio is the acceptance
// figure (gRPC, protobuf parsing and the network stack are in its denominator); this one isolates
// the detectors so that a change to them can be measured in seconds, with little noise.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/port_series.h"
#include "daemon/aggregator/analysis_host.h"
#include "daemon/aggregator/ingest/ingest_core.h"
#include "daemon/aggregator/ingest/ingest_stats.h"
#include "daemon/aggregator/ingest/observer_fanout.h"
#include "daemon/aggregator/metrics/analysis_metrics.h"
#include "daemon/common/flags.h"
#include "daemon/common/protocol.h"

ABSL_FLAG(int, agents, 64, "Simulated agents (nodes).");
ABSL_FLAG(int, series, 1500, "Series per agent.");
ABSL_FLAG(int, seconds, 60, "Simulated seconds measured (one batch per agent each), after 5 "
                            "seconds of warm-up.");
ABSL_FLAG(int, rounds, 5, "Off/on pairs; the medians are reported.");
ABSL_FLAG(std::string, only, "", "\"on\" or \"off\": run just that configuration (to profile it).");

namespace {

using ringside::daemon::AnalysisHost;
using ringside::daemon::AnalysisMetrics;
using ringside::daemon::IngestCore;
using ringside::daemon::IngestObserver;
using ringside::daemon::ObserverFanout;

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

class NoSession final : public ringside::daemon::SessionLink {
 public:
  void Replace(absl::Status) override {}
  void AckReady() override {}
};

// One aggregator's ingest path with or without the detectors, fed agent by agent.
class Pipeline {
 public:
  static std::unique_ptr<Pipeline> Make(bool detect, int n_agents, int n_series) {
    std::unique_ptr<Pipeline> p(new Pipeline());
    ringside::daemon::IngestOptions io;
    io.limits.max_nodes = static_cast<size_t>(n_agents) + 10;
    io.limits.max_series_per_node = static_cast<size_t>(n_series) + 100;
    p->core_ = std::make_unique<IngestCore>(io, &p->stats_);
    if (detect) {
      ringside::daemon::AnalysisHostOptions ho;
      ho.flush_interval = absl::Hours(24);  // flushed by Flush below, on the measuring thread
      auto h = AnalysisHost::Start(ho);
      if (!h.ok()) {
        std::fprintf(stderr, "AnalysisHost: %s\n", h.status().ToString().c_str());
        return nullptr;
      }
      p->host_ = std::move(*h);
    }
    p->metrics_ = std::make_unique<AnalysisMetrics>(ringside::daemon::AnalysisMetricsOptions{},
                                                    p->host_.get());
    p->fanout_ = std::make_unique<ObserverFanout>(
        std::vector<IngestObserver*>{p->host_.get(), p->metrics_.get()});
    p->core_->SetObserver(p->fanout_.get());
    auto session = std::make_shared<NoSession>();
    p->session_ = session;
    for (int a = 0; a < n_agents; ++a) {
      ringside::v1::Hello hello;
      hello.set_node(absl::StrCat("bench-node-", a));
      hello.set_agent_epoch(1000 + a);
      hello.set_protocol_version(ringside::daemon::kProtocolVersion);
      hello.set_min_protocol_version(ringside::daemon::kMinProtocolVersion);
      auto start = p->core_->Hello(hello, a + 1, session);
      if (!start.ok()) {
        std::fprintf(stderr, "Hello: %s\n", start.status().ToString().c_str());
        return nullptr;
      }
      p->nodes_.push_back(start->node);
      ringside::v1::AgentMessage defs;
      ringside::bench::AddPortSeriesDefs(n_series, defs.mutable_series_defs());
      if (!p->Apply(a, defs)) return nullptr;
    }
    return p;
  }

  bool Apply(int agent, const ringside::v1::AgentMessage& m) {
    if (absl::Status s = core_->Apply(*nodes_[agent], 1000 + agent, agent + 1, m); !s.ok()) {
      std::fprintf(stderr, "Apply: %s\n", s.ToString().c_str());
      return false;
    }
    return true;
  }
  void Flush(absl::Time now) {
    if (host_ != nullptr) host_->Flush(now);
  }

 private:
  Pipeline() = default;
  ringside::daemon::IngestStats stats_;
  std::unique_ptr<IngestCore> core_;
  std::unique_ptr<AnalysisHost> host_;
  std::unique_ptr<AnalysisMetrics> metrics_;
  std::unique_ptr<ObserverFanout> fanout_;
  std::shared_ptr<NoSession> session_;
  std::vector<std::shared_ptr<IngestCore::NodeEntry>> nodes_;
};

struct Costs {
  double off = -1, on = -1;  // CPU ns per sample
};

// Both pipelines, fresh, fed the same batches alternately (which goes first alternates too), so
// that whatever else the machine does falls on both alike. `only`: "on" or "off" runs just that.
Costs RunOnce(const std::string& only) {
  const int n_agents = absl::GetFlag(FLAGS_agents);
  const int n_series = absl::GetFlag(FLAGS_series);
  const int seconds = absl::GetFlag(FLAGS_seconds);
  constexpr int kWarmup = 5;
  constexpr int64_t kStart = 1'700'000'000'000'000'000LL;

  std::unique_ptr<Pipeline> pipes[2];
  for (int d = 0; d < 2; ++d) {
    if (!only.empty() && (only == "on") != (d == 1)) continue;
    pipes[d] = Pipeline::Make(d == 1, n_agents, n_series);
    if (pipes[d] == nullptr) return {};
  }
  std::vector<ringside::v1::AgentMessage> batches(n_agents);
  for (auto& batch : batches) {
    batch.set_seq(0);
    for (int s = 0; s < n_series; ++s) {
      batch.mutable_samples()->add_ids(s);
      batch.mutable_samples()->add_values(
          ringside::bench::kPortSeries[s % ringside::bench::kPortSeries.size()].step);
    }
  }

  double cpu[2] = {0, 0};
  uint64_t samples = 0;
  for (int sec = 0; sec < kWarmup + seconds; ++sec) {
    const int64_t ts = kStart + int64_t{sec} * 1'000'000'000;
    const bool measured = sec >= kWarmup;
    for (int a = 0; a < n_agents; ++a) {
      ringside::v1::AgentMessage& batch = batches[a];
      batch.mutable_samples()->set_timestamp_unix_nanos(ts);
      ringside::bench::AdvancePortSeries(batch.mutable_samples());
      batch.set_seq(batch.seq() + 1);
      for (int k = 0; k < 2; ++k) {
        const int d = (sec + a + k) % 2;
        if (pipes[d] == nullptr) continue;
        const double c0 = ThreadCpuSeconds();
        if (!pipes[d]->Apply(a, batch)) return {};
        if (measured) cpu[d] += ThreadCpuSeconds() - c0;
      }
      if (measured) samples += static_cast<uint64_t>(n_series);
    }
    for (int d = 0; d < 2; ++d) {
      if (pipes[d] == nullptr) continue;
      const double c0 = ThreadCpuSeconds();
      pipes[d]->Flush(absl::FromUnixNanos(ts));
      if (measured) cpu[d] += ThreadCpuSeconds() - c0;
    }
  }
  if (samples == 0) return {};
  const double n = static_cast<double>(samples);
  return Costs{pipes[0] ? cpu[0] * 1e9 / n : -1, pipes[1] ? cpu[1] * 1e9 / n : -1};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, which leaves Mutex deadlock detection on: every lock
  // would update a global lock graph under a global spin lock. ringside's lock order is fixed and
  // its tests run under the same library, so production skips it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::vector<std::string> args = ringside::daemon::NormalizeFlagNames(argc, argv);
  std::vector<char*> argp = ringside::daemon::ArgvPointers(args);
  absl::ParseCommandLine(static_cast<int>(args.size()), argp.data());
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  std::printf("ringside-detector-bench (issue #6): %d agents x %d series, %d simulated s, %d rounds\n",
              absl::GetFlag(FLAGS_agents), absl::GetFlag(FLAGS_series),
              absl::GetFlag(FLAGS_seconds), rounds);
  std::vector<double> off, on, ratio;
  if (const std::string only = absl::GetFlag(FLAGS_only); !only.empty()) {
    for (int r = 0; r < rounds; ++r) {
      const Costs c = RunOnce(only);
      const double x = only == "on" ? c.on : c.off;
      if (x <= 0) return 1;
      std::printf("  round %d: detectors %s: %.1f ns/sample\n", r + 1, only.c_str(), x);
    }
    return 0;
  }
  for (int r = 0; r < rounds; ++r) {
    const Costs c = RunOnce("");
    if (c.off <= 0 || c.on <= 0) return 1;
    const double a = c.off, b = c.on;
    off.push_back(a);
    on.push_back(b);
    ratio.push_back(a / b);
    std::printf("  round %d: ingest %.1f ns/sample, with detectors %.1f ns/sample: detectors "
                "%.1f ns/sample, on/off throughput %.2f\n",
                r + 1, a, b, b - a, a / b);
    std::fflush(stdout);
  }
  const double m_off = Median(off), m_on = Median(on);
  std::printf("median: ingest %.1f ns/sample, with detectors %.1f ns/sample; detectors %.1f "
              "ns/sample; on/off throughput %.2f (this thread's CPU; the ingest bench adds gRPC)\n",
              m_off, m_on, m_on - m_off, Median(ratio));
  return 0;
}
