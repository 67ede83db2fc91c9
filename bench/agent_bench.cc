// ringside-agent-bench: what sampling a DGX-class node costs the agent, measured side by side with
// Debian's prometheus-node-exporter reading the same tree (issue #2).
//
//   (a) N cycles of Sampler::RunOnce back to back: CPU per cycle and per value (status kOk).
//   (b) the real Sampler::Run schedule at --interval (100 Hz) for --duration: process CPU in % of
//       one core, cycles, overruns, cycle wall times.
//   (c) prometheus-node-exporter --collector.disable-defaults --collector.infiniband
//       --path.sysfs=<tree> as a child process on 127.0.0.1, scraped M times: its CPU (utime+stime
//       from /proc/<pid>/stat) per scrape and per node_infiniband_* sample exported.
//   (d) ringside's own /metrics rendering of one snapshot (families + text format, no HTTP), for
//       the per-scrape view.
//   (e) the floor: the same files pread by a bare loop (no parsing), back to back and at
//       --interval, to show how much of (a) and (b) is the kernel's and how much ringside's.
//   (f) issue #3: (a) with the agent's two other collectors added to the same Sampler: NVML
//       (the fake libnvidia-ml.so.1 the tests build, 8 Hopper GPUs x 18 NVLinks) and ethtool (the
//       `ethtool -S` dumps of two PFC-enabled mlx5 ports, one per RoCE netdev of the tree): CPU per
//       value for the whole agent and per collector, and the floors of the two new sources (the
//       same NVML calls in a bare loop; the dumps read without parsing). Skipped, with a message,
//       without the fake library (a build without RINGSIDE_BUILD_TESTS) or the capture.
// The phases that are compared run in --rounds blocks, interleaved ((a), (f), (c), (e) back to
// back; then (b) and (e) on the schedule), so that both sides of each ratio see the same load.
// Prints a table (or --json) and whether the goals hold: node_exporter CPU per value / ringside
// CPU per value >= 20 (for (a) and for (f)), and 100 Hz sampling under 2 % of one core. See
// bench/README.md and docs/benchmarks.md. Every loop is bounded in count and time; traffic goes
// only to 127.0.0.1.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/gpu_nic_inputs.h"
#include "bench/source_floors.h"
#include "bench/timed_collector.h"
#include "collectors/common/series.h"
#include "collectors/ethtool/ethtool_collector.h"
#include "collectors/infiniband/infiniband_collector.h"
#include "collectors/netdev/netdev_collector.h"
#include "collectors/nvml/nvml_collector.h"
#include "daemon/agent/exposition.h"
#include "daemon/agent/sampler.h"
#include "daemon/common/flags.h"
#include "daemon/common/json.h"
#include "prometheus/text_serializer.h"
#include "sim/sysfs_tree.h"

ABSL_FLAG(std::string, tree, "",
          "Folder that stands for /sys. Empty: generate the DGX-class tree in a temporary folder "
          "and remove it afterwards. A folder that already has class/infiniband is used as it "
          "is; otherwise the tree is generated there and kept.");
