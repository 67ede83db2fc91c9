// ringside-shard-capacity-bench (issues #14, #26): what one aggregator shard holds. A real
// ringside-aggregator process on loopback, fed by N simulated agents, each its own gRPC connection
// and Ingest.Stream as a real agent has (bench/shard_load.h: gRPC's generic asynchronous client on
// --pacers driver threads that both poll the streams' completion queues and send the batches;
// the definitions serialized once for all agents, each batch encoded straight from its values).
//
// Paced mode (default): every agent sends a Hello, its definitions and one batch at once (the
// admission: it ends when every agent's first batch is acked), then one SampleBatch of all its
// series per sampling interval (--rate per second, each agent at its own phase in the interval),
// with the aggregator's detectors on. It reports:
//   - the admission: wall time, the aggregator's CPU over it, streams failed during it;
//   - over the measured window after --warmup: samples offered against the target, the driver
//     threads' lag behind schedule (p50, p99, max; batches sent more than 1 % of an interval
//     late) and batches not sent because the agent's previous write was still in flight; the
//     aggregator's CPU (utime + stime from /proc) per sample accepted and in % of one core, its
//     resident memory growth per series, and the load generator's own CPU;
//   - the CPU this machine charges for a fresh 4 KiB page (bench/page_touch.h), and the
//     aggregator's minor faults over the admission and the window at that price: on a VM that
//     backs each page on first touch, much of an admission is the machine's;
//   - with --reconnect, a second admission: every stream closed and opened again on a new
//     connection with the same agent epoch, as after a network blip.
// It refuses a run whose load did not arrive: "NOT A VALID RUN" and exit status 1 when the
// samples offered over the window fell below 99 % of agents x series x rate, when any stream
// failed (each distinct status with its count), or when a batch sent was not acked or a sample
// was rejected.
//
//   ringside-shard-capacity-bench --agents=1024 --series=1500 --rate=1 --duration=60s
//   ringside-shard-capacity-bench --agents=12500 --series=1500 --rate=0.25 --reconnect
//
// Idle mode: --idle-streams=M opens M streams that send a Hello (and --idle-series definitions)
// and then nothing; it reports the aggregator's resident memory, threads and descriptors with all
// of them open, and its CPU while they idle.
//
//   ringside-shard-capacity-bench --idle-streams=10000 --duration=60s
//
// Goals: 4,096 nodes x 1,500 series at 1 Hz on 2 cores; 10,000 open streams in under 2 GiB;
// 12,500 nodes x 1,500 series at 0.25 Hz on 2 cores, admitted in under 15 s of aggregator CPU.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/aggregator_process.h"
#include "bench/page_touch.h"
#include "bench/shard_load.h"
#include "daemon/common/flags.h"
#include "ringside/v1/ingest.pb.h"

ABSL_FLAG(int, agents, 1024, "Paced mode: simulated agents (one connection and stream each).");
ABSL_FLAG(int, series, 1500, "Paced mode: series per agent.");
ABSL_FLAG(double, rate, 1.0, "Paced mode: sample batches per agent per second (sampling rate).");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(10),
          "Streaming between the admission and the measured window.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(60), "Measured window.");
ABSL_FLAG(bool, detect, true, "Run the aggregator with its detectors on.");
ABSL_FLAG(int, pacers, 0,
          "Threads driving the streams (agent a on thread a mod P: its events and its batches); "
          "0: one per 4,000 batches a second, at most half the cores.");
ABSL_FLAG(bool, reconnect, false,
          "Paced mode: after the window, close every stream and open it again on a new "
          "connection with the same agent epoch, and report that admission too.");
ABSL_FLAG(absl::Duration, admission_timeout, absl::Minutes(5),
          "How long an admission may take before the run gives up.");
ABSL_FLAG(int, idle_streams, 0,
          "Idle mode instead of the paced load: open this many streams, each a Hello (and "
          "--idle-series definitions), then nothing for --duration.");
ABSL_FLAG(int, idle_series, 0, "Idle mode: series definitions each idle stream sends.");
ABSL_FLAG(bool, defs_by_reference, true,
          "Agents name their definition set by its digest in the Hello, as ringside-agent does; "
          "the aggregator then needs the definitions of one agent in many (docs/agent-upload.md). "
          "false: every agent sends its definitions, as agents before that did.");
