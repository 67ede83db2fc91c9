// ringside-shard-capacity-bench (issue #14): what one aggregator shard holds. A real
// ringside-aggregator process on loopback, fed by N simulated agents, each its own gRPC connection
// and Ingest.Stream as a real agent has, driven by gRPC's callback client API (a few library
// threads and one pacing thread for every stream, so the load generator fits next to the
// aggregator on a small machine).
//
// Paced mode (default): every agent sends one SampleBatch of all its series per sampling interval
// (--rate per second, each agent at its own phase in the interval), with its detectors on. After a
// warm-up it reports, over the measured window, the aggregator's own CPU (utime + stime from
// /proc) per sample accepted and in % of one core, its resident memory growth per series, and how
// many batches were late (the previous write of that agent still in flight).
//
//   ringside-shard-capacity-bench --agents=1024 --series=1500 --rate=1 --duration=60s
//
// Idle mode: --idle-streams=M opens M streams that send a Hello (and --idle-series definitions)
// and then nothing; it reports the aggregator's resident memory, threads and descriptors with all
// of them open, and its CPU while they idle.
//
//   ringside-shard-capacity-bench --idle-streams=10000 --duration=60s
//
// Goals: 4,096 nodes x 1,500 series at 1 Hz on 2 cores; 10,000 open streams in under 2 GiB.
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/aggregator_process.h"
#include "bench/port_series.h"
#include "daemon/common/flags.h"
#include "daemon/common/protocol.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/client_callback.h"
#include "ringside/v1/ingest.grpc.pb.h"

ABSL_FLAG(int, agents, 1024, "Paced mode: simulated agents (one connection and stream each).");
ABSL_FLAG(int, series, 1500, "Paced mode: series per agent.");
ABSL_FLAG(double, rate, 1.0, "Paced mode: sample batches per agent per second (sampling rate).");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(10),
          "Streaming before the measured window (every agent has sent its definitions by then).");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(60), "Measured window.");
ABSL_FLAG(bool, detect, true, "Run the aggregator with its detectors on.");
ABSL_FLAG(int, idle_streams, 0,
          "Idle mode instead of the paced load: open this many streams, each a Hello (and "
          "--idle-series definitions), then nothing for --duration.");
ABSL_FLAG(int, idle_series, 0, "Idle mode: series definitions each idle stream sends.");
ABSL_FLAG(int, connect_window, 256, "Streams being opened at once (Hello not yet acknowledged).");
ABSL_FLAG(std::string, aggregator, RINGSIDE_BENCH_AGGREGATOR, "The ringside-aggregator binary.");