ABSL_FLAG(int32_t, cycles, 2000, "(a) RunOnce cycles to time back to back.");
ABSL_FLAG(absl::Duration, interval, absl::Milliseconds(10), "(b) Sampler::Run interval.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "(b) How long to run the schedule.");
ABSL_FLAG(int32_t, scrapes, 200, "(c) Scrapes of node_exporter (and (d) renderings).");
ABSL_FLAG(std::string, node_exporter, "/usr/bin/prometheus-node-exporter",
          "node_exporter binary; empty to skip (c).");
ABSL_FLAG(bool, lean_variant, true,
          "(c) Also measure node_exporter with --web.disable-exporter-metrics (no go_*/process_* "
          "metrics of its own), as a second, leaner reference.");
ABSL_FLAG(int32_t, rounds, 5,
          "Each phase runs in this many blocks, interleaved with the phases it is compared with "
          "((a) with (c) and (e); (b) with (e)), so both sides of a ratio see the same load.");
ABSL_FLAG(bool, json, false, "Print one JSON object instead of the table.");

// (f), issue #3. The defaults come from the build: the fake NVML of tests/ and the shared capture.
#ifndef RINGSIDE_BENCH_FAKE_NVML
#define RINGSIDE_BENCH_FAKE_NVML ""  // built without tests: no fake library
#endif
#ifndef RINGSIDE_BENCH_ETHTOOL_CAPTURE
#define RINGSIDE_BENCH_ETHTOOL_CAPTURE ""
#endif
ABSL_FLAG(bool, nvlink_ethtool, true,
          "(f) Also measure the agent with its NVML and ethtool collectors added (issue #3).");
ABSL_FLAG(std::string, nvml_library, RINGSIDE_BENCH_FAKE_NVML,
          "(f) The fake libnvidia-ml.so.1 (tests/fake_nvml, configured by the bench); empty: skip "
          "(f). The default is the build's own, when it builds the tests.");
ABSL_FLAG(std::string, ethtool_capture, RINGSIDE_BENCH_ETHTOOL_CAPTURE,
          "(f) A real mlx5 `ethtool -S` capture; each RoCE netdev gets it plus the PFC counters.");

namespace ringside::bench {
namespace {

constexpr double kGoalRatio = 20.0;      // node_exporter CPU per value / ringside CPU per value
constexpr double kGoalCpuPercent = 2.0;  // of one core, at 100 Hz
constexpr absl::Duration kPhaseCap = absl::Minutes(5);             // no phase runs longer than this
constexpr absl::Duration kRediscoverInterval = absl::Seconds(30);  // the agent's default
constexpr absl::Duration kHttpTimeout = absl::Seconds(10);
constexpr absl::Duration kExporterStartTimeout = absl::Seconds(15);
constexpr size_t kMaxResponseBytes = 64 << 20;
constexpr int kGpus = 8;      // (f): a DGX H100's GPUs ...
constexpr int kNvlinks = 18;  // ... and NVLinks per GPU

// ---------------------------------------------------------------------------------------------
// Clocks.

struct Cpu {
  double total_s = 0;  // CLOCK_PROCESS_CPUTIME_ID: every thread of this process
  double user_s = 0;   // getrusage, µs resolution
  double sys_s = 0;
  absl::Time wall;
};

Cpu ProcessCpu() {
  Cpu c;
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  c.total_s = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  c.user_s = static_cast<double>(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec * 1e-6;
  c.sys_s = static_cast<double>(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec * 1e-6;
  c.wall = absl::Now();
  return c;
}

struct CpuDelta {
  double cpu_s = 0, user_s = 0, sys_s = 0, wall_s = 0;
  CpuDelta& operator+=(const CpuDelta& o) {
    cpu_s += o.cpu_s;
    user_s += o.user_s;
    sys_s += o.sys_s;
    wall_s += o.wall_s;
    return *this;
  }
};

CpuDelta Since(const Cpu& a) {
  Cpu b = ProcessCpu();
  return CpuDelta{b.total_s - a.total_s, b.user_s - a.user_s, b.sys_s - a.sys_s,
                  absl::ToDoubleSeconds(b.wall - a.wall)};
}

// ---------------------------------------------------------------------------------------------
// The DGX-class tree: 8 InfiniBand mlx5 HCAs (mlx5_0..7) and 2 RoCE functions (mlx5_8/9) with
// their netdevs, every counter non-zero and in the range a busy training node shows.

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Between(uint64_t& rng, double lo, double hi) {
  const auto l = static_cast<uint64_t>(lo), h = static_cast<uint64_t>(hi);
  return l + SplitMix64(rng) % (h - l + 1);
}

uint64_t RealisticValue(absl::string_view name, uint64_t& rng) {
  // IB PMA counters (data in 4-byte words; narrow error counters stay below their widths).
  if (name == "port_rcv_data" || name == "port_xmit_data") return Between(rng, 3e12, 9e13);
  if (name == "port_rcv_packets" || name == "port_xmit_packets" ||
      absl::StartsWith(name, "unicast_")) {
    return Between(rng, 1e9, 5e10);
  }
  if (absl::StartsWith(name, "multicast_")) return Between(rng, 1e4, 1e6);
  if (name == "port_xmit_wait") return Between(rng, 1e7, 4e9);
  if (name == "symbol_error") return Between(rng, 1, 200);
  if (name == "link_downed" || name == "link_error_recovery") return Between(rng, 1, 4);
  if (name == "local_link_integrity_errors" || name == "excessive_buffer_overrun_errors") {
    return Between(rng, 1, 3);  // 4-bit
  }
  if (name == "port_rcv_constraint_errors" || name == "port_xmit_constraint_errors") {
    return Between(rng, 1, 50);  // 8-bit
  }
  // mlx5 hw_counters.
  if (name == "rx_write_requests" || name == "rx_read_requests") return Between(rng, 1e8, 4e9);
  if (name == "rx_atomic_requests" || name == "rx_dct_connect") return Between(rng, 1e3, 1e6);
  if (name == "np_ecn_marked_roce_packets" || name == "np_cnp_sent" || name == "rp_cnp_handled") {
    return Between(rng, 1e5, 1e9);
  }
  if (name == "rp_cnp_ignored") return Between(rng, 1, 10);
  if (name == "out_of_sequence" || name == "packet_seq_err" || name == "local_ack_timeout_err" ||
      name == "duplicate_request" || name == "roce_adp_retrans") {
    return Between(rng, 1e2, 1e5);
  }
  // netdev statistics.
  if (absl::EndsWith(name, "_bytes")) return Between(rng, 1e13, 1e15);
  if (absl::EndsWith(name, "_packets")) return Between(rng, 1e9, 1e11);
  if (name == "multicast") return Between(rng, 1e4, 1e6);
  return Between(rng, 1, 1000);  // other error, drop and discard counters
}

struct TreeShape {
  int ib_hcas = 0;
  int roce_functions = 0;
  std::vector<std::string> netdevs;
};

absl::StatusOr<TreeShape> WriteDgxTree(const std::string& root) {
  sim::SysfsTreeWriter w(root);
  // PCI functions of a DGX H100's eight compute ConnectX-7 and its dual-port storage card.
  static const char* kIbPci[] = {"0000:18:00.0", "0000:40:00.0", "0000:4f:00.0", "0000:5e:00.0",
                                 "0000:9a:00.0", "0000:c0:00.0", "0000:ce:00.0", "0000:dc:00.0"};
  struct Roce {
    const char* pci;
    const char* netdev;
  };
  static const Roce kRoce[] = {{"0000:aa:00.0", "ens1f0np0"}, {"0000:aa:00.1", "ens1f1np1"}};

  TreeShape shape;
  std::vector<sim::HcaSpec> hcas;
  for (int i = 0; i < 8; ++i) {
    sim::HcaSpec s;
    s.name = absl::StrCat("mlx5_", i);
    s.pci = kIbPci[i];
    s.link_layer = "InfiniBand";
    s.rate = "400 Gb/sec (4X NDR)";
    s.node_guid = absl::StrFormat("b83f:d203:00a1:%04x", 0x10 + i);
    hcas.push_back(s);
    ++shape.ib_hcas;
  }
  for (int i = 0; i < 2; ++i) {
    sim::HcaSpec s;
    s.name = absl::StrCat("mlx5_", 8 + i);
    s.pci = kRoce[i].pci;
    s.link_layer = "Ethernet";
    s.rate = "400 Gb/sec (4X NDR)";
    s.netdev = kRoce[i].netdev;
    s.node_guid = absl::StrFormat("a088:c203:00b2:%04x", 0x20 + i);
    hcas.push_back(s);
    ++shape.roce_functions;
    shape.netdevs.push_back(s.netdev);
  }

  uint64_t rng = 0x5eed2024;
  for (const sim::HcaSpec& s : hcas) {
    if (absl::Status st = w.AddHca(s); !st.ok()) return st;
    for (int port = 1; port <= s.ports; ++port) {
      for (const std::string& c : sim::Mlx5PmaCounterNames()) {
        if (absl::Status st = w.SetIbCounter(s.name, port, c, RealisticValue(c, rng)); !st.ok()) {
          return st;
        }
      }
      if (!s.hw_counters) continue;
      for (const std::string& c : sim::Mlx5HwCounterNames(s.congestion_counters)) {
        if (c == "lifespan") continue;  // stays the kernel default, 10 ms
        if (absl::Status st = w.SetHwCounter(s.name, port, c, RealisticValue(c, rng)); !st.ok()) {
          return st;
        }
      }
    }
  }
  for (const std::string& nd : shape.netdevs) {
    for (const std::string& stat : sim::NetdevStatisticNames()) {
      if (absl::Status st = w.SetNetdevStat(nd, stat, RealisticValue(stat, rng)); !st.ok()) {
        return st;
      }
    }
    for (const auto& [attr, value] : {std::pair<const char*, const char*>{"carrier_changes", "5\n"},
                                      {"carrier_up_count", "3\n"},
                                      {"carrier_down_count", "2\n"}}) {
      if (absl::Status st = w.SetNetdevAttr(nd, attr, value); !st.ok()) return st;
    }
  }
  return shape;
}

// ---------------------------------------------------------------------------------------------
// ringside: the agent's two collectors behind a Sampler, as daemon/agent/main.cc builds them.
//
// The phases run in blocks, interleaved round by round with the phases they are compared with, so
// that both sides of a ratio see the same background load.

std::vector<std::unique_ptr<collectors::Collector>> SysfsCollectors(const std::string& root) {
  collectors::InfinibandOptions ib;
  ib.sysfs_root = root;
  ib.rediscover_interval = kRediscoverInterval;
  collectors::NetdevOptions nd;
  nd.sysfs_root = root;
  nd.rediscover_interval = kRediscoverInterval;
  std::vector<std::unique_ptr<collectors::Collector>> cs;
  cs.push_back(std::make_unique<collectors::InfinibandCollector>(ib));
  cs.push_back(std::make_unique<collectors::NetdevCollector>(nd));
  return cs;
}

std::unique_ptr<daemon::Sampler> NewSampler(std::vector<std::unique_ptr<collectors::Collector>> cs,
                                            absl::Duration interval) {
  daemon::SamplerOptions so;
  so.node = "bench-node";
  so.interval = interval;
  return std::make_unique<daemon::Sampler>(so, std::move(cs));
}

std::unique_ptr<daemon::Sampler> MakeSampler(const std::string& root, absl::Duration interval) {
  return NewSampler(SysfsCollectors(root), interval);
}

// (f) What the NVML and ethtool collectors read: the fake NVML configured for kGpus x kNvlinks,
// and one mlx5 dump per RoCE netdev of the tree.
struct GpuNicInputs {
  std::string nvml_library;
  std::string nvml_config;
  std::string capture;
  std::string dump_dir;
  std::vector<std::string> netdevs;
  size_t stats_per_netdev = 0, stats_from_capture = 0;
};

// Skipped (FailedPrecondition, with the message to print) when an input is missing: no fake
// library (tests not built), or no capture. Other errors are failures.
absl::StatusOr<GpuNicInputs> PrepareGpuNicInputs(const std::string& root, const std::string& work) {
  GpuNicInputs in;
  in.nvml_library = absl::GetFlag(FLAGS_nvml_library);
  in.capture = absl::GetFlag(FLAGS_ethtool_capture);
  std::error_code ec;
  if (in.nvml_library.empty()) {
    return absl::FailedPreconditionError(
        std::string(RINGSIDE_BENCH_FAKE_NVML).empty()
            ? "no fake NVML library: this build has no tests (RINGSIDE_BUILD_TESTS=OFF); build "
              "the fake_nvml target and pass --nvml-library=<build>/tests/fake_nvml/complete/"
              "libnvidia-ml.so.1"
            : "--nvml-library is empty");
  }
  if (!std::filesystem::exists(in.nvml_library, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("no fake NVML library at ", in.nvml_library,
                     " (build the fake_nvml target, or pass --nvml-library)"));
  }
  if (in.capture.empty() || !std::filesystem::exists(in.capture, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("no mlx5 ethtool capture at \"", in.capture, "\" (--ethtool-capture)"));
  }
  in.netdevs = RoceNetdevs(root);
  if (in.netdevs.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("the tree ", root, " has no RoCE netdevs"));
  }
  in.nvml_config = work + "/fake_nvml.conf";
  if (absl::Status s = WriteFakeNvmlConfig(in.nvml_config, kGpus, kNvlinks); !s.ok()) return s;
  // The fake reads its config once and answers from memory (see tests/fake_nvml/fake_nvml.cc).
  ::setenv("RINGSIDE_FAKE_NVML_CONFIG", in.nvml_config.c_str(), 1);
  ::setenv("RINGSIDE_FAKE_NVML_STATIC", "1", 1);
  ::unsetenv("RINGSIDE_FAKE_NVML_JOURNAL");
  absl::StatusOr<EthtoolDump> dump = Mlx5PfcDump(in.capture);
  if (!dump.ok()) return dump.status();
  in.stats_per_netdev = dump->names.size();
  in.stats_from_capture = dump->from_capture;
  in.dump_dir = work + "/ethtool";
  if (absl::Status s = WriteEthtoolDumps(in.dump_dir, in.netdevs, *dump); !s.ok()) return s;
  return in;
}

// The agent's four collectors in daemon/agent/main.cc's order, each behind a TimedCollector
// (listed in `timed`, owned by the sampler).
std::unique_ptr<daemon::Sampler> MakeAgentSampler(const std::string& root, const GpuNicInputs& in,
                                                  absl::Duration interval,
                                                  std::vector<const TimedCollector*>& timed) {
  std::vector<std::unique_ptr<collectors::Collector>> cs = SysfsCollectors(root);
  collectors::EthtoolOptions eth;
  eth.sysfs_root = root;
  eth.source.kind = collectors::EthtoolSource::Kind::kDir;
  eth.source.dir = in.dump_dir;
  eth.rediscover_interval = kRediscoverInterval;
  cs.push_back(std::make_unique<collectors::EthtoolCollector>(eth));
  collectors::NvmlOptions nv;
  nv.library = in.nvml_library;
  nv.rediscover_interval = kRediscoverInterval;
  cs.push_back(std::make_unique<collectors::NvmlCollector>(nv));
  timed.clear();
  for (auto& c : cs) {
    auto t = std::make_unique<TimedCollector>(std::move(c));
    timed.push_back(t.get());
    c = std::move(t);
  }
  return NewSampler(std::move(cs), interval);
}

struct ValueCounts {
  size_t series = 0, ok = 0, unavailable = 0, error = 0;
  std::vector<std::pair<std::string, size_t>> ok_by_collector;
};

ValueCounts CountValues(const daemon::AgentSnapshot& snap) {
  ValueCounts c;
  for (const collectors::CollectorSnapshot& cs : snap.collectors) {
    size_t ok = 0;
    for (const collectors::Value& v : cs.values) {
      ++c.series;
      if (v.status == collectors::ValueStatus::kOk) ++ok;
      if (v.status == collectors::ValueStatus::kUnavailable) ++c.unavailable;
      if (v.status == collectors::ValueStatus::kError) ++c.error;
    }
    c.ok += ok;
    c.ok_by_collector.emplace_back(cs.collector, ok);
  }
  return c;
}

uint64_t ReadErrorsTotal(const daemon::AgentSnapshot& snap) {
  uint64_t n = 0;
  for (const daemon::CollectorHealth& h : snap.health) n += h.read_errors_total;
  return n;
}

// One collector's share of (f).
struct CollectorCost {
  std::string name;
  size_t values_ok = 0;  // per cycle
  double cpu_per_cycle_s = 0, cpu_per_value_s = 0;
};

struct CyclesResult {
  int cycles = 0;
  ValueCounts values;                       // of the last cycle
  std::vector<CollectorCost> by_collector;  // with TimedCollectors only
  uint64_t read_errors = 0;                 // over all timed cycles
  CpuDelta cpu;                             // of the timed cycles
  double first_cycle_cpu_s = 0;  // discovery (listing, attribute reads, opens) plus one read
  double cpu_per_cycle_s = 0, cpu_per_value_s = 0, wall_per_cycle_s = 0;
  double discovery_cpu_s = 0;  // first cycle minus a steady one
};

// (a) Sampler::RunOnce back to back.
class CyclesPhase {
 public:
  // `timed`: the sampler's collectors, when they are TimedCollectors, for the split by collector.
  explicit CyclesPhase(std::unique_ptr<daemon::Sampler> sampler,
                       std::vector<const TimedCollector*> timed = {})
      : sampler_(std::move(sampler)), timed_(std::move(timed)), timed_ns_(timed_.size(), 0) {}

  // The first cycle discovers: lists the folders, reads the attributes, opens every file.
  void Warm() {
    Cpu start = ProcessCpu();
    last_ = sampler_->RunOnce();
    first_cycle_cpu_s_ = Since(start).cpu_s;
    errors_at_start_ = ReadErrorsTotal(*last_);
  }

  void Block(int cycles, absl::Time deadline) {
    std::vector<int64_t> before;
    for (const TimedCollector* t : timed_) before.push_back(t->cpu_ns());
    Cpu start = ProcessCpu();
    for (int i = 0; i < cycles; ++i) {
      last_ = sampler_->RunOnce();
      ++cycles_;
      if ((i & 63) == 63 && absl::Now() > deadline) break;
    }
    cpu_ += Since(start);
    for (size_t k = 0; k < timed_.size(); ++k) timed_ns_[k] += timed_[k]->cpu_ns() - before[k];
  }

  const daemon::AgentSnapshot& last() const { return *last_; }

  CyclesResult Result() const {
    CyclesResult r;
    r.cycles = cycles_;
    r.cpu = cpu_;
    r.first_cycle_cpu_s = first_cycle_cpu_s_;
    r.values = CountValues(*last_);
    r.read_errors = ReadErrorsTotal(*last_) - errors_at_start_;
    if (cycles_ > 0) {
      r.cpu_per_cycle_s = cpu_.cpu_s / cycles_;
      r.wall_per_cycle_s = cpu_.wall_s / cycles_;
    }
    if (r.values.ok > 0) r.cpu_per_value_s = r.cpu_per_cycle_s / static_cast<double>(r.values.ok);
    r.discovery_cpu_s = std::max(0.0, r.first_cycle_cpu_s - r.cpu_per_cycle_s);
    for (size_t k = 0; k < timed_.size() && k < r.values.ok_by_collector.size(); ++k) {
      CollectorCost c;
      c.name = r.values.ok_by_collector[k].first;
      c.values_ok = r.values.ok_by_collector[k].second;
      if (cycles_ > 0) c.cpu_per_cycle_s = static_cast<double>(timed_ns_[k]) * 1e-9 / cycles_;
      if (c.values_ok > 0) c.cpu_per_value_s = c.cpu_per_cycle_s / static_cast<double>(c.values_ok);
      r.by_collector.push_back(std::move(c));
    }
    return r;
  }

 private:
  std::unique_ptr<daemon::Sampler> sampler_;
  std::vector<const TimedCollector*> timed_;
  std::vector<int64_t> timed_ns_;  // CPU in each collector over the timed blocks
  std::shared_ptr<const daemon::AgentSnapshot> last_;
  double first_cycle_cpu_s_ = 0;
  uint64_t errors_at_start_ = 0;
  int cycles_ = 0;
  CpuDelta cpu_;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct ScheduleResult {
  absl::Duration interval;
  CpuDelta cpu;
  uint64_t cycles = 0, expected_cycles = 0, overruns = 0;
  double cpu_percent = 0;          // of one core, measured
  double rediscovery_percent = 0;  // one discovery per kRediscoverInterval, amortized
  double cycle_wall_p50_s = 0, cycle_wall_p99_s = 0, cycle_wall_max_s = 0;
};

// (b) The real Sampler::Run schedule.
class SchedulePhase {
 public:
  SchedulePhase(const std::string& root, absl::Duration interval, absl::Duration total)
      : interval_(interval), sampler_(MakeSampler(root, interval)) {
    walls_.reserve(static_cast<size_t>(total / interval) + 64);
  }

  // Discovery happens here, outside the measured window (see rediscovery_percent).
  void Warm() { last_ = sampler_->RunOnce(); }

  void Block(absl::Duration d) {
    const uint64_t overruns_before = last_->overruns_total;
    uint64_t overruns_after = overruns_before;
    absl::Notification stop;
    Cpu start = ProcessCpu();
    std::thread stopper([&stop, d] {
      absl::SleepFor(d);
      stop.Notify();
    });
    sampler_->Run(stop, [&](const std::shared_ptr<const daemon::AgentSnapshot>& snap) {
      absl::Duration wall;
      for (const collectors::CollectorSnapshot& cs : snap->collectors) wall += cs.duration;
      if (walls_.size() < walls_.capacity()) walls_.push_back(absl::ToDoubleSeconds(wall));
      ++cycles_;
      overruns_after = snap->overruns_total;
      last_ = snap;
    });
    cpu_ += Since(start);
    stopper.join();
    expected_ += static_cast<uint64_t>(d / interval_);
    overruns_ += overruns_after - overruns_before;
  }

  ScheduleResult Result(double discovery_cpu_s) const {
    ScheduleResult r;
    r.interval = interval_;
    r.cpu = cpu_;
    r.cycles = cycles_;
    r.expected_cycles = expected_;
    r.overruns = overruns_;
    r.cpu_percent = cpu_.wall_s > 0 ? 100.0 * cpu_.cpu_s / cpu_.wall_s : 0;
    r.rediscovery_percent = 100.0 * discovery_cpu_s / absl::ToDoubleSeconds(kRediscoverInterval);
    r.cycle_wall_p50_s = Percentile(walls_, 0.50);
    r.cycle_wall_p99_s = Percentile(walls_, 0.99);
    r.cycle_wall_max_s = walls_.empty() ? 0 : *std::max_element(walls_.begin(), walls_.end());
    return r;
  }

 private:
  absl::Duration interval_;
  std::unique_ptr<daemon::Sampler> sampler_;
  std::shared_ptr<const daemon::AgentSnapshot> last_;
  std::vector<double> walls_;
  uint64_t cycles_ = 0, expected_ = 0, overruns_ = 0;
  CpuDelta cpu_;
};

struct RenderResult {
  int renders = 0;
  double cpu_per_render_s = 0;
  size_t bytes = 0, samples = 0;
};

// (d) What one scrape of the agent's /metrics costs it, without the HTTP server.
RenderResult RunRender(const daemon::AgentSnapshot& snap, int renders) {
  RenderResult r;
  prometheus::TextSerializer serializer;
  std::string text;
  daemon::ExpositionOptions options;
  options.version = "bench";
  const absl::Time deadline = absl::Now() + kPhaseCap;
  Cpu start = ProcessCpu();
  for (int i = 0; i < renders; ++i) {
    text = serializer.Serialize(daemon::SnapshotToFamilies(snap, options));
    ++r.renders;
    if (absl::Now() > deadline) break;
  }
  CpuDelta d = Since(start);
  if (r.renders > 0) r.cpu_per_render_s = d.cpu_s / r.renders;
  r.bytes = text.size();
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!line.empty() && line[0] != '#') ++r.samples;
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// (e) The floor: the files the two collectors read, each opened once and pread at offset 0 every
// cycle by a bare loop, with no parsing and no bookkeeping: what the kernel alone charges for one
// read per value on this machine, back to back and on the same schedule as (b).

std::vector<std::string> ValueFiles(const std::string& root) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  auto sorted_entries = [&](const fs::path& dir, bool dirs) {
    std::vector<std::string> names;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (dirs ? it->is_directory(ec) : it->is_regular_file(ec)) names.push_back(it->path());
    }
    std::sort(names.begin(), names.end());
    return names;
  };
  auto add_if_file = [&](const fs::path& f) {
    if (fs::is_regular_file(f, ec)) out.push_back(f);
  };
  for (const std::string& dev : sorted_entries(root + "/class/infiniband", true)) {
    for (const std::string& port : sorted_entries(dev + "/ports", true)) {
      for (const char* attr : {"state", "phys_state", "rate"}) add_if_file(port + "/" + attr);
      for (const char* sub : {"/counters", "/counters_ext", "/hw_counters"}) {
        for (std::string& f : sorted_entries(port + sub, false)) out.push_back(std::move(f));
      }
    }
  }
  for (const std::string& itf : sorted_entries(root + "/class/net", true)) {
    for (std::string& f : sorted_entries(itf + "/statistics", false)) out.push_back(std::move(f));
    for (const char* attr : {"carrier_changes", "carrier_up_count", "carrier_down_count",
                             "operstate", "speed", "mtu"}) {
      add_if_file(itf + "/" + attr);
    }
  }
  return out;
}

struct FloorResult {
  size_t files = 0;
  int hot_cycles = 0;
  double hot_cpu_per_cycle_s = 0;
  uint64_t timed_cycles = 0;
  double timed_cpu_per_cycle_s = 0, timed_cpu_percent = 0;
};

class FloorPhase {
 public:
  explicit FloorPhase(const std::string& root) {
    for (const std::string& f : ValueFiles(root)) {
      int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
      if (fd >= 0) fds_.push_back(fd);
    }
    ReadAll();  // warm-up
  }
  ~FloorPhase() {
    for (int fd : fds_) ::close(fd);
  }
  FloorPhase(const FloorPhase&) = delete;
  FloorPhase& operator=(const FloorPhase&) = delete;

  void HotBlock(int cycles, absl::Time deadline) {
    Cpu start = ProcessCpu();
    for (int i = 0; i < cycles; ++i) {
      ReadAll();
      ++hot_cycles_;
      if ((i & 63) == 63 && absl::Now() > deadline) break;
    }
    hot_ += Since(start);
  }

  // The fixed schedule Sampler::Run keeps: absolute wake-ups, missed slots skipped.
  void TimedBlock(absl::Duration interval, absl::Duration d) {
    const int64_t step_ns = absl::ToInt64Nanoseconds(interval);
    const absl::Time end = absl::Now() + d;
    const uint64_t max_cycles = static_cast<uint64_t>(d / interval) * 2 + 16;
    timespec next{};
    clock_gettime(CLOCK_MONOTONIC, &next);
    Cpu start = ProcessCpu();
    for (uint64_t n = 0; n < max_cycles && absl::Now() < end; ++n) {
      ReadAll();
      ++timed_cycles_;
      const int64_t ns = next.tv_nsec + step_ns;
      next.tv_sec += ns / 1000000000;
      next.tv_nsec = ns % 1000000000;
      timespec now{};
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec)) {
        next = now;
      }
      for (int k = 0;
           k < 3 && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr) == EINTR; ++k) {
      }
    }
    timed_ += Since(start);
  }

  FloorResult Result() const {
    FloorResult r;
    r.files = fds_.size();
    r.hot_cycles = hot_cycles_;
    r.hot_cpu_per_cycle_s = hot_.cpu_s / std::max(1, hot_cycles_);
    r.timed_cycles = timed_cycles_;
    if (timed_cycles_ > 0) r.timed_cpu_per_cycle_s = timed_.cpu_s / timed_cycles_;
    r.timed_cpu_percent = timed_.wall_s > 0 ? 100.0 * timed_.cpu_s / timed_.wall_s : 0;
    return r;
  }

 private:
  void ReadAll() {
    for (int fd : fds_) {
      ssize_t n = ::pread(fd, buf_, sizeof(buf_), 0);
      bytes_ += static_cast<uint64_t>(n > 0 ? n : 0);  // keeps the reads observable
    }
  }

  std::vector<int> fds_;
  char buf_[129];
  uint64_t bytes_ = 0;
  int hot_cycles_ = 0;
  uint64_t timed_cycles_ = 0;
  CpuDelta hot_, timed_;
};