ABSL_FLAG(int, connect_window, 256, "Streams being opened at once (Hello not yet acknowledged).");
ABSL_FLAG(std::string, aggregator, RINGSIDE_BENCH_AGGREGATOR, "The ringside-aggregator binary.");

namespace {

using ringside::bench::AdmissionResult;
using ringside::bench::Fleet;
using ringside::bench::LoadTotals;
using ringside::bench::Driver;
using ringside::bench::SeriesShape;
using ringside::bench::SimAgent;

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
  long long faults = 0;  // minor page faults
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
  s.faults = ringside::bench::ProcMinorFaults(agg.pid());
}

// "N minor faults (about S s of CPU at this machine's U us a page)": how much of the aggregator's
// CPU went to memory it touched for the first time (bench/page_touch.h).
// Faults from `before` to `after`; -1 when either could not be read.
long long FaultsBetween(long long before, long long after) {
  return before < 0 || after < 0 ? -1 : after - before;
}

std::string FaultCost(long long faults, double page_us) {
  if (faults < 0) return "minor faults unknown (/proc/<pid>/stat unreadable)";
  if (page_us <= 0) return absl::StrCat(faults, " minor faults");
  return absl::StrFormat("%lld minor faults (about %.1f s of CPU at this machine's %.1f us a page)",
                         faults, static_cast<double>(faults) * page_us * 1e-6, page_us);
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

// Admits every agent of `fleet` and prints what it took: wall time, the aggregator's CPU, streams
// failed. `what` names it ("admission", "reconnect").
AdmissionResult AdmitAndReport(const char* what, LoadTotals& totals, Fleet& fleet,
                               Driver& driver, const ringside::bench::AggregatorProcess& agg,
                               bool batches, int n_series, double page_us) {
  const double cpu0 = ringside::bench::ProcCpuSeconds(agg.pid());
  const long long faults0 = ringside::bench::ProcMinorFaults(agg.pid());
  const AdmissionResult r =
      ringside::bench::Admit(totals, fleet, driver, agg.grpc_port(), batches,
                             absl::GetFlag(FLAGS_connect_window),
                             absl::GetFlag(FLAGS_admission_timeout));
  const double cpu = ringside::bench::ProcCpuSeconds(agg.pid()) - cpu0;
  const long long faults = FaultsBetween(faults0, ringside::bench::ProcMinorFaults(agg.pid()));
  const double series = ringside::bench::Metric(
      ringside::bench::HttpGet(agg.http_port(), "/metrics"), "ringside_aggregator_series");
  const int n = static_cast<int>(fleet.agents.size());
  std::printf("  %-11s %lld of %d streams admitted (Hello, HelloAck, %d definitions%s) in %.1f s; "
              "aggregator CPU %.2f s (%.2f ms a stream); failed %lld%s; series gauge %.0f\n",
              what, static_cast<long long>(r.admitted), n, n_series,
              batches ? ", first batch acked" : " written", r.wall_s, cpu,
              n > 0 ? cpu / n * 1e3 : 0.0, static_cast<long long>(r.failed),
              r.timed_out ? " (TIMED OUT)" : "", series);
  std::printf("  %-11s %s\n", "", FaultCost(faults, page_us).c_str());
  if (page_us > 0 && faults > 0) {
    // This VM's price a page moves by hours (docs/benchmarks.md, "Eighth pass"): what is left
    // without it compares builds measured at different prices.
    const double own = std::max(0.0, cpu - static_cast<double>(faults) * page_us * 1e-6);
    std::printf("  %-11s aggregator CPU less those faults: %.2f s (%.2f ms a stream)\n", "", own,
                n > 0 ? own / n * 1e3 : 0.0);
  }
  return r;
}

// Waits (up to 30 s) until every batch sent is acked; returns how many were not.
uint64_t Drain(LoadTotals& totals) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (totals.batches_acked.load() < totals.batches_sent.load() && absl::Now() < deadline &&
         totals.failed.load() == 0) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  const uint64_t sent = totals.batches_sent.load();
  const uint64_t acked = totals.batches_acked.load();
  return sent > acked ? sent - acked : 0;
}

double Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * (sorted.size() - 1) + 0.5));
  return static_cast<double>(sorted[i]);
}

// One driver thread per 4,000 batches a second (one thread used 22 % of a core for 2,048 a second
// here, half of it gRPC's own work), at most half the cores: every thread more adds handoffs
// between threads (epoll's poller role), which cost more than they spread.
int DefaultDrivers(double batches_per_s) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int want = static_cast<int>(std::ceil(batches_per_s / 4000));
  return std::clamp(want, 1, std::max(1, cores / 2));
}

int RunPaced() {
  const int n_agents = absl::GetFlag(FLAGS_agents);
  const int n_series = absl::GetFlag(FLAGS_series);
  const double rate = absl::GetFlag(FLAGS_rate);
  const bool detect = absl::GetFlag(FLAGS_detect);
  const int pacers = absl::GetFlag(FLAGS_pacers) > 0 ? absl::GetFlag(FLAGS_pacers)
                                                     : DefaultDrivers(n_agents * rate);
  if (n_agents <= 0 || n_series <= 0 || rate <= 0) {
    std::fprintf(stderr, "--agents, --series and --rate must be positive\n");
    return 2;
  }
  const SeriesShape shape(n_series, absl::GetFlag(FLAGS_defs_by_reference));
  const double target = 1.0 * n_agents * n_series * rate;
  std::printf("ringside-shard-capacity-bench (issues #14, #26): paced, detectors %s, %d driver "
              "thread%s\n",
              detect ? "on" : "off", pacers, pacers == 1 ? "" : "s");
  std::printf("  %d agents x %d series at %g Hz = %.0f series, %.3f M samples/s to offer\n",
              n_agents, n_series, rate, 1.0 * n_agents * n_series, target / 1e6);
  std::printf("  per agent: %d of %d series hold their value (idle counters and states)\n",
              shape.idle, n_series);
  RaiseFdLimit();
  std::printf("  load average at start: %s\n", LoadAverage().c_str());
  const double page_us = ringside::bench::PageTouchMicros();
  if (page_us > 0) {
    std::printf("  this machine: a first write to a fresh 4 KiB page costs %.1f us of CPU (%.1f s "
                "a GiB)\n",
                page_us, page_us * 262144 * 1e-6);
  } else {
    std::printf("  this machine: the price of a fresh page could not be measured (mmap failed)\n");
  }
  const ringside::bench::PopulatedTouch populated = ringside::bench::PopulatedTouchMicros();
  if (populated.populate_us >= 0) {
    std::printf("               populated in bulk first (MADV_POPULATE_WRITE): %.1f us a page in "
                "the call, then %.1f us at its first write\n",
                populated.populate_us, populated.write_us);
  }

  ringside::bench::AggregatorProcess agg;
  if (!agg.Start(absl::GetFlag(FLAGS_aggregator),
                 {absl::StrCat("--max-nodes=", n_agents + 16),
                  absl::StrCat("--max-series-per-node=", n_series + 100),
                  absl::StrCat("--detect=", detect ? "true" : "false")})) {
    return 1;
  }
  const long rss_empty = ringside::bench::RssKib(agg.pid());

  LoadTotals totals;
  Fleet fleet;
  for (int a = 0; a < n_agents; ++a) {
    fleet.agents.push_back(std::make_unique<SimAgent>(a, &shape, /*batches=*/true));
  }
  Driver driver(pacers);
  const AdmissionResult admission =
      AdmitAndReport("admission:", totals, fleet, driver, agg, /*batches=*/true, n_series,
                     page_us);
  if (admission.admitted < n_agents) {
    std::printf("  NOT A VALID RUN: %lld of %d streams admitted; streams failed: %lld (%s)\n",
                static_cast<long long>(admission.admitted), n_agents,
                static_cast<long long>(totals.failed.load()), totals.FailureSummary().c_str());
    if (!ringside::bench::CloseAll(totals, fleet)) _exit(1);
    return 1;
  }

  driver.StartPacing(&fleet, &totals, rate);
  absl::SleepFor(absl::GetFlag(FLAGS_warmup));
  const std::string load_start = LoadAverage();
  // The load generator's CPU and counters are read at the same instants as the aggregator's CPU:
  // the /metrics renders and their parsing stay out of the window.
  Snapshot s0;
  ReadMetrics(agg, s0);
  const absl::Time window_start = absl::Now();
  driver.SetWindow(window_start, absl::InfiniteFuture());
  const int64_t failed0 = totals.failed.load();
  const uint64_t skipped0 = totals.skipped.load();
  const uint64_t sent0 = totals.batches_sent.load();
  const uint64_t acked0 = totals.batches_acked.load();
  ReadProcess(agg, s0);
  const double self_cpu0 = ringside::bench::ProcCpuSeconds(getpid());
  const long self_switches0 = ringside::bench::ContextSwitches(getpid());
  absl::SleepFor(absl::GetFlag(FLAGS_duration));
  const double self_cpu1 = ringside::bench::ProcCpuSeconds(getpid());
  const long self_switches1 = ringside::bench::ContextSwitches(getpid());
  Snapshot s1;
  ReadProcess(agg, s1);
  const uint64_t sent1 = totals.batches_sent.load();
  const uint64_t acked1 = totals.batches_acked.load();
  const uint64_t skipped1 = totals.skipped.load();
  const absl::Time window_end = absl::Now();
  driver.SetWindow(window_start, window_end);
  ReadMetrics(agg, s1);
  const int64_t failed_window = totals.failed.load() - failed0;
  std::printf("  load average at the window's start: %s\n", load_start.c_str());
  std::printf("  load average at the window's end: %s\n", LoadAverage().c_str());
  const std::string metrics = ringside::bench::HttpGet(agg.http_port(), "/metrics");
  PrintProcess("aggregator at the end:", agg.pid());
  PrintProcess("load generator at the end:", getpid());
  driver.StopPacing();
  const Driver::Stats ps = driver.stats();
  const uint64_t unacked = Drain(totals);

  const double wall = absl::ToDoubleSeconds(s1.cpu_at - s0.cpu_at);
  const double cpu = s1.cpu - s0.cpu;
  // Samples accepted and messages over the metrics window, scaled to the CPU window.
  const double scale = wall / absl::ToDoubleSeconds(s1.metrics_at - s0.metrics_at);
  const double accepted = ((s1.received - s1.rejected) - (s0.received - s0.rejected)) * scale;
  const double rejected = s1.rejected - s0.rejected;
  // Offered over the window as the pacer saw it (its ends are within microseconds of the CPU's).
  const double window_s = absl::ToDoubleSeconds(window_end - window_start);
  const double offered = static_cast<double>(sent1 - sent0) * n_series * wall / window_s;
  const double series = ringside::bench::Metric(metrics, "ringside_aggregator_series");
  const double state = ringside::bench::Metric(metrics, "ringside_aggregator_series_state_bytes");
  const double total_series = 1.0 * n_agents * n_series;
  const double period_ms = 1e3 / rate;
  const double late_ms = period_ms / 100;  // "late": more than 1 % of an interval behind
  const uint64_t late = static_cast<uint64_t>(
      ps.lag_us.end() - std::upper_bound(ps.lag_us.begin(), ps.lag_us.end(),
                                         static_cast<int64_t>(late_ms * 1e3)));
  std::printf("  window %.1f s: batches sent %llu, acked %llu, late %llu (not sent: the agent's "
              "previous write still in flight)\n",
              wall, static_cast<unsigned long long>(sent1 - sent0),
              static_cast<unsigned long long>(acked1 - acked0),
              static_cast<unsigned long long>(skipped1 - skipped0));
  std::printf("  pacing                      %llu batches due in %.1f s, %llu sent; behind "
              "schedule p50 %.2f ms, p99 %.2f ms, max %.1f ms; %llu sent more than %.3g ms late\n",
              static_cast<unsigned long long>(ps.due), window_s,
              static_cast<unsigned long long>(ps.sent), Percentile(ps.lag_us, 0.5) / 1e3,
              Percentile(ps.lag_us, 0.99) / 1e3,
              ps.lag_us.empty() ? 0.0 : ps.lag_us.back() / 1e3, static_cast<unsigned long long>(late),
              late_ms);
  std::printf("  samples offered             %.3f M/s = %.1f %% of the %.3f M/s target\n",
              offered / wall / 1e6, 100 * offered / wall / target, target / 1e6);
  std::printf("  samples accepted            %.0f (%.3f M/s over %.1f s of /metrics; rejected %.0f; "
              "acked in the CPU window %.3f M/s)\n",
              accepted / scale, accepted / wall / 1e6,
              absl::ToDoubleSeconds(s1.metrics_at - s0.metrics_at), rejected,
              static_cast<double>(acked1 - acked0) * n_series / wall / 1e6);
  std::printf("  aggregator CPU              %.2f s = %.1f %% of one core; %s\n", cpu,
              100 * cpu / wall, FaultCost(FaultsBetween(s0.faults, s1.faults), page_us).c_str());
  // Also per sample acked: acks are read at the CPU window's instants, where the /metrics
  // counters come from renders that take a second or more at thousands of nodes.
  const double acked_samples = static_cast<double>(acked1 - acked0) * n_series;
  std::printf("  aggregator CPU per sample   %.1f ns (per sample acked in the CPU window: %.1f ns)\n",
              accepted > 0 ? cpu / accepted * 1e9 : -1,
              acked_samples > 0 ? cpu / acked_samples * 1e9 : -1);
  const double messages = (s1.messages - s0.messages) * scale;
  std::printf("  aggregator per message      %.1f us CPU, %.2f context switches (%.0f messages)\n",
              messages > 0 ? cpu / messages * 1e6 : -1,
              messages > 0 ? (s1.switches - s0.switches) / messages : -1, messages);
  const double self = self_cpu1 - self_cpu0;
  const double batches = static_cast<double>(sent1 - sent0);
  std::printf("  load generator CPU          %.1f %% of one core = %.1f %% per M samples/s offered "
              "(%.1f ns a sample, %.1f us and %.2f context switches a batch); driver threads "
              "%.1f %% while pacing\n",
              100 * self / wall, offered > 0 ? 100 * self / (offered / 1e6) : -1,
              offered > 0 ? self / offered * 1e9 : -1, batches > 0 ? self / batches * 1e6 : -1,
              batches > 0 ? (self_switches1 - self_switches0) / batches : -1,
              ps.run_s > 0 ? 100 * ps.thread_cpu_s / ps.run_s : -1);
  std::printf("  aggregator RSS              %.1f MiB empty, %.1f MiB at the window's end\n",
              rss_empty / 1024.0, s1.rss_kib / 1024.0);
  std::printf("  RSS growth per series       %.1f bytes (%.0f series; state gauge %.1f bytes a "
              "series)\n",
              (s1.rss_kib - rss_empty) * 1024.0 / total_series, series,
              series > 0 ? state / series : -1);
  std::printf("  RSS growth per node         %.1f KiB\n",
              (s1.rss_kib - rss_empty) / static_cast<double>(n_agents));
  std::printf("  after the window            %llu batches sent and not acked (30 s allowed)\n",
              static_cast<unsigned long long>(unacked));

  AdmissionResult again;
  if (absl::GetFlag(FLAGS_reconnect) && totals.failed.load() == 0) {
    if (!ringside::bench::CloseAll(totals, fleet)) {
      std::fprintf(stderr, "streams did not end; exiting without cleanup\n");
      _exit(1);
    }
    again = AdmitAndReport("reconnect:", totals, fleet, driver, agg, /*batches=*/true, n_series,
                           page_us);
  }
  const int64_t failed = totals.failed.load();
  const std::string failures = totals.FailureSummary();
  if (!ringside::bench::CloseAll(totals, fleet)) {
    std::fprintf(stderr, "streams did not end; exiting without cleanup\n");
    _exit(1);
  }
  agg.Stop();

  // The verdict: a figure only counts when the load it describes was offered and taken.
  std::vector<std::string> invalid;
  if (offered < 0.99 * target * wall) {
    invalid.push_back(absl::StrFormat(
        "offered %.3f M of %.3f M samples/s (%.1f %%): the load generator fell behind (%llu "
        "batches not sent, lag p99 %.1f ms, max %.1f ms)",
        offered / wall / 1e6, target / 1e6, 100 * offered / wall / target,
        static_cast<unsigned long long>(ps.due - ps.sent), Percentile(ps.lag_us, 0.99) / 1e3,
        ps.lag_us.empty() ? 0.0 : ps.lag_us.back() / 1e3));
  }
  if (failed > 0) {
    invalid.push_back(absl::StrCat(failed, " streams failed (", failed_window,
                                   " in the window): ", failures));
  }
  if (unacked > 0) invalid.push_back(absl::StrCat(unacked, " batches sent were never acked"));
  if (rejected > 0) invalid.push_back(absl::StrCat(rejected, " samples rejected in the window"));
  if (absl::GetFlag(FLAGS_reconnect) && again.admitted < n_agents) {
    invalid.push_back(absl::StrCat("reconnect: ", again.admitted, " of ", n_agents,
                                   " streams admitted"));
  }
  for (const std::string& why : invalid) std::printf("  NOT A VALID RUN: %s\n", why.c_str());
  return invalid.empty() ? 0 : 1;
}