namespace {

using ringside::bench::kPortSeries;
using ringside::v1::AgentMessage;
using ringside::v1::AggregatorMessage;

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// xorshift64: cheap per-agent randomness for counters' starting values and traffic.
uint64_t Next(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// What every stream reports to; all counters are totals over every agent.
struct Totals {
  std::atomic<int64_t> opening{0};      // streams whose Hello is not yet acknowledged
  std::atomic<int64_t> ready{0};        // definitions written: sampling
  std::atomic<int64_t> failed{0};       // streams that ended before being closed by the bench
  std::atomic<int64_t> done{0};         // OnDone seen
  std::atomic<uint64_t> batches_sent{0};
  std::atomic<uint64_t> batches_acked{0};
  std::atomic<uint64_t> late{0};        // a batch due while the agent's previous write was in flight
  std::mutex mu;
  std::condition_variable cv;
  std::string first_error;

  void Notify() {
    std::lock_guard<std::mutex> l(mu);
    cv.notify_all();
  }
};

// One simulated agent: a connection, a stream, its series and their values.
class AgentStream final : public grpc::ClientBidiReactor<AgentMessage, AggregatorMessage> {
 public:
  AgentStream(Totals* totals, int index, int n_series, bool batches)
      : totals_(totals), index_(index), rng_(0x9E3779B97F4A7C15ull * (index + 1)) {
    AgentMessage& h = hello_;
    h.mutable_hello()->set_node(absl::StrCat("shard-bench-node-", index));
    h.mutable_hello()->set_agent_epoch(absl::ToUnixNanos(absl::Now()) + index);
    h.mutable_hello()->set_protocol_version(ringside::daemon::kProtocolVersion);
    h.mutable_hello()->set_min_protocol_version(ringside::daemon::kMinProtocolVersion);
    has_defs_ = n_series > 0;
    if (has_defs_) ringside::bench::AddPortSeriesDefs(n_series, defs_.mutable_series_defs());
    if (!batches) return;
    // Counters as on a node that has been up for hours to weeks: traffic counters far from zero,
    // idle error counters at a small constant, states at their healthy value.
    const int64_t uptime_s = 3600 + static_cast<int64_t>(Next(rng_) % (30 * 86400));
    auto* b = batch_.mutable_samples();
    steps_.reserve(n_series);
    for (int s = 0; s < n_series; ++s) {
      const ringside::bench::PortSeries& ps = kPortSeries[s % kPortSeries.size()];
      const uint64_t mask = ps.width == 0 || ps.width >= 64 ? ~0ull : (1ull << ps.width) - 1;
      uint64_t v = ps.step;
      if (ps.kind == ringside::v1::SERIES_KIND_COUNTER) {
        v = ps.step == 0 ? Next(rng_) % 4 : ps.step * static_cast<uint64_t>(uptime_s);
        v &= mask;
      }
      b->add_ids(s);
      b->add_values(v);
      steps_.push_back(ps.kind == ringside::v1::SERIES_KIND_COUNTER ? ps.step : 0);
      masks_.push_back(mask);
    }
    // This node's share of the fabric's traffic: 50-150 % of the port series' steps.
    load_permille_ = 500 + static_cast<int>(Next(rng_) % 1001);
  }

  void Open(ringside::v1::Ingest::Stub* stub) {
    stub->async()->Stream(&ctx_, this);
    writing_ = true;
    what_ = kHello;
    StartWrite(&hello_);
    StartRead(&in_);
    StartCall();
  }

  // The sampling cycle at `ts`: one batch of every series' next value, unless the previous write
  // is still in flight (then it is late: a real agent would buffer it).
  void Tick(int64_t ts) {
    if (done_.load()) return;
    if (!ready_.load()) return;  // not in practice: the pacer starts once every agent is ready
    if (writing_.exchange(true)) {
      totals_->late.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    auto* b = batch_.mutable_samples();
    b->set_timestamp_unix_nanos(ts);
    // This second's traffic: the node's share, moving by up to +-10 % from one cycle to the next.
    const uint64_t permille = static_cast<uint64_t>(load_permille_) * (900 + Next(rng_) % 201) / 1000;
    uint64_t* values = b->mutable_values()->mutable_data();
    const int n = b->values_size();
    for (int s = 0; s < n; ++s) {
      if (steps_[s] == 0) continue;  // idle counters and states hold their value
      values[s] = (values[s] + std::max<uint64_t>(1, steps_[s] * permille / 1000)) & masks_[s];
    }
    batch_.set_seq(++seq_);
    what_ = kBatch;
    totals_->batches_sent.fetch_add(1, std::memory_order_relaxed);
    StartWrite(&batch_);
  }

  void Close() { ctx_.TryCancel(); }
  bool done() const { return done_.load(); }

  void OnWriteDone(bool ok) override {
    if (!ok) return;  // the stream is ending; OnDone follows
    const What w = what_;
    writing_ = false;
    if (w == kDefs) {
      AgentMessage().Swap(&defs_);  // sent once per session: free it (the bench's own memory)
      MarkReady();
      return;
    }
    MaybeSendDefs();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (in_.has_hello_ack()) {
      hello_acked_ = true;
      totals_->opening.fetch_sub(1);
      if (!has_defs_) {
        defs_sent_ = true;
        MarkReady();
      }
      MaybeSendDefs();
      totals_->Notify();
    } else if (in_.has_ack()) {
      const uint64_t a = in_.ack().acked_seq();
      if (a > acked_) {
        totals_->batches_acked.fetch_add(a - acked_, std::memory_order_relaxed);
        acked_ = a;
      }
    }
    StartRead(&in_);
  }

  void OnDone(const grpc::Status& status) override {
    if (!hello_acked_) totals_->opening.fetch_sub(1);
    if (!closing_.load() && status.error_code() != grpc::StatusCode::CANCELLED) {
      totals_->failed.fetch_add(1);
      std::lock_guard<std::mutex> l(totals_->mu);
      if (totals_->first_error.empty()) {
        totals_->first_error = absl::StrCat("agent ", index_, ": ", status.error_code(), " ",
                                            status.error_message());
      }
    }
    done_ = true;
    totals_->done.fetch_add(1);
    totals_->Notify();
  }

  void set_closing() { closing_ = true; }

 private:
  enum What { kHello, kDefs, kBatch };

  void MaybeSendDefs() {
    if (!hello_acked_.load() || defs_sent_.load()) return;
    if (writing_.exchange(true)) return;  // OnWriteDone comes back here
    if (defs_sent_.exchange(true)) {
      writing_ = false;
      return;
    }
    what_ = kDefs;
    StartWrite(&defs_);
  }

  void MarkReady() {
    if (!ready_.exchange(true)) {
      totals_->ready.fetch_add(1);
      totals_->Notify();
    }
  }

  Totals* const totals_;
  const int index_;
  uint64_t rng_;
  grpc::ClientContext ctx_;
  AgentMessage hello_;
  AgentMessage defs_;
  AgentMessage batch_;
  AggregatorMessage in_;
  std::vector<uint64_t> steps_;
  std::vector<uint64_t> masks_;
  bool has_defs_ = false;
  int load_permille_ = 1000;
  uint64_t seq_ = 0;
  uint64_t acked_ = 0;  // reads are serialized by the library
  What what_ = kHello;  // written before each StartWrite, read in its OnWriteDone
  std::atomic<bool> writing_{false};
  std::atomic<bool> hello_acked_{false};
  std::atomic<bool> defs_sent_{false};
  std::atomic<bool> ready_{false};
  std::atomic<bool> closing_{false};
  std::atomic<bool> done_{false};
};

struct Agents {
  std::vector<std::unique_ptr<ringside::v1::Ingest::Stub>> stubs;
  std::vector<std::unique_ptr<AgentStream>> streams;
};

// Opens `n` streams, at most --connect-window at a time; false when one failed or it took longer
// than 5 minutes.
bool OpenAll(Totals& totals, Agents& agents, int n, int grpc_port, int n_series, bool batches) {
  const int window = std::max(1, absl::GetFlag(FLAGS_connect_window));
  const absl::Time deadline = absl::Now() + absl::Minutes(5);
  for (int a = 0; a < n; ++a) {
    {
      std::unique_lock<std::mutex> l(totals.mu);
      totals.cv.wait_until(l, absl::ToChronoTime(deadline), [&] {
        return totals.opening.load() < window || totals.failed.load() > 0;
      });
    }
    if (totals.failed.load() > 0 || absl::Now() > deadline) return false;
    // One connection per agent, as real agents have: the channel argument that differs keeps gRPC
    // from sharing one subchannel between them. Keepalive as the real agent's uploader.
    grpc::ChannelArguments args;
    args.SetInt("ringside.bench.agent", a);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", grpc_port),
                                             grpc::InsecureChannelCredentials(), args);
    agents.stubs.push_back(ringside::v1::Ingest::NewStub(channel));
    agents.streams.push_back(std::make_unique<AgentStream>(&totals, a, n_series, batches));
    totals.opening.fetch_add(1);
    agents.streams.back()->Open(agents.stubs.back().get());
  }
  std::unique_lock<std::mutex> l(totals.mu);
  return totals.cv.wait_until(l, absl::ToChronoTime(deadline), [&] {
    return totals.ready.load() == n || totals.failed.load() > 0;
  }) && totals.failed.load() == 0;
}

void CloseAll(Totals& totals, Agents& agents) {
  for (auto& s : agents.streams) s->set_closing();
  for (auto& s : agents.streams) s->Close();
  std::unique_lock<std::mutex> l(totals.mu);
  totals.cv.wait_for(l, std::chrono::seconds(60), [&] {
    return totals.done.load() == static_cast<int64_t>(agents.streams.size());
  });
  if (totals.done.load() != static_cast<int64_t>(agents.streams.size())) {
    std::fprintf(stderr, "%lld streams did not end; exiting without cleanup\n",
                 static_cast<long long>(agents.streams.size() - totals.done.load()));
    std::fflush(stdout);
    _exit(1);
  }
}

void RaiseFdLimit() {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;  // the child aggregator inherits it
  setrlimit(RLIMIT_NOFILE, &r);
  std::printf("  RLIMIT_NOFILE %llu (this process and the aggregator)\n",
              static_cast<unsigned long long>(r.rlim_cur));
}

std::string LoadAverage() {
  double l[3] = {0, 0, 0};
  if (getloadavg(l, 3) != 3) return "?";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f, %.2f, %.2f", l[0], l[1], l[2]);
  return buf;
}

// The aggregator's counters and its CPU. The window's CPU leaves out both /metrics renders (the
// start reads its CPU after the render, the end before); the samples are counted between the
// two renders and divided by the time between them.
struct Snapshot {
  double cpu = 0;
  absl::Time cpu_at;
  long switches = 0;
  long rss_kib = 0;
  double received = 0;
  double rejected = 0;
  double messages = 0;
  absl::Time metrics_at;
};

void ReadMetrics(const ringside::bench::AggregatorProcess& agg, Snapshot& s) {
  const std::string m = ringside::bench::HttpGet(agg.http_port(), "/metrics");
  s.metrics_at = absl::Now();
  s.received = ringside::bench::Metric(m, "ringside_aggregator_samples_received_total");
  s.rejected = ringside::bench::Metric(m, "ringside_aggregator_samples_rejected_total");
  s.messages = ringside::bench::MetricSum(m, "ringside_aggregator_messages_received_total");
}

void ReadProcess(const ringside::bench::AggregatorProcess& agg, Snapshot& s) {
  s.cpu = ringside::bench::ProcCpuSeconds(agg.pid());
  s.cpu_at = absl::Now();
  s.switches = ringside::bench::ContextSwitches(agg.pid());
  s.rss_kib = ringside::bench::RssKib(agg.pid());
}

Snapshot TakeStart(const ringside::bench::AggregatorProcess& agg) {
  Snapshot s;
  ReadMetrics(agg, s);
  ReadProcess(agg, s);
  return s;
}

Snapshot TakeEnd(const ringside::bench::AggregatorProcess& agg) {
  Snapshot s;
  ReadProcess(agg, s);
  ReadMetrics(agg, s);
  return s;
}

void PrintProcess(const char* who, pid_t pid) {
  std::printf("  %-28s RSS %.1f MiB, %ld threads, %ld open descriptors\n", who,
              ringside::bench::RssKib(pid) / 1024.0,
              ringside::bench::ProcStatusField(pid, "Threads"), ringside::bench::OpenFds(pid));
}

int RunPaced() {
  const int n_agents = absl::GetFlag(FLAGS_agents);
  const int n_series = absl::GetFlag(FLAGS_series);
  const double rate = absl::GetFlag(FLAGS_rate);
  const bool detect = absl::GetFlag(FLAGS_detect);
  if (n_agents <= 0 || n_series <= 0 || rate <= 0) {
    std::fprintf(stderr, "--agents, --series and --rate must be positive\n");
    return 2;
  }
  int idle = 0;
  for (int s = 0; s < n_series; ++s) {
    if (kPortSeries[s % kPortSeries.size()].step == 0 ||
        kPortSeries[s % kPortSeries.size()].kind != ringside::v1::SERIES_KIND_COUNTER) {
      ++idle;
    }
  }
  std::printf("ringside-shard-capacity-bench (issue #14): paced, detectors %s\n",
              detect ? "on" : "off");
  std::printf("  %d agents x %d series at %g Hz = %.0f series, %.3f M samples/s offered\n",
              n_agents, n_series, rate, 1.0 * n_agents * n_series,
              n_agents * n_series * rate / 1e6);
  std::printf("  per agent: %d of %d series hold their value (idle counters and states)\n", idle,
              n_series);
  RaiseFdLimit();
  std::printf("  load average at start: %s\n", LoadAverage().c_str());

  ringside::bench::AggregatorProcess agg;
  if (!agg.Start(absl::GetFlag(FLAGS_aggregator),
                 {absl::StrCat("--max-nodes=", n_agents + 16),
                  absl::StrCat("--max-series-per-node=", n_series + 100),
                  absl::StrCat("--detect=", detect ? "true" : "false")})) {
    return 1;
  }
  const long rss_empty = ringside::bench::RssKib(agg.pid());

  Totals totals;
  Agents agents;
  const absl::Time open_start = absl::Now();
  const double cpu_open0 = ringside::bench::ProcCpuSeconds(agg.pid());
  if (!OpenAll(totals, agents, n_agents, agg.grpc_port(), n_series, /*batches=*/true)) {
    std::fprintf(stderr, "opening streams failed: %lld of %d ready; %s\n",
                 static_cast<long long>(totals.ready.load()), n_agents,
                 totals.first_error.c_str());
    CloseAll(totals, agents);
    return 1;
  }
  std::printf("  %d streams open with their definitions in %.1f s (aggregator CPU %.2f s)\n",
              n_agents, absl::ToDoubleSeconds(absl::Now() - open_start),
              ringside::bench::ProcCpuSeconds(agg.pid()) - cpu_open0);
  std::fflush(stdout);

  // The pacer: agent a samples at start + k / rate + (a + 0.5) / (n * rate).
  std::atomic<bool> stop{false};
  std::atomic<double> pacer_cpu{0};
  std::atomic<int64_t> pacer_max_lag_us{0};
  std::atomic<bool> measuring{false};
  const absl::Duration period = absl::Seconds(1.0 / rate);
  const absl::Time pace_start = absl::Now();
  std::thread pacer([&] {
    const double cpu0 = ThreadCpuSeconds();
    for (int64_t k = 0; !stop.load(); ++k) {
      for (int a = 0; a < n_agents && !stop.load(); ++a) {
        const absl::Time due = pace_start + period * k + period * ((a + 0.5) / n_agents);
        const absl::Duration wait = due - absl::Now();
        if (wait > absl::Microseconds(100)) {
          absl::SleepFor(wait);
        } else if (measuring.load() && -wait > absl::Microseconds(pacer_max_lag_us.load())) {
          pacer_max_lag_us = absl::ToInt64Microseconds(-wait);
        }
        agents.streams[a]->Tick(absl::ToUnixNanos(due));
      }
    }
    pacer_cpu = ThreadCpuSeconds() - cpu0;
  });

  absl::SleepFor(absl::GetFlag(FLAGS_warmup));
  const uint64_t late0 = totals.late.load();
  const uint64_t sent0 = totals.batches_sent.load();
  const uint64_t acked0 = totals.batches_acked.load();
  const double self_cpu0 = ringside::bench::ProcCpuSeconds(getpid());
  const Snapshot s0 = TakeStart(agg);
  measuring = true;
  std::printf("  load average at the window's start: %s\n", LoadAverage().c_str());
  absl::SleepFor(absl::GetFlag(FLAGS_duration));
  const Snapshot s1 = TakeEnd(agg);
  measuring = false;
  const double self_cpu1 = ringside::bench::ProcCpuSeconds(getpid());
  const uint64_t late1 = totals.late.load();
  const uint64_t sent1 = totals.batches_sent.load();
  const uint64_t acked1 = totals.batches_acked.load();
  std::printf("  load average at the window's end: %s\n", LoadAverage().c_str());
  const std::string metrics = ringside::bench::HttpGet(agg.http_port(), "/metrics");
  PrintProcess("aggregator at the end:", agg.pid());
  PrintProcess("load generator at the end:", getpid());
  stop = true;
  pacer.join();
  CloseAll(totals, agents);
  agg.Stop();

  const double wall = absl::ToDoubleSeconds(s1.cpu_at - s0.cpu_at);
  const double cpu = s1.cpu - s0.cpu;
  // Samples accepted and messages over the metrics window, scaled to the CPU window.
  const double scale = wall / absl::ToDoubleSeconds(s1.metrics_at - s0.metrics_at);
  const double accepted = ((s1.received - s1.rejected) - (s0.received - s0.rejected)) * scale;
  const double offered = n_agents * n_series * rate * wall;
  const double series = ringside::bench::Metric(metrics, "ringside_aggregator_series");
  const double state = ringside::bench::Metric(metrics, "ringside_aggregator_series_state_bytes");
  const double total_series = 1.0 * n_agents * n_series;
  std::printf("  window %.1f s: batches sent %llu, acked %llu, late %llu; pacer lag at most %.1f ms\n",
              wall, static_cast<unsigned long long>(sent1 - sent0),
              static_cast<unsigned long long>(acked1 - acked0),
              static_cast<unsigned long long>(late1 - late0), pacer_max_lag_us.load() / 1000.0);
  std::printf("  samples accepted            %.0f (%.3f M/s over %.1f s of /metrics; offered %.3f M/s; "
              "rejected %.0f)\n",
              accepted / scale, accepted / wall / 1e6,
              absl::ToDoubleSeconds(s1.metrics_at - s0.metrics_at), offered / wall / 1e6,
              s1.rejected - s0.rejected);
  std::printf("  aggregator CPU              %.2f s = %.1f %% of one core\n", cpu,
              100 * cpu / wall);
  std::printf("  aggregator CPU per sample   %.1f ns\n", accepted > 0 ? cpu / accepted * 1e9 : -1);
  const double messages = (s1.messages - s0.messages) * scale;
  std::printf("  aggregator per message      %.1f us CPU, %.2f context switches (%.0f messages)\n",
              messages > 0 ? cpu / messages * 1e6 : -1,
              messages > 0 ? (s1.switches - s0.switches) / messages : -1, messages);
  std::printf("  load generator CPU          %.1f %% of one core (pacer thread %.1f %% over the run)\n",
              100 * (self_cpu1 - self_cpu0) / wall,
              100 * pacer_cpu.load() / absl::ToDoubleSeconds(absl::Now() - pace_start));
  std::printf("  aggregator RSS              %.1f MiB empty, %.1f MiB at the window's end\n",
              rss_empty / 1024.0, s1.rss_kib / 1024.0);
  std::printf("  RSS growth per series       %.1f bytes (%.0f series; state gauge %.1f bytes a "
              "series)\n",
              (s1.rss_kib - rss_empty) * 1024.0 / total_series, series,
              series > 0 ? state / series : -1);
  std::printf("  RSS growth per node         %.1f KiB\n",
              (s1.rss_kib - rss_empty) / static_cast<double>(n_agents));
  if (totals.failed.load() > 0) {
    std::printf("  streams failed: %lld (%s)\n", static_cast<long long>(totals.failed.load()),
                totals.first_error.c_str());
    return 1;
  }
  return 0;
}

int RunIdle() {
  const int n = absl::GetFlag(FLAGS_idle_streams);
  const int n_series = std::max(0, absl::GetFlag(FLAGS_idle_series));
  std::printf("ringside-shard-capacity-bench (issue #14): %d idle streams, %d series defined each, "
              "detectors %s\n",
              n, n_series, absl::GetFlag(FLAGS_detect) ? "on" : "off");
  if (n_series > 0) {
    // What the aggregator's session holds while this is its last message: the parsed definitions.
    AgentMessage defs;
    ringside::bench::AddPortSeriesDefs(n_series, defs.mutable_series_defs());
    AgentMessage parsed;
    parsed.ParseFromString(defs.SerializeAsString());
    std::printf("  one SeriesDefs message: %zu bytes on the wire, %zu bytes parsed "
                "(protobuf SpaceUsedLong)\n",
                defs.ByteSizeLong(), static_cast<size_t>(parsed.SpaceUsedLong()));
  }
  RaiseFdLimit();
  std::printf("  load average at start: %s\n", LoadAverage().c_str());
  ringside::bench::AggregatorProcess agg;
  if (!agg.Start(absl::GetFlag(FLAGS_aggregator),
                 {absl::StrCat("--max-nodes=", n + 16),
                  absl::StrCat("--max-series-per-node=", n_series + 100),
                  absl::StrCat("--detect=", absl::GetFlag(FLAGS_detect) ? "true" : "false")})) {
    return 1;
  }
  PrintProcess("aggregator, empty:", agg.pid());
  const long rss_empty = ringside::bench::RssKib(agg.pid());
  Totals totals;
  Agents agents;
  const absl::Time t0 = absl::Now();
  const bool ok = OpenAll(totals, agents, n, agg.grpc_port(), n_series, /*batches=*/false);
  std::printf("  %lld of %d streams open after %.1f s%s\n",
              static_cast<long long>(totals.ready.load()), n,
              absl::ToDoubleSeconds(absl::Now() - t0), ok ? "" : " (FAILED)");
  if (!ok) {
    std::printf("  first failure: %s\n", totals.first_error.c_str());
    PrintProcess("aggregator:", agg.pid());
    PrintProcess("load generator:", getpid());
    CloseAll(totals, agents);
    return 1;
  }
  PrintProcess("aggregator, all open:", agg.pid());
  const Snapshot s0 = TakeStart(agg);
  absl::SleepFor(absl::GetFlag(FLAGS_duration));
  const Snapshot s1 = TakeEnd(agg);
  const std::string metrics = ringside::bench::HttpGet(agg.http_port(), "/metrics");
  const double open = ringside::bench::Metric(metrics, "ringside_aggregator_streams_open");
  const double nodes = ringside::bench::Metric(metrics, "ringside_aggregator_nodes");
  PrintProcess("aggregator, after idling:", agg.pid());
  PrintProcess("load generator:", getpid());
  const long rss_now = s1.rss_kib;
  const int64_t failed = totals.failed.load();
  CloseAll(totals, agents);
  agg.Stop();
  const double wall = absl::ToDoubleSeconds(s1.cpu_at - s0.cpu_at);
  std::printf("  idle %.1f s: aggregator CPU %.2f s = %.2f %% of one core; streams_open %.0f, "
              "nodes %.0f, streams failed while idle %lld\n",
              wall, s1.cpu - s0.cpu, 100 * (s1.cpu - s0.cpu) / wall, open, nodes,
              static_cast<long long>(failed));
  std::printf("  aggregator RSS %.1f MiB with %d streams (goal < 2048 MiB: %s); %.1f KiB a stream "
              "over the empty aggregator's %.1f MiB\n",
              rss_now / 1024.0, n, rss_now < 2048 * 1024 ? "met" : "NOT met",
              (rss_now - rss_empty) / static_cast<double>(n), rss_empty / 1024.0);
  return failed > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args = ringside::daemon::NormalizeFlagNames(argc, argv);
  std::vector<char*> argp = ringside::daemon::ArgvPointers(args);
  absl::ParseCommandLine(static_cast<int>(args.size()), argp.data());
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return absl::GetFlag(FLAGS_idle_streams) > 0 ? RunIdle() : RunPaced();
}