// ---------------------------------------------------------------------------------------------
// (f) The floors of the two new sources, block by block next to (f): the NVML calls the collector
// makes, straight into the same library; the dumps read without parsing; a trivial ioctl.

struct SourceFloorResult {
  int cycles = 0;
  size_t nvml_calls_per_cycle = 0, nvml_ok_per_cycle = 0;
  double nvml_cpu_per_cycle_s = 0;
  size_t dump_bytes_per_cycle = 0;
  double dump_cpu_per_cycle_s = 0;
  double ioctl_ns = 0;  // CPU of one FIONREAD ioctl on a pipe, back to back
};

class SourceFloorPhase {
 public:
  SourceFloorPhase(std::unique_ptr<NvmlCallLoop> nvml, std::string dump_dir)
      : nvml_(std::move(nvml)), dumps_(std::move(dump_dir)) {
    nvml_ok_ = nvml_->Cycle();  // warm-up
    dump_bytes_ = dumps_.Cycle();
  }

  void Block(int cycles, absl::Time deadline) {
    Cpu start = ProcessCpu();
    int n = 0;
    for (; n < cycles; ++n) {
      nvml_ok_ = nvml_->Cycle();
      if ((n & 63) == 63 && absl::Now() > deadline) break;
    }
    nvml_cpu_s_ += Since(start).cpu_s;
    start = ProcessCpu();
    for (int i = 0; i < n; ++i) dump_bytes_ = dumps_.Cycle();
    dump_cpu_s_ += Since(start).cpu_s;
    cycles_ += n;
    ioctl_ns_sum_ += SyscallNanos(kIoctls);
    ++ioctl_blocks_;
  }