int RunIdle() {
  const int n = absl::GetFlag(FLAGS_idle_streams);
  const int n_series = std::max(0, absl::GetFlag(FLAGS_idle_series));
  std::printf("ringside-shard-capacity-bench (issue #14): %d idle streams, %d series defined each, "
              "detectors %s\n",
              n, n_series, absl::GetFlag(FLAGS_detect) ? "on" : "off");
  const SeriesShape shape(n_series, absl::GetFlag(FLAGS_defs_by_reference));
  if (n_series > 0) {
    // What the aggregator's session holds while this is its last message: the parsed definitions.
    ringside::v1::AgentMessage parsed;
    parsed.ParseFromArray(shape.defs.begin(), static_cast<int>(shape.defs.size()));
    std::printf("  one SeriesDefs message: %zu bytes on the wire, %zu bytes parsed "
                "(protobuf SpaceUsedLong)\n",
                shape.defs.size(), static_cast<size_t>(parsed.SpaceUsedLong()));
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
  LoadTotals totals;
  Fleet fleet;
  for (int a = 0; a < n; ++a) {
    fleet.agents.push_back(std::make_unique<SimAgent>(a, &shape, /*batches=*/false));
  }
  Driver driver(absl::GetFlag(FLAGS_pacers) > 0 ? absl::GetFlag(FLAGS_pacers) : 1);
  const AdmissionResult r =
      AdmitAndReport("admission:", totals, fleet, driver, agg, /*batches=*/false, n_series,
                     ringside::bench::PageTouchMicros());
  if (r.admitted < n) {
    std::printf("  streams failed: %lld (%s)\n", static_cast<long long>(totals.failed.load()),
                totals.FailureSummary().c_str());
    PrintProcess("aggregator:", agg.pid());
    PrintProcess("load generator:", getpid());
    if (!ringside::bench::CloseAll(totals, fleet)) _exit(1);
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
  const std::string failures = totals.FailureSummary();
  if (!ringside::bench::CloseAll(totals, fleet)) _exit(1);
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
  if (failed > 0) std::printf("  NOT A VALID RUN: %lld streams failed: %s\n",
                              static_cast<long long>(failed), failures.c_str());
  return failed > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args = ringside::daemon::NormalizeFlagNames(argc, argv);
  std::vector<char*> argp = ringside::daemon::ArgvPointers(args);
  absl::ParseCommandLine(static_cast<int>(args.size()), argp.data());
  setvbuf(stdout, nullptr, _IOLBF, 0);
  // gRPC's locks are absl::Mutex, whose deadlock detection (on in Debian's build) took 5 % of the
  // load generator's CPU in GraphCycles::GetId (perf, 2,048 agents at 1 Hz).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return absl::GetFlag(FLAGS_idle_streams) > 0 ? RunIdle() : RunPaced();
}
