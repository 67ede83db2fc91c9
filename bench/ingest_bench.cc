// ringside-ingest-bench (issue #4): N simulated agents stream sample batches over loopback to one
// real ringside-aggregator process; reports sustained samples per second per aggregator core (the
// aggregator's own CPU time, read from /proc, so the load generator's CPU does not count) and the
// aggregator's bytes of state per series (its own gauge, and the growth of its resident memory).
//
//   ringside-ingest-bench [--agents=64] [--series=1500] [--duration=10s] [--threads=2] [--detect]
//                         [--rounds=N]
//
// The aggregator runs with its detectors off (--detect=false: ingest alone). With --detect the
// same load runs a second time against a fresh aggregator with its detectors on, and the bench
// prints both throughputs and their ratio.
//
// Goals: 5 million samples/s per core, at most 64 bytes of state per series (issue #4), and the
// detectors costing at most 25 % of ingest throughput (issue #6).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/aggregator_process.h"
#include "bench/port_series.h"
#include "daemon/common/flags.h"
#include "daemon/common/protocol.h"
#include "grpcpp/create_channel.h"
#include "ringside/v1/ingest.grpc.pb.h"

ABSL_FLAG(int, agents, 64, "Simulated agents (one stream each).");
ABSL_FLAG(int, series, 1500, "Series per agent.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "Measured streaming time.");
ABSL_FLAG(int, threads, 2, "Load-generator threads.");
ABSL_FLAG(std::string, aggregator, RINGSIDE_BENCH_AGGREGATOR, "The ringside-aggregator binary.");
ABSL_FLAG(int, rounds, 1,
          "With --detect: measure off then on this many times, alternating, and report the median "
          "ratio (a shared machine's background load drifts; pairs taken close together and the "
          "median of several pairs are less at its mercy than one pair).");
ABSL_FLAG(bool, detect, false,
          "Also measure with the aggregator's detectors on (a second run, fresh aggregator, same "
          "load) and print the ratio of the two throughputs.");

namespace {

using ringside::bench::HttpGet;
using ringside::bench::kPortSeries;
using ringside::bench::Metric;
using ringside::bench::ProcCpuSeconds;
using ringside::bench::RssKib;

using ringside::v1::AgentMessage;
using ringside::v1::AggregatorMessage;

struct Agent {
  std::unique_ptr<ringside::v1::Ingest::Stub> stub;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReaderWriter<AgentMessage, AggregatorMessage>> stream;
  uint64_t seq = 0;
  uint64_t acked = 0;
  AgentMessage batch;  // reused: values change, ids stay
};

// What one run measured; per_core is 0 when the run failed.
struct RunResult {
  double per_core = 0;
};

RunResult RunOnce(bool detect) {
  const int n_agents = absl::GetFlag(FLAGS_agents);
  const int n_series = absl::GetFlag(FLAGS_series);
  const int n_threads = std::max(1, absl::GetFlag(FLAGS_threads));

  // The aggregator, memory only, on ephemeral loopback ports.
  ringside::bench::AggregatorProcess aggregator;
  if (!aggregator.Start(absl::GetFlag(FLAGS_aggregator),
                        {absl::StrCat("--max-series-per-node=", n_series + 100),
                         absl::StrCat("--max-nodes=", n_agents + 10),
                         detect ? "--detect=true" : "--detect=false"})) {
    return {};
  }
  const pid_t agg = aggregator.pid();
  const int grpc_port = aggregator.grpc_port();
  const int http_port = aggregator.http_port();
  const long rss_before = RssKib(agg);

  // Connect every agent and define its series.
  std::vector<Agent> agents(n_agents);
  for (int a = 0; a < n_agents; ++a) {
    Agent& ag = agents[a];
    // One connection per agent, as real agents have (the aggregator caps streams per connection).
    grpc::ChannelArguments channel_args;
    channel_args.SetInt("ringside.bench.agent", a);
    auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", grpc_port),
                                             grpc::InsecureChannelCredentials(), channel_args);
    ag.stub = ringside::v1::Ingest::NewStub(channel);
    ag.ctx = std::make_unique<grpc::ClientContext>();
    ag.stream = ag.stub->Stream(ag.ctx.get());
    AgentMessage hello;
    hello.mutable_hello()->set_node(absl::StrCat("bench-node-", a));
    hello.mutable_hello()->set_agent_epoch(1000 + a);
    hello.mutable_hello()->set_protocol_version(ringside::daemon::kProtocolVersion);
    hello.mutable_hello()->set_min_protocol_version(ringside::daemon::kMinProtocolVersion);
    ag.stream->Write(hello);
    AggregatorMessage reply;
    if (!ag.stream->Read(&reply) || !reply.has_hello_ack()) {
      std::fprintf(stderr, "agent %d: no HelloAck\n", a);
      return {};
    }
    AgentMessage defs;
    ringside::bench::AddPortSeriesDefs(n_series, defs.mutable_series_defs());
    ag.stream->Write(defs);
    for (int s = 0; s < n_series; ++s) {
      ag.batch.mutable_samples()->add_ids(s);
      ag.batch.mutable_samples()->add_values(kPortSeries[s % kPortSeries.size()].step);
    }
  }

  // Stream: each thread drives its share of agents round robin; at most 16 unacked batches each.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> batches{0};
  auto drive = [&](int t) {
    int64_t ts = 1'700'000'000'000'000'000LL;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int a = t; a < n_agents; a += n_threads) {
        Agent& ag = agents[a];
        auto* b = ag.batch.mutable_samples();
        b->set_timestamp_unix_nanos(ts);
        ringside::bench::AdvancePortSeries(b);
        ag.batch.set_seq(++ag.seq);
        if (!ag.stream->Write(ag.batch)) {
          stop = true;
          return;
        }
        while (ag.seq - ag.acked > 16) {
          AggregatorMessage m;
          if (!ag.stream->Read(&m)) {
            stop = true;
            return;
          }
          if (m.has_ack()) ag.acked = m.ack().acked_seq();
        }
        batches.fetch_add(1, std::memory_order_relaxed);
      }
      ts += 1'000'000'000;
    }
  };

  // Warm-up, then the measured window.
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t) threads.emplace_back(drive, t);
  absl::SleepFor(absl::Seconds(2));
  const uint64_t b0 = batches.load();
  const double cpu0 = ProcCpuSeconds(agg);
  const absl::Time t0 = absl::Now();
  absl::SleepFor(absl::GetFlag(FLAGS_duration));
  const uint64_t b1 = batches.load();
  const double cpu1 = ProcCpuSeconds(agg);
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  stop = true;
  for (auto& th : threads) th.join();

  const std::string metrics = HttpGet(http_port, "/metrics");
  const double series = Metric(metrics, "ringside_aggregator_series");
  const double state_bytes = Metric(metrics, "ringside_aggregator_series_state_bytes");
  const double steps = Metric(metrics, "ringside_aggregator_sample_steps_total");
  const double received = Metric(metrics, "ringside_aggregator_samples_received_total");
  const double rejected = Metric(metrics, "ringside_aggregator_samples_rejected_total");
  const long rss_after = RssKib(agg);
  for (Agent& ag : agents) {
    ag.ctx->TryCancel();
    (void)ag.stream->Finish();
  }
  aggregator.Stop();

  const double samples = static_cast<double>(b1 - b0) * n_series;
  const double cpu = cpu1 - cpu0;
  const double per_core = cpu > 0 ? samples / cpu : 0;
  const double total_series = static_cast<double>(n_agents) * n_series;
  std::printf("ringside-ingest-bench (issue #4), detectors %s\n", detect ? "on" : "off");
  std::printf("  agents %d x series %d = %.0f series; %d generator threads; window %.1f s\n",
              n_agents, n_series, total_series, n_threads, wall);
  std::printf("  samples acked in window     %.0f (%.2f M/s wall)\n", samples,
              samples / wall / 1e6);
  std::printf("  aggregator CPU in window    %.2f s (%.0f %% of one core)\n", cpu,
              100 * cpu / wall);
  std::printf("  samples per aggregator core %.2f M/s   (goal >= 5 M/s: %s)\n", per_core / 1e6,
              per_core >= 5e6 ? "met" : "NOT met");
  std::printf(
      "  series known to aggregator  %.0f; samples received %.0f, rejected %.0f; counter steps "
      "%.0f\n",
      series, received, rejected, steps);
  std::printf(
      "  state bytes per series      %.1f (ringside_aggregator_series_state_bytes / series; goal "
      "<= 64: %s)\n",
      series > 0 ? state_bytes / series : -1,
      series > 0 && state_bytes / series <= 64 ? "met" : "NOT met");
  std::printf("  RSS growth per series       %.1f bytes (everything: names, index, gRPC buffers)\n",
              total_series > 0 ? (rss_after - rss_before) * 1024.0 / total_series : -1);
  std::fflush(stdout);
  return RunResult{per_core};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args = ringside::daemon::NormalizeFlagNames(argc, argv);
  std::vector<char*> argp = ringside::daemon::ArgvPointers(args);
  absl::ParseCommandLine(static_cast<int>(args.size()), argp.data());
  const int rounds = absl::GetFlag(FLAGS_detect) ? std::max(1, absl::GetFlag(FLAGS_rounds)) : 1;
  std::vector<double> ratios;
  for (int r = 0; r < rounds; ++r) {
    const RunResult off = RunOnce(/*detect=*/false);
    if (off.per_core <= 0) return 1;
    if (!absl::GetFlag(FLAGS_detect)) return 0;
    const RunResult on = RunOnce(/*detect=*/true);
    if (on.per_core <= 0) return 1;
    const double ratio = on.per_core / off.per_core;
    ratios.push_back(ratio);
    std::printf(
        "detectors on / off: %.2f / %.2f M samples/s per core = %.2f (cost %.0f %%; "
        "goal <= 25 %%: %s)\n",
        on.per_core / 1e6, off.per_core / 1e6, ratio, 100 * (1 - ratio),
        ratio >= 0.75 ? "met" : "NOT met");
    std::fflush(stdout);
  }
  if (rounds > 1) {
    std::vector<double> sorted = ratios;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    std::string each;
    for (double x : ratios) absl::StrAppend(&each, each.empty() ? "" : ", ", absl::StrFormat("%.2f", x));
    std::printf(
        "median of %d rounds: detectors on / off = %.2f (cost %.0f %%; goal <= 25 %%: %s); "
        "rounds: %s\n",
        rounds, median, 100 * (1 - median), median >= 0.75 ? "met" : "NOT met", each.c_str());
  }
  return 0;
}