  SourceFloorResult Result() const {
    SourceFloorResult r;
    r.cycles = cycles_;
    r.nvml_calls_per_cycle = nvml_->calls_per_cycle();
    r.nvml_ok_per_cycle = nvml_ok_;
    r.dump_bytes_per_cycle = dump_bytes_;
    if (cycles_ > 0) {
      r.nvml_cpu_per_cycle_s = nvml_cpu_s_ / cycles_;
      r.dump_cpu_per_cycle_s = dump_cpu_s_ / cycles_;
    }
    if (ioctl_blocks_ > 0) r.ioctl_ns = ioctl_ns_sum_ / ioctl_blocks_;
    return r;
  }

 private:
  static constexpr int kIoctls = 2000;  // per block
  std::unique_ptr<NvmlCallLoop> nvml_;
  DumpReadLoop dumps_;
  size_t nvml_ok_ = 0, dump_bytes_ = 0;
  int cycles_ = 0, ioctl_blocks_ = 0;
  double nvml_cpu_s_ = 0, dump_cpu_s_ = 0, ioctl_ns_sum_ = 0;
};

// ---------------------------------------------------------------------------------------------
// node_exporter: a child process on 127.0.0.1, scraped with a plain HTTP/1.0 GET.

struct HttpResponse {
  int status = 0;
  std::string body;
};

absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect 127.0.0.1:", port, ": ", std::strerror(errno)));
  }
  // HTTP/1.0 and no Accept-Encoding: the server closes after the body and sends it uncompressed.
  const std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1:", port,
                                       "\r\nUser-Agent: ringside-agent-bench\r\n\r\n");
  size_t sent = 0;
  while (sent < req.size()) {
    if (absl::Now() > deadline) return absl::DeadlineExceededError("HTTP request too slow");
    ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[65536];
  for (;;) {
    if (absl::Now() > deadline) return absl::DeadlineExceededError("HTTP response too slow");
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    if (n == 0) break;
    raw.append(buf, static_cast<size_t>(n));
    if (raw.size() > kMaxResponseBytes) return absl::ResourceExhaustedError("response too big");
  }
  size_t header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos || !absl::StartsWith(raw, "HTTP/1.")) {
    return absl::DataLossError("not an HTTP response");
  }
  HttpResponse r;
  size_t sp = raw.find(' ');
  if (sp == std::string::npos || sp + 4 > raw.size() ||
      !absl::SimpleAtoi(absl::string_view(raw).substr(sp + 1, 3), &r.status)) {
    return absl::DataLossError("bad HTTP status line");
  }
  r.body = raw.substr(header_end + 4);
  return r;
}

absl::StatusOr<int> FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("bind 127.0.0.1:0: ", std::strerror(errno)));
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

// utime + stime of a process (all its threads, live and exited), in clock ticks.
absl::StatusOr<uint64_t> ProcessTicks(pid_t pid) {
  std::string text;
  {
    FILE* f = std::fopen(absl::StrCat("/proc/", pid, "/stat").c_str(), "re");
    if (f == nullptr) return absl::NotFoundError("no /proc/<pid>/stat");
    char buf[4096];
    size_t n = std::fread(buf, 1, sizeof(buf), f);
    std::fclose(f);
    text.assign(buf, n);
  }
  size_t paren = text.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return absl::DataLossError("bad /proc/<pid>/stat");
  std::vector<absl::string_view> f =
      absl::StrSplit(absl::string_view(text).substr(paren + 1), ' ', absl::SkipEmpty());
  // f[0] is field 3 (state); utime is field 14, stime field 15.
  uint64_t utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return absl::DataLossError("bad /proc/<pid>/stat fields");
  }
  return utime + stime;
}

// A child process killed (TERM, then KILL) when this goes out of scope; PR_SET_PDEATHSIG kills it
// if the bench itself dies.
class Child {
 public:
  static absl::StatusOr<std::unique_ptr<Child>> Start(const std::vector<std::string>& argv,
                                                      const std::string& log_path) {
    int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) return absl::InternalError(absl::StrCat("open ", log_path));
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) {
      ::close(log_fd);
      return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);
      int null_fd = ::open("/dev/null", O_RDONLY);
      if (null_fd >= 0) ::dup2(null_fd, 0);
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(log_fd);
    return std::unique_ptr<Child>(new Child(pid));
  }
  ~Child() { Stop(); }
  pid_t pid() const { return pid_; }
  bool Exited() {
    if (pid_ <= 0) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    return false;
  }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 250; ++i) {  // up to 5 s
      if (Exited()) return;
      absl::SleepFor(absl::Milliseconds(20));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  explicit Child(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

std::string Tail(const std::string& path, size_t max_bytes = 800) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return "";
  std::string s;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0 && s.size() < (1 << 20);) {
    s.append(buf, n);
  }
  std::fclose(f);
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

struct ExporterResult {
  std::string command;
  int scrapes = 0;
  size_t ib_values = 0;  // node_infiniband_* sample lines per scrape (last scrape)
  size_t ib_values_min = 0, ib_values_max = 0;
  size_t ib_info_lines = 0;  // of which node_infiniband_info
  size_t all_samples = 0;    // every sample line (go_*, process_*, node_scrape_*, ...)
  size_t bytes = 0;
  uint64_t ticks = 0;
  long ticks_per_s = 100;
  double cpu_s = 0, wall_s = 0;
  double cpu_per_scrape_s = 0, cpu_per_value_s = 0;
};

// (c) node_exporter on 127.0.0.1:<free port>, scraped in blocks; its CPU is the utime+stime
// delta over each block of scrapes, so its idle time between blocks is not charged.
class ExporterPhase {
 public:
  static absl::StatusOr<std::unique_ptr<ExporterPhase>> Start(const std::string& binary,
                                                              const std::string& root, bool lean,
                                                              const std::string& work_dir) {
    auto p = std::unique_ptr<ExporterPhase>(new ExporterPhase());
    p->r_.ticks_per_s = ::sysconf(_SC_CLK_TCK);
    const std::string log_path =
        absl::StrCat(work_dir, "/node_exporter", lean ? "-lean" : "", ".log");
    for (int attempt = 0; attempt < 3 && p->child_ == nullptr; ++attempt) {
      absl::StatusOr<int> port = FreeLoopbackPort();
      if (!port.ok()) return port.status();
      p->port_ = *port;
      std::vector<std::string> argv = {binary, "--collector.disable-defaults",
                                       "--collector.infiniband",
                                       absl::StrCat("--path.sysfs=", root)};
      if (lean) argv.push_back("--web.disable-exporter-metrics");
      argv.push_back(absl::StrCat("--web.listen-address=127.0.0.1:", p->port_));
      p->r_.command = absl::StrJoin(argv, " ");
      absl::StatusOr<std::unique_ptr<Child>> c = Child::Start(argv, log_path);
      if (!c.ok()) return c.status();
      // Ready when /metrics answers 200. Bounded by time; a child that exits (say, the port was
      // taken meanwhile) is started again on another port.
      const absl::Time deadline = absl::Now() + kExporterStartTimeout;
      bool ready = false;
      while (!ready && absl::Now() < deadline && !(*c)->Exited()) {
        absl::StatusOr<HttpResponse> resp = HttpGet(p->port_, "/metrics", absl::Seconds(2));
        ready = resp.ok() && resp->status == 200;
        if (!ready) absl::SleepFor(absl::Milliseconds(50));
      }
      if (ready) {
        p->child_ = std::move(*c);
      } else if (!(*c)->Exited() || attempt == 2) {
        return absl::UnavailableError(absl::StrCat(
            "node_exporter did not serve /metrics: ", p->r_.command, "\n", Tail(log_path)));
      }
    }
    if (p->child_ == nullptr) return absl::UnavailableError("node_exporter did not start");
    for (int i = 0; i < 3; ++i) {  // warm-up
      if (absl::Status s = p->Scrape(); !s.ok()) return s;
    }
    p->r_.scrapes = 0;
    return p;
  }

  absl::Status Block(int scrapes, absl::Time deadline) {
    absl::StatusOr<uint64_t> t0 = ProcessTicks(child_->pid());
    if (!t0.ok()) return t0.status();
    const absl::Time start = absl::Now();
    for (int i = 0; i < scrapes && absl::Now() < deadline; ++i) {
      if (absl::Status s = Scrape(); !s.ok()) return s;
    }
    absl::StatusOr<uint64_t> t1 = ProcessTicks(child_->pid());
    if (!t1.ok()) return t1.status();
    r_.wall_s += absl::ToDoubleSeconds(absl::Now() - start);
    r_.ticks += *t1 - *t0;
    return absl::OkStatus();
  }

  void Stop() { child_->Stop(); }

  ExporterResult Result() const {
    ExporterResult r = r_;
    r.cpu_s = static_cast<double>(r.ticks) / static_cast<double>(r.ticks_per_s);
    if (r.scrapes > 0) r.cpu_per_scrape_s = r.cpu_s / r.scrapes;
    if (r.ib_values > 0) r.cpu_per_value_s = r.cpu_per_scrape_s / static_cast<double>(r.ib_values);
    return r;
  }

 private:
  ExporterPhase() = default;

  absl::Status Scrape() {
    absl::StatusOr<HttpResponse> resp = HttpGet(port_, "/metrics", kHttpTimeout);
    if (!resp.ok()) return resp.status();
    if (resp->status != 200) {
      return absl::UnavailableError(absl::StrCat("node_exporter answered HTTP ", resp->status));
    }
    size_t ib = 0, info = 0, all = 0;
    for (absl::string_view line : absl::StrSplit(resp->body, '\n')) {
      if (line.empty() || line[0] == '#') continue;
      ++all;
      if (absl::StartsWith(line, "node_infiniband_")) {
        ++ib;
        if (absl::StartsWith(line, "node_infiniband_info")) ++info;
      }
    }
    r_.ib_values_min = r_.scrapes == 0 ? ib : std::min(r_.ib_values_min, ib);
    r_.ib_values_max = std::max(r_.ib_values_max, ib);
    r_.ib_values = ib;
    r_.ib_info_lines = info;
    r_.all_samples = all;
    r_.bytes = resp->body.size();
    ++r_.scrapes;
    return absl::OkStatus();
  }

  std::unique_ptr<Child> child_;
  int port_ = 0;
  ExporterResult r_;
};

// ---------------------------------------------------------------------------------------------
// The machine, for the record.

struct Machine {
  long cpus = 0;
  std::string cpu_model, kernel;
};

Machine ThisMachine() {
  Machine m;
  m.cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  utsname u{};
  if (::uname(&u) == 0) m.kernel = absl::StrCat(u.sysname, " ", u.release, " ", u.machine);
  if (FILE* f = std::fopen("/proc/cpuinfo", "re")) {
    char line[512];
    for (int i = 0; i < 4096 && std::fgets(line, sizeof(line), f) != nullptr; ++i) {
      absl::string_view l(line);
      if (absl::StartsWith(l, "model name")) {
        size_t colon = l.find(':');
        if (colon != absl::string_view::npos) {
          m.cpu_model = std::string(absl::StripAsciiWhitespace(l.substr(colon + 1)));
        }
        break;
      }
    }
    std::fclose(f);
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Output.

std::string Us(double s) { return absl::StrFormat("%.2f µs", s * 1e6); }
std::string Ns(double s) { return absl::StrFormat("%.1f ns", s * 1e9); }
std::string Num(double v) { return absl::StrFormat("%.6g", v); }

struct Report {
  Machine machine;
  int rounds = 1;
  std::string tree;
  bool generated = false;
  TreeShape shape;
  CyclesResult a;
  ScheduleResult b;
  std::optional<ExporterResult> c, c_lean;
  std::string c_error;
  RenderResult d;
  FloorResult e;
  double ratio = 0, ratio_lean = 0, ratio_per_scrape = 0;
  double cpu_percent_100hz = 0;  // measured + amortized rediscovery
  bool ratio_met = false, cpu_met = false;
  // (f), issue #3: ran when f_skipped and f_error are empty and the flag is on.
  bool f_ran = false;
  std::string f_skipped, f_error;
  GpuNicInputs f_inputs;
  CyclesResult f;
  SourceFloorResult f_floor;
  RenderResult f_render;
  double ratio_f = 0, ratio_f_lean = 0, ratio_f_per_scrape = 0;
  bool ratio_f_met = false;
  // The same ratio if every NVML call cost one trivial ioctl more than the fake's: the best a real
  // driver can do, since each of its calls is at least one ioctl into the kernel.
  double ratio_f_with_ioctl = 0;
};

// (f) in the table.
void PrintAgentSection(const Report& r, std::string& o) {
  const GpuNicInputs& in = r.f_inputs;
  const CyclesResult& f = r.f;
  const SourceFloorResult& fl = r.f_floor;
  absl::StrAppend(
      &o, "(f) the agent with NVLink and ethtool (issue #3): Sampler::RunOnce x ", f.cycles,
      ", collectors ",
      absl::StrJoin(f.by_collector, ", ",
                    [](std::string* out, const CollectorCost& c) { out->append(c.name); }),
      "\n");
  absl::StrAppend(&o, "    nvml     ", in.nvml_library, " (fake; config read once), ", kGpus,
                  " Hopper GPUs x ", kNvlinks, " NVLinks: link state + 4 DL counters per link\n");
  absl::StrAppend(&o, "    ethtool  dir:", in.dump_dir, ": ", absl::StrJoin(in.netdevs, ", "), ", ",
                  in.stats_per_netdev, " stats each (", in.stats_from_capture,
                  " of a real mlx5 capture + ", in.stats_per_netdev - in.stats_from_capture,
                  " PFC and pause-storm)\n");
  absl::StrAppend(&o, "    values ok per cycle   ", f.values.ok, " (unavailable ",
                  f.values.unavailable, ", errors ", f.values.error, "; read errors ",
                  f.read_errors, ")\n");
  absl::StrAppend(&o, "    CPU per cycle         ", Us(f.cpu_per_cycle_s), "  (user ",
                  Us(f.cpu.user_s / std::max(1, f.cycles)), ", sys ",
                  Us(f.cpu.sys_s / std::max(1, f.cycles)), ")\n");
  absl::StrAppend(&o, "    CPU per value         ", Ns(f.cpu_per_value_s), "\n");
  absl::StrAppend(&o, "    wall per cycle        ", Us(f.wall_per_cycle_s), "\n");
  absl::StrAppend(&o, "    first cycle (discovery) ", Us(f.first_cycle_cpu_s), " CPU\n");
  absl::StrAppend(&o, "    by collector (thread CPU inside Collect)\n");
  absl::StrAppend(&o, absl::StrFormat("      %-22s %7s %14s %14s %7s\n", "", "values",
                                      "CPU per cycle", "CPU per value", "share"));
  double in_collectors = 0;
  for (const CollectorCost& c : f.by_collector) {
    in_collectors += c.cpu_per_cycle_s;
    absl::StrAppend(
        &o, absl::StrFormat("      %-22s %7d %14s %14s %6.1f%%\n", c.name, c.values_ok,
                            Us(c.cpu_per_cycle_s), Ns(c.cpu_per_value_s),
                            100.0 * c.cpu_per_cycle_s / std::max(1e-12, f.cpu_per_cycle_s)));
  }
  const double rest = f.cpu_per_cycle_s - in_collectors;
  absl::StrAppend(
      &o, absl::StrFormat("      %-22s %7s %14s %14s %6.1f%%\n", "sampler and timing", "", Us(rest),
                          "", 100.0 * rest / std::max(1e-12, f.cpu_per_cycle_s)));
  absl::StrAppend(&o, "    floors (", fl.cycles, " cycles each, next to (f))\n");
  absl::StrAppend(&o, "      fake NVML alone     ", Us(fl.nvml_cpu_per_cycle_s), " per cycle for ",
                  fl.nvml_calls_per_cycle, " calls (",
                  Ns(fl.nvml_cpu_per_cycle_s / std::max<size_t>(1, fl.nvml_calls_per_cycle)),
                  " per call; ", fl.nvml_ok_per_cycle, " answered)\n");
  absl::StrAppend(&o, "      dumps, no parsing   ", Us(fl.dump_cpu_per_cycle_s),
                  " per cycle (list, open, read ", fl.dump_bytes_per_cycle, " bytes, close)\n");
  absl::StrAppend(&o, "      one trivial ioctl   ", Ns(fl.ioctl_ns * 1e-9),
                  " (FIONREAD on a pipe); a real NVML call is at least one\n");
  absl::StrAppend(&o, "    /metrics rendering of one snapshot  ", Us(r.f_render.cpu_per_render_s),
                  " CPU for ", r.f_render.samples, " samples, ", r.f_render.bytes, " bytes\n\n");
}

void PrintTable(const Report& r) {
  std::string o;
  absl::StrAppend(&o, "ringside-agent-bench (issue #2; (f): issue #3)\n");
  absl::StrAppend(&o, "machine   ", r.machine.cpus, " CPUs, ", r.machine.cpu_model, ", ",
                  r.machine.kernel, "\n");
  absl::StrAppend(&o, "tree      ", r.tree,
                  r.generated
                      ? absl::StrCat(" (generated: ", r.shape.ib_hcas, " InfiniBand mlx5 HCAs, ",
                                     r.shape.roce_functions, " RoCE functions with netdevs ",
                                     absl::StrJoin(r.shape.netdevs, ", "), ")")
                      : std::string(" (existing)"),
                  "\n");
  std::vector<std::string> by;
  for (const auto& [name, n] : r.a.values.ok_by_collector) by.push_back(absl::StrCat(name, " ", n));
  absl::StrAppend(&o, "series    ", r.a.values.series, "; values ok per cycle ", r.a.values.ok,
                  " (", absl::StrJoin(by, ", "), "), unavailable ", r.a.values.unavailable,
                  ", errors ", r.a.values.error, "\n\n");

  absl::StrAppend(&o, "phases run in ", r.rounds, " interleaved rounds: (a) ",
                  r.f_ran ? "(f) " : "",
                  "(c) (c') (e) back to back, then (b) (e) on the schedule\n\n");
  absl::StrAppend(&o, "(a) Sampler::RunOnce x ", r.a.cycles, "\n");
  absl::StrAppend(&o, "    CPU per cycle         ", Us(r.a.cpu_per_cycle_s), "  (user ",
                  Us(r.a.cpu.user_s / std::max(1, r.a.cycles)), ", sys ",
                  Us(r.a.cpu.sys_s / std::max(1, r.a.cycles)), ")\n");
  absl::StrAppend(&o, "    CPU per value         ", Ns(r.a.cpu_per_value_s), "\n");
  absl::StrAppend(&o, "    wall per cycle        ", Us(r.a.wall_per_cycle_s), "\n");
  absl::StrAppend(&o, "    first cycle (discovery) ", Us(r.a.first_cycle_cpu_s), " CPU\n");
  absl::StrAppend(&o, "    read errors           ", r.a.read_errors, "\n\n");

  absl::StrAppend(&o, "(b) Sampler::Run every ", absl::FormatDuration(r.b.interval), " for ",
                  absl::StrFormat("%.2f s", r.b.cpu.wall_s), "\n");
  absl::StrAppend(&o, "    cycles                ", r.b.cycles, " (expected ", r.b.expected_cycles,
                  "), overruns ", r.b.overruns, "\n");
  absl::StrAppend(&o, "    process CPU           ",
                  absl::StrFormat("%.3f %% of one core (user %.3f s, sys %.3f s)", r.b.cpu_percent,
                                  r.b.cpu.user_s, r.b.cpu.sys_s),
                  "\n");
  absl::StrAppend(
      &o, "    + rediscovery         ",
      absl::StrFormat("%.4f %% (one discovery per %s, amortized)", r.b.rediscovery_percent,
                      absl::FormatDuration(kRediscoverInterval)),
      "\n");
  absl::StrAppend(&o, "    cycle wall p50/p99/max ", Us(r.b.cycle_wall_p50_s), " / ",
                  Us(r.b.cycle_wall_p99_s), " / ", Us(r.b.cycle_wall_max_s), "\n\n");

  auto exporter = [&](const char* title, const ExporterResult& e) {
    absl::StrAppend(&o, title, "\n    ", e.command, "\n");
    absl::StrAppend(&o, "    scrapes               ", e.scrapes, " in ",
                    absl::StrFormat("%.2f s", e.wall_s), "\n");
    absl::StrAppend(&o, "    values per scrape     ", e.ib_values, " node_infiniband_* samples (",
                    e.ib_info_lines, " of them _info; min ", e.ib_values_min, ", max ",
                    e.ib_values_max, "); ", e.all_samples, " samples in all, ", e.bytes,
                    " bytes\n");
    absl::StrAppend(&o, "    CPU                   ",
                    absl::StrFormat("%.2f s (%d ticks of 1/%d s)", e.cpu_s, e.ticks, e.ticks_per_s),
                    "\n");
    absl::StrAppend(&o, "    CPU per scrape        ", Us(e.cpu_per_scrape_s), "\n");
    absl::StrAppend(&o, "    CPU per value         ", Ns(e.cpu_per_value_s), "\n\n");
  };
  if (r.c) exporter("(c) prometheus-node-exporter", *r.c);
  if (r.c_lean) exporter("(c') the same with --web.disable-exporter-metrics", *r.c_lean);
  if (!r.c_error.empty()) absl::StrAppend(&o, "(c) node_exporter: ", r.c_error, "\n\n");

  absl::StrAppend(&o, "(d) ringside /metrics rendering of one snapshot (no HTTP)\n");
  absl::StrAppend(&o, "    CPU per render        ", Us(r.d.cpu_per_render_s), " for ", r.d.samples,
                  " samples, ", r.d.bytes, " bytes\n\n");

  absl::StrAppend(&o, "(e) floor: the same ", r.e.files,
                  " files, one pread each per cycle, no parsing (bare loop)\n");
  absl::StrAppend(
      &o, "    back to back          ", Us(r.e.hot_cpu_per_cycle_s), " CPU per cycle (",
      r.e.hot_cycles, " cycles); ringside (a) is ",
      absl::StrFormat("%.2fx", r.a.cpu_per_cycle_s / std::max(1e-12, r.e.hot_cpu_per_cycle_s)),
      "\n");
  absl::StrAppend(
      &o, "    every ", absl::FormatDuration(r.b.interval), "          ",
      Us(r.e.timed_cpu_per_cycle_s), " CPU per cycle, ",
      absl::StrFormat("%.3f %%", r.e.timed_cpu_percent), " of one core (", r.e.timed_cycles,
      " cycles); ringside (b) is ",
      absl::StrFormat("%.2fx", r.b.cpu_percent / std::max(1e-12, r.e.timed_cpu_percent)), "\n\n");
  if (r.f_ran) PrintAgentSection(r, o);
  if (!r.f_skipped.empty()) absl::StrAppend(&o, "(f) skipped: ", r.f_skipped, "\n\n");
  if (!r.f_error.empty()) absl::StrAppend(&o, "(f) failed: ", r.f_error, "\n\n");
  absl::StrAppend(&o, "result\n");
  if (r.c) {
    absl::StrAppend(&o, "    CPU per value, node_exporter / ringside   ",
                    absl::StrFormat("%.1f", r.ratio), "  (goal >= ", Num(kGoalRatio), ": ",
                    r.ratio_met ? "met" : "NOT met", ")\n");
    if (r.c_lean) {
      absl::StrAppend(&o, "    the same against the lean node_exporter   ",
                      absl::StrFormat("%.1f", r.ratio_lean), "\n");
    }
    absl::StrAppend(&o, "    whole tree: node_exporter scrape / ringside cycle   ",
                    absl::StrFormat("%.1f", r.ratio_per_scrape), "\n");
  }
  absl::StrAppend(&o, "    100 Hz sampling CPU                      ",
                  absl::StrFormat("%.3f %%", r.cpu_percent_100hz), " of one core  (goal < ",
                  Num(kGoalCpuPercent), " %: ", r.cpu_met ? "met" : "NOT met", ")\n");
  if (r.f_ran && r.c) {
    absl::StrAppend(&o,
                    "    (f) with NVLink and ethtool: CPU per value, node_exporter / ringside   ",
                    absl::StrFormat("%.1f", r.ratio_f), "  (goal >= ", Num(kGoalRatio), ": ",
                    r.ratio_f_met ? "met" : "NOT met", ")\n");
    if (r.c_lean) {
      absl::StrAppend(&o, "        the same against the lean node_exporter   ",
                      absl::StrFormat("%.1f", r.ratio_f_lean), "\n");
    }
    absl::StrAppend(&o, "        whole node: node_exporter scrape / ringside cycle   ",
                    absl::StrFormat("%.2f", r.ratio_f_per_scrape), "\n");
    absl::StrAppend(&o, "        if each NVML call cost one more ioctl (a real driver's least)   ",
                    absl::StrFormat("%.1f", r.ratio_f_with_ioctl), "\n");
  }
  std::fwrite(o.data(), 1, o.size(), stdout);
}

void PrintJson(const Report& r) {
  using daemon::JsonQuote;
  auto obj = [](const std::vector<std::pair<std::string, std::string>>& kv) {
    std::vector<std::string> parts;
    for (const auto& [k, v] : kv) parts.push_back(absl::StrCat(JsonQuote(k), ":", v));
    return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
  };
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  auto exporter = [&](const ExporterResult& e) {
    return obj({{"command", JsonQuote(e.command)},
                {"scrapes", absl::StrCat(e.scrapes)},
                {"values_per_scrape", absl::StrCat(e.ib_values)},
                {"values_per_scrape_min", absl::StrCat(e.ib_values_min)},
                {"values_per_scrape_max", absl::StrCat(e.ib_values_max)},
                {"info_lines_per_scrape", absl::StrCat(e.ib_info_lines)},
                {"all_samples_per_scrape", absl::StrCat(e.all_samples)},
                {"bytes_per_scrape", absl::StrCat(e.bytes)},
                {"cpu_ticks", absl::StrCat(e.ticks)},
                {"ticks_per_second", absl::StrCat(e.ticks_per_s)},
                {"cpu_seconds", Num(e.cpu_s)},
                {"wall_seconds", Num(e.wall_s)},
                {"cpu_per_scrape_seconds", Num(e.cpu_per_scrape_s)},
                {"cpu_per_value_seconds", Num(e.cpu_per_value_s)}});
  };
  std::vector<std::pair<std::string, std::string>> by;
  for (const auto& [name, n] : r.a.values.ok_by_collector) by.emplace_back(name, absl::StrCat(n));
  std::vector<std::pair<std::string, std::string>> top = {
      {"rounds", absl::StrCat(r.rounds)},
      {"machine", obj({{"cpus", absl::StrCat(r.machine.cpus)},
                       {"cpu_model", JsonQuote(r.machine.cpu_model)},
                       {"kernel", JsonQuote(r.machine.kernel)}})},
      {"tree",
       obj({{"path", JsonQuote(r.tree)},
            {"generated", b(r.generated)},
            {"ib_hcas", absl::StrCat(r.shape.ib_hcas)},
            {"roce_functions", absl::StrCat(r.shape.roce_functions)},
            {"netdevs", absl::StrCat("[",
                                     absl::StrJoin(r.shape.netdevs, ",",
                                                   [](std::string* out, const std::string& s) {
                                                     out->append(JsonQuote(s));
                                                   }),
                                     "]")}})},
      {"run_once", obj({{"cycles", absl::StrCat(r.a.cycles)},
                        {"series", absl::StrCat(r.a.values.series)},
                        {"values_ok_per_cycle", absl::StrCat(r.a.values.ok)},
                        {"values_ok_by_collector", obj(by)},
                        {"values_unavailable", absl::StrCat(r.a.values.unavailable)},
                        {"values_error", absl::StrCat(r.a.values.error)},
                        {"read_errors", absl::StrCat(r.a.read_errors)},
                        {"cpu_seconds", Num(r.a.cpu.cpu_s)},
                        {"user_seconds", Num(r.a.cpu.user_s)},
                        {"sys_seconds", Num(r.a.cpu.sys_s)},
                        {"wall_seconds", Num(r.a.cpu.wall_s)},
                        {"cpu_per_cycle_seconds", Num(r.a.cpu_per_cycle_s)},
                        {"cpu_per_value_seconds", Num(r.a.cpu_per_value_s)},
                        {"wall_per_cycle_seconds", Num(r.a.wall_per_cycle_s)},
                        {"first_cycle_cpu_seconds", Num(r.a.first_cycle_cpu_s)}})},
      {"schedule", obj({{"interval_seconds", Num(absl::ToDoubleSeconds(r.b.interval))},
                        {"wall_seconds", Num(r.b.cpu.wall_s)},
                        {"cycles", absl::StrCat(r.b.cycles)},
                        {"expected_cycles", absl::StrCat(r.b.expected_cycles)},
                        {"overruns", absl::StrCat(r.b.overruns)},
                        {"cpu_seconds", Num(r.b.cpu.cpu_s)},
                        {"user_seconds", Num(r.b.cpu.user_s)},
                        {"sys_seconds", Num(r.b.cpu.sys_s)},
                        {"cpu_percent_of_one_core", Num(r.b.cpu_percent)},
                        {"rediscovery_percent_amortized", Num(r.b.rediscovery_percent)},
                        {"cycle_wall_p50_seconds", Num(r.b.cycle_wall_p50_s)},
                        {"cycle_wall_p99_seconds", Num(r.b.cycle_wall_p99_s)},
                        {"cycle_wall_max_seconds", Num(r.b.cycle_wall_max_s)}})},
      {"render", obj({{"renders", absl::StrCat(r.d.renders)},
                      {"cpu_per_render_seconds", Num(r.d.cpu_per_render_s)},
                      {"samples", absl::StrCat(r.d.samples)},
                      {"bytes", absl::StrCat(r.d.bytes)}})},
  };
  top.emplace_back("floor", obj({{"files", absl::StrCat(r.e.files)},
                                 {"hot_cycles", absl::StrCat(r.e.hot_cycles)},
                                 {"hot_cpu_per_cycle_seconds", Num(r.e.hot_cpu_per_cycle_s)},
                                 {"timed_cycles", absl::StrCat(r.e.timed_cycles)},
                                 {"timed_cpu_per_cycle_seconds", Num(r.e.timed_cpu_per_cycle_s)},
                                 {"timed_cpu_percent_of_one_core", Num(r.e.timed_cpu_percent)}}));
  if (r.f_ran) {
    std::vector<std::string> cs;
    for (const CollectorCost& c : r.f.by_collector) {
      cs.push_back(obj({{"name", JsonQuote(c.name)},
                        {"values_ok_per_cycle", absl::StrCat(c.values_ok)},
                        {"cpu_per_cycle_seconds", Num(c.cpu_per_cycle_s)},
                        {"cpu_per_value_seconds", Num(c.cpu_per_value_s)}}));
    }
    const SourceFloorResult& fl = r.f_floor;
    top.emplace_back("agent_nvlink_ethtool",
                     obj({{"nvml_library", JsonQuote(r.f_inputs.nvml_library)},
                          {"gpus", absl::StrCat(kGpus)},
                          {"nvlinks_per_gpu", absl::StrCat(kNvlinks)},
                          {"ethtool_dir", JsonQuote(r.f_inputs.dump_dir)},
                          {"ethtool_capture", JsonQuote(r.f_inputs.capture)},
                          {"ethtool_stats_per_netdev", absl::StrCat(r.f_inputs.stats_per_netdev)},
                          {"netdevs", absl::StrCat(r.f_inputs.netdevs.size())},
                          {"cycles", absl::StrCat(r.f.cycles)},
                          {"values_ok_per_cycle", absl::StrCat(r.f.values.ok)},
                          {"values_unavailable", absl::StrCat(r.f.values.unavailable)},
                          {"values_error", absl::StrCat(r.f.values.error)},
                          {"read_errors", absl::StrCat(r.f.read_errors)},
                          {"cpu_seconds", Num(r.f.cpu.cpu_s)},
                          {"user_seconds", Num(r.f.cpu.user_s)},
                          {"sys_seconds", Num(r.f.cpu.sys_s)},
                          {"cpu_per_cycle_seconds", Num(r.f.cpu_per_cycle_s)},
                          {"cpu_per_value_seconds", Num(r.f.cpu_per_value_s)},
                          {"wall_per_cycle_seconds", Num(r.f.wall_per_cycle_s)},
                          {"first_cycle_cpu_seconds", Num(r.f.first_cycle_cpu_s)},
                          {"by_collector", absl::StrCat("[", absl::StrJoin(cs, ","), "]")},
                          {"floor_cycles", absl::StrCat(fl.cycles)},
                          {"nvml_floor_calls_per_cycle", absl::StrCat(fl.nvml_calls_per_cycle)},
                          {"nvml_floor_cpu_per_cycle_seconds", Num(fl.nvml_cpu_per_cycle_s)},
                          {"dump_floor_cpu_per_cycle_seconds", Num(fl.dump_cpu_per_cycle_s)},
                          {"dump_floor_bytes_per_cycle", absl::StrCat(fl.dump_bytes_per_cycle)},
                          {"ioctl_seconds", Num(fl.ioctl_ns * 1e-9)},
                          {"render_cpu_seconds", Num(r.f_render.cpu_per_render_s)},
                          {"render_samples", absl::StrCat(r.f_render.samples)}}));
  } else {
    top.emplace_back("agent_nvlink_ethtool", "null");
  }
  if (!r.f_skipped.empty())
    top.emplace_back("agent_nvlink_ethtool_skipped", JsonQuote(r.f_skipped));
  if (!r.f_error.empty()) top.emplace_back("agent_nvlink_ethtool_error", JsonQuote(r.f_error));
  top.emplace_back("node_exporter", r.c ? exporter(*r.c) : "null");
  top.emplace_back("node_exporter_lean", r.c_lean ? exporter(*r.c_lean) : "null");
  if (!r.c_error.empty()) top.emplace_back("node_exporter_error", JsonQuote(r.c_error));
  top.emplace_back(
      "result",
      obj({{"cpu_per_value_ratio", r.c ? Num(r.ratio) : "null"},
           {"cpu_per_value_ratio_lean", r.c_lean ? Num(r.ratio_lean) : "null"},
           {"scrape_per_cycle_ratio", r.c ? Num(r.ratio_per_scrape) : "null"},
           {"cpu_percent_100hz", Num(r.cpu_percent_100hz)},
           {"goal_ratio", Num(kGoalRatio)},
           {"goal_cpu_percent", Num(kGoalCpuPercent)},
           {"ratio_met", r.c ? b(r.ratio_met) : "null"},
           {"agent_nvlink_ethtool_cpu_per_value_ratio", r.f_ran && r.c ? Num(r.ratio_f) : "null"},
           {"agent_nvlink_ethtool_cpu_per_value_ratio_lean",
            r.f_ran && r.c_lean ? Num(r.ratio_f_lean) : "null"},
           {"agent_nvlink_ethtool_scrape_per_cycle_ratio",
            r.f_ran && r.c ? Num(r.ratio_f_per_scrape) : "null"},
           {"agent_nvlink_ethtool_ratio_with_one_ioctl_per_nvml_call",
            r.f_ran && r.c ? Num(r.ratio_f_with_ioctl) : "null"},
           {"agent_nvlink_ethtool_ratio_met", r.f_ran && r.c ? b(r.ratio_f_met) : "null"},
           {"cpu_met", b(r.cpu_met)}}));
  std::string out = obj(top) + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

// (f) Prepares the inputs, builds the four-collector sampler, runs its first cycle and checks that
// every collector read what it was given. FailedPrecondition when an input is missing (skip).
absl::Status SetUpAgentPhase(Report& r, const std::string& work, absl::Duration interval,
                             std::unique_ptr<CyclesPhase>& f,
                             std::unique_ptr<SourceFloorPhase>& f_floor) {
  absl::StatusOr<GpuNicInputs> in = PrepareGpuNicInputs(r.tree, work);
  if (!in.ok()) return in.status();
  r.f_inputs = *in;
  std::vector<const TimedCollector*> timed;
  std::unique_ptr<daemon::Sampler> sampler = MakeAgentSampler(r.tree, *in, interval, timed);
  for (const TimedCollector* t : timed) {
    if (absl::Status av = t->Availability(); !av.ok()) {
      return absl::Status(av.code(), absl::StrCat(t->name(), " collector off: ", av.message()));
    }
  }
  f = std::make_unique<CyclesPhase>(std::move(sampler), timed);
  f->Warm();
  const ValueCounts got = CountValues(f->last());
  const size_t want_nvml = static_cast<size_t>(kGpus) * kNvlinks * 5;
  const size_t want_ethtool = in->netdevs.size() * in->stats_per_netdev;
  for (const auto& [name, ok] : got.ok_by_collector) {
    const size_t want = name == "nvml" ? want_nvml : name == "ethtool" ? want_ethtool : ok;
    if (ok != want || ok == 0) {
      return absl::InternalError(absl::StrCat(name, " read ", ok, " values, expected ", want,
                                              " (unavailable ", got.unavailable, ", errors ",
                                              got.error, ")"));
    }
  }
  absl::StatusOr<std::unique_ptr<NvmlCallLoop>> loop =
      NvmlCallLoop::Open(in->nvml_library, kNvlinks);
  if (!loop.ok()) return loop.status();
  f_floor = std::make_unique<SourceFloorPhase>(*std::move(loop), in->dump_dir);
  return absl::OkStatus();
}

// `total` split into `rounds` parts whose sum is `total`.
int Share(int total, int rounds, int round) {
  return total / rounds + (round < total % rounds ? 1 : 0);
}

int Main() {
  const int cycles = absl::GetFlag(FLAGS_cycles);
  const int scrapes = absl::GetFlag(FLAGS_scrapes);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const absl::Duration interval = absl::GetFlag(FLAGS_interval);
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  if (cycles < 1 || cycles > 10000000 || scrapes < 1 || scrapes > 100000 || rounds < 1 ||
      rounds > std::min(cycles, scrapes) || interval < absl::Milliseconds(1) ||
      duration < interval * rounds || duration > absl::Minutes(10)) {
    std::fprintf(stderr,
                 "ringside-agent-bench: need 1 <= --cycles <= 1e7, 1 <= --scrapes <= 1e5, "
                 "1 <= --rounds <= min(cycles, scrapes), --interval >= 1ms, "
                 "--interval * --rounds <= --duration <= 10m\n");
    return 2;
  }

  // A work folder for node_exporter's logs and, unless --tree says otherwise, the tree.
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = absl::StrCat(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp",
                                  "/ringside-agent-bench-XXXXXX");
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "ringside-agent-bench: mkdtemp %s: %s\n", tmpl.c_str(),
                 std::strerror(errno));
    return 1;
  }
  const std::string work = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{work};

  Report r;
  r.machine = ThisMachine();
  r.rounds = rounds;
  r.tree = absl::GetFlag(FLAGS_tree);
  if (r.tree.empty()) r.tree = work + "/sys";
  std::error_code ec;
  if (!std::filesystem::exists(r.tree + "/class/infiniband", ec)) {
    // Only into a new or empty folder: never write into a real /sys or anyone's files.
    if (std::filesystem::exists(r.tree, ec) && !std::filesystem::is_empty(r.tree, ec)) {
      std::fprintf(stderr,
                   "ringside-agent-bench: %s has no class/infiniband and is not empty; give a "
                   "new or empty folder to generate the tree in, or a tree to read\n",
                   r.tree.c_str());
      return 2;
    }
    absl::StatusOr<TreeShape> shape = WriteDgxTree(r.tree);
    if (!shape.ok()) {
      std::fprintf(stderr, "ringside-agent-bench: writing the tree: %s\n",
                   shape.status().ToString().c_str());
      return 1;
    }
    r.shape = *shape;
    r.generated = true;
  }
  const bool quiet = absl::GetFlag(FLAGS_json);
  if (!quiet) {
    std::fprintf(stderr,
                 "tree ready at %s; %d rounds of (a) %d cycles, %s(c) %d scrapes, (e); "
                 "then %d rounds of (b) %s at %s, (e)\n",
                 r.tree.c_str(), rounds, cycles, absl::GetFlag(FLAGS_nvlink_ethtool) ? "(f), " : "",
                 scrapes, rounds, absl::FormatDuration(duration).c_str(),
                 absl::FormatDuration(interval).c_str());
  }

  CyclesPhase a(MakeSampler(r.tree, interval));
  a.Warm();
  if (CountValues(a.last()).ok == 0) {
    std::fprintf(stderr, "ringside-agent-bench: no values read from %s\n", r.tree.c_str());
    return 1;
  }
  FloorPhase e(r.tree);

  // (f): the same sampler with the NVML and ethtool collectors added, and their sources' floors.
  std::unique_ptr<CyclesPhase> f;
  std::unique_ptr<SourceFloorPhase> f_floor;
  if (absl::GetFlag(FLAGS_nvlink_ethtool)) {
    absl::Status st = SetUpAgentPhase(r, work, interval, f, f_floor);
    if (absl::IsFailedPrecondition(st)) {
      r.f_skipped = std::string(st.message());
    } else if (!st.ok()) {
      r.f_error = st.ToString();
    }
    if (!st.ok()) {
      f.reset();
      f_floor.reset();
      std::fprintf(stderr, "ringside-agent-bench: (f) %s: %s\n",
                   r.f_skipped.empty() ? "failed" : "skipped",
                   r.f_skipped.empty() ? r.f_error.c_str() : r.f_skipped.c_str());
    }
  }

  // Round by round: ringside cycles, node_exporter scrapes (both variants), the bare loop.
  std::vector<std::unique_ptr<ExporterPhase>> exporters;  // [0] as given, [1] lean
  const std::string ne = absl::GetFlag(FLAGS_node_exporter);
  if (!ne.empty()) {
    for (bool lean : {false, true}) {
      if (lean && !absl::GetFlag(FLAGS_lean_variant)) break;
      absl::StatusOr<std::unique_ptr<ExporterPhase>> p =
          ExporterPhase::Start(ne, r.tree, lean, work);
      if (!p.ok()) {
        r.c_error = p.status().ToString();
        break;
      }
      exporters.push_back(std::move(*p));
    }
  }
  const absl::Time deadline = absl::Now() + kPhaseCap;
  for (int i = 0; i < rounds; ++i) {
    a.Block(Share(cycles, rounds, i), deadline);
    if (f) {
      f->Block(Share(cycles, rounds, i), deadline);
      f_floor->Block(Share(cycles, rounds, i), deadline);
    }
    for (auto& x : exporters) {
      if (x == nullptr) continue;
      if (absl::Status s = x->Block(Share(scrapes, rounds, i), deadline); !s.ok()) {
        r.c_error = s.ToString();
        x.reset();
      }
    }
    e.HotBlock(Share(cycles, rounds, i), deadline);
  }
  for (auto& x : exporters) {
    if (x != nullptr) x->Stop();
  }
  if (r.c_error.empty() && !exporters.empty()) {
    r.c = exporters[0]->Result();
    if (exporters.size() > 1) r.c_lean = exporters[1]->Result();
  }
  exporters.clear();
  r.a = a.Result();
  if (f) {
    r.f_ran = true;
    r.f = f->Result();
    r.f_floor = f_floor->Result();
  }

  // Round by round: the Sampler::Run schedule, and the bare loop on the same schedule.
  SchedulePhase b(r.tree, interval, duration);
  b.Warm();
  const absl::Duration slice = duration / rounds;
  for (int i = 0; i < rounds; ++i) {
    b.Block(slice);
    e.TimedBlock(interval, slice);
  }
  r.b = b.Result(r.a.discovery_cpu_s);
  r.e = e.Result();
  r.d = RunRender(a.last(), scrapes);
  if (f) r.f_render = RunRender(f->last(), scrapes);

  if (r.c && r.a.cpu_per_value_s > 0) {
    r.ratio = r.c->cpu_per_value_s / r.a.cpu_per_value_s;
    r.ratio_per_scrape = r.c->cpu_per_scrape_s / r.a.cpu_per_cycle_s;
    r.ratio_met = r.ratio >= kGoalRatio;
  }
  if (r.c_lean && r.a.cpu_per_value_s > 0) {
    r.ratio_lean = r.c_lean->cpu_per_value_s / r.a.cpu_per_value_s;
  }
  if (r.f_ran && r.c && r.f.cpu_per_value_s > 0) {
    r.ratio_f = r.c->cpu_per_value_s / r.f.cpu_per_value_s;
    r.ratio_f_per_scrape = r.c->cpu_per_scrape_s / r.f.cpu_per_cycle_s;
    r.ratio_f_met = r.ratio_f >= kGoalRatio;
    const double with_ioctl =
        (r.f.cpu_per_cycle_s +
         static_cast<double>(r.f_floor.nvml_calls_per_cycle) * r.f_floor.ioctl_ns * 1e-9) /
        static_cast<double>(r.f.values.ok);
    r.ratio_f_with_ioctl = r.c->cpu_per_value_s / with_ioctl;
  }
  if (r.f_ran && r.c_lean && r.f.cpu_per_value_s > 0) {
    r.ratio_f_lean = r.c_lean->cpu_per_value_s / r.f.cpu_per_value_s;
  }
  r.cpu_percent_100hz = r.b.cpu_percent + r.b.rediscovery_percent;
  r.cpu_met = r.cpu_percent_100hz < kGoalCpuPercent;

  if (quiet) {
    PrintJson(r);
  } else {
    PrintTable(r);
  }
  return r.c_error.empty() && r.f_error.empty() ? 0 : 1;
}

}  // namespace
}  // namespace ringside::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ringside-agent-bench: CPU cost of the agent's sampling on a DGX-class sysfs tree, "
      "against prometheus-node-exporter on the same tree.\n"
      "  ringside-agent-bench [--cycles=2000] [--scrapes=200] [--interval=10ms] "
      "[--duration=10s] [--rounds=5] [--json] [--tree=DIR]");
  std::vector<std::string> args = ringside::daemon::NormalizeFlagNames(argc, argv);
  std::vector<char*> argp = ringside::daemon::ArgvPointers(args);
  absl::ParseCommandLine(static_cast<int>(args.size()), argp.data());
  return ringside::bench::Main();
}
