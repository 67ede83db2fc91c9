#include "sim/cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "sim/host_state.h"
#include "sim/job_runner.h"
#include "sim/node_build.h"
#include "sim/sim_names.h"
#include "sim/topology_writer.h"

namespace ringside::sim {
namespace {

volatile std::sig_atomic_t g_job_stop = 0;
void JobStop(int) { g_job_stop = 1; }

int64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double CpuSecondsOf(pid_t pid) {
  if (pid <= 0) return 0;
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> f = absl::StrSplit(text.substr(close + 2), ' ');
  if (f.size() < 13) return 0;
  // Fields 14 and 15 of stat (utime, stime) are 11 and 12 after the command.
  return (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

uint64_t SeedMix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A TCP port on 127.0.0.1 nobody listens on now (bound to 0, read back, closed).
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace

double SeedPhase(uint64_t seed) {
  return static_cast<double>(SeedMix(seed) >> 11) / 9007199254740992.0;
}

struct Cluster::Node {
  int index = 0;
  std::string name, dir, sys, ethtool, socket, nvml_config, log;
  std::unique_ptr<SysfsTreeWriter> tree;
  std::unique_ptr<NodeAnimator> animator;
  std::unique_ptr<NvmlState> nvml;
  std::unique_ptr<HostState> host;
  bool nvml_dynamic = false;
  ChildProcess agent;
  bool crashed = false;  // killed by a fault, not yet restarted
  int agent_starts = 0;
  std::vector<pid_t> jobs;  // one process per local rank
};

Cluster::Cluster(const Scenario& s, ClusterOptions o) : s_(s), o_(std::move(o)) {}

Cluster::~Cluster() { Stop(); }

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Start(const Scenario& scenario,
                                                        ClusterOptions options) {
  std::unique_ptr<Cluster> c(new Cluster(scenario, std::move(options)));
  c->sim_cpu_at_start_ = c->Cpu().sim;
  c->announced_.assign(scenario.faults.size(), false);
  c->ended_.assign(scenario.faults.size(), false);
  c->o_.shards = std::max(1, c->o_.shards);
  c->o_.replicas = std::max(1, c->o_.replicas);
  for (int k = 0; k < c->o_.shards; ++k) {
    for (int r = 0; r < c->o_.replicas; ++r) {
      Aggregator a;
      a.shard = k;
      a.replica = r;
      // The single aggregator keeps the layout every scenario has always had.
      const std::string name =
          c->Sharded() ? absl::StrCat("aggregator-", k, "-", std::string(1, static_cast<char>('a' + r)))
                       : std::string("aggregator");
      a.state_dir = c->o_.work_dir + "/" + name;
      a.log = c->o_.work_dir + "/" + name + ".log";
      std::filesystem::create_directories(a.state_dir);
      // Fixed ports when sharded: the shard map, --peers and the agents name them, and a
      // restarted replica comes back on them.
      if (c->Sharded()) {
        a.grpc_port = FreeLoopbackPort();
        a.http_port = FreeLoopbackPort();
        if (a.grpc_port == 0 || a.http_port == 0) {
          return absl::UnavailableError("no free loopback port for an aggregator");
        }
      }
      c->aggregators_.push_back(std::move(a));
    }
  }
  if (c->Sharded()) {
    c->shard_map_ = c->o_.work_dir + "/shards.txt";
    std::ofstream m(c->shard_map_);
    m << "# ringside-sim: " << c->o_.shards << " shards x " << c->o_.replicas << " replicas\n";
    for (int k = 0; k < c->o_.shards; ++k) {
      m << "shard-" << k;
      for (int r = 0; r < c->o_.replicas; ++r) {
        m << " 127.0.0.1:" << c->Agg(k, r).grpc_port;
      }
      m << "\n";
    }
    if (!m) return absl::InternalError("cannot write " + c->shard_map_);
  }
  // Topology: nodes under leaf switches, in ibnetdiscover's format (what a real fabric gives).
  c->topology_ = c->o_.work_dir + "/topology.ibnetdiscover";
  {
    std::ofstream t(c->topology_);
    t << IbnetdiscoverTopology(scenario);
    if (!t) return absl::InternalError("cannot write " + c->topology_);
  }
  for (int i = 0; i < scenario.nodes; ++i) {
    if (absl::Status s = c->BuildNode(i); !s.ok()) return s;
  }
  for (Aggregator& a : c->aggregators_) {
    if (absl::Status s = c->StartAggregator(a); !s.ok()) return s;
  }
  for (auto& n : c->nodes_) {
    if (absl::Status s = c->StartAgent(*n); !s.ok()) return s;
  }
  for (auto& n : c->nodes_) {
    if (!n->agent.WaitForLog("collective records on", absl::Seconds(30))) {
      return absl::UnavailableError(absl::StrCat("agent of ", n->name, " did not start: ",
                                                 n->agent.Log()));
    }
  }
  // The seed also sets the phase of the scenario's clock against the agents' sampling: time 0 is
  // a seed-derived fraction of an interval after the agents are up, so over seeds a fault starts
  // anywhere between two samples, as a real one would.
  absl::SleepFor(SeedPhase(scenario.seed) * scenario.interval);
  c->t0_ns_ = NowNs();
  if (scenario.job) {
    for (auto& n : c->nodes_) {
      if (absl::Status s = c->StartJob(*n); !s.ok()) return s;
    }
  }
  c->Step(absl::ZeroDuration());
  return c;
}

absl::Status Cluster::BuildNode(int i) {
  auto n = std::make_unique<Node>();
  n->index = i;
  n->name = s_.NodeName(i);
  n->dir = absl::StrCat(o_.work_dir, "/", n->name);
  n->sys = n->dir + "/sys";
  n->ethtool = n->dir + "/ethtool";
  n->socket = n->dir + "/collectives.sock";
  n->nvml_config = n->dir + "/nvml.conf";
  n->log = n->dir + "/agent.log";
  std::filesystem::create_directories(n->ethtool);
  n->tree = std::make_unique<SysfsTreeWriter>(n->sys);
  absl::StatusOr<std::vector<AnimatedPort>> ports = BuildNodeTree(s_, i, n->tree.get());
  if (!ports.ok()) return ports.status();
  AnimatorOptions ao;
  ao.noise = s_.noise;
  ao.background_noise = s_.background_noise;
  n->animator = std::make_unique<NodeAnimator>(n->tree.get(), std::move(*ports),
                                               s_.seed * 1000003 + i, n->ethtool, ao);
  for (PortFault& f : PortFaultsOfNode(s_, i)) n->animator->AddFault(std::move(f));
  for (const FaultSpec& f : s_.faults) {
    if ((f.kind == FaultKind::kNvlinkDegraded || f.kind == FaultKind::kGpuThermalSlowdown ||
         f.kind == FaultKind::kGpuXid) &&
        f.node == i) {
      n->nvml_dynamic = true;
    }
    if (f.kind == FaultKind::kGpuPowerCap) n->nvml_dynamic = true;
  }
  n->nvml = std::make_unique<NvmlState>(n->nvml_config, i, s_.gpus, s_.nvlinks);
  if (absl::Status s = n->nvml->Write(); !s.ok()) return s;
  n->host = std::make_unique<HostState>(n->dir, i * s_.gpus, s_.gpus);
  if (absl::Status s = n->host->Write(absl::ZeroDuration()); !s.ok()) return s;
  if (absl::Status s = n->animator->Step(absl::ZeroDuration()); !s.ok()) return s;
  nodes_.push_back(std::move(n));
  return absl::OkStatus();
}

absl::Status Cluster::StartAggregator(Aggregator& a) {
  std::vector<std::string> argv = {
      o_.aggregator_bin, absl::StrCat("--listen=127.0.0.1:", a.grpc_port),
      absl::StrCat("--http-listen=127.0.0.1:", a.http_port), "--state-dir=" + a.state_dir};
  if (o_.topology_file) argv.push_back("--topology=" + topology_);
  if (Sharded()) {
    argv.push_back("--shard-map=" + shard_map_);
    argv.push_back(absl::StrCat("--shard=shard-", a.shard));
    std::string peers;
    for (int r = 0; r < o_.replicas; ++r) {
      if (r == a.replica) continue;
      absl::StrAppend(&peers, peers.empty() ? "" : ",", "127.0.0.1:", Agg(a.shard, r).grpc_port);
    }
    if (!peers.empty()) argv.push_back("--peers=" + peers);
  }
  for (const std::string& x : s_.aggregator_args) argv.push_back(x);
  absl::StatusOr<ChildProcess> p = ChildProcess::Spawn(argv, {}, a.log);
  if (!p.ok()) return p.status();
  a.proc = *p;
  if (!a.proc.WaitForLog("HTTP (", absl::Seconds(30))) {
    return absl::UnavailableError("the aggregator did not start: " + a.proc.Log());
  }
  const std::string log = a.proc.Log();
  a.grpc_port = PortAfter(log, "ingest (gRPC) listening");
  a.http_port = PortAfter(log, "HTTP (");
  if (a.grpc_port == 0 || a.http_port == 0) {
    return absl::UnavailableError("no aggregator ports in its log: " + log);
  }
  return absl::OkStatus();
}

void Cluster::KillAggregator(int shard, int replica) {
  Aggregator& a = aggregators_[static_cast<size_t>(shard * o_.replicas + replica)];
  a.proc.Signal(SIGKILL);
  a.proc.Stop(absl::Seconds(2));
}

absl::Status Cluster::RestartAggregator(int shard, int replica, bool wipe_state) {
  Aggregator& a = aggregators_[static_cast<size_t>(shard * o_.replicas + replica)];
  if (a.proc.running()) return absl::FailedPreconditionError("the aggregator is running");
  if (wipe_state) {
    std::error_code ec;
    std::filesystem::remove_all(a.state_dir, ec);
    std::filesystem::create_directories(a.state_dir, ec);
    if (ec) return absl::InternalError("cannot empty " + a.state_dir + ": " + ec.message());
  }
  // The log file is appended to: the first run's lines stay before the second's.
  return StartAggregator(a);
}

absl::Status Cluster::StartAgent(Node& n) {
  std::vector<std::string> argv = {
      o_.agent_bin,
      "--sysfs-root=" + n.sys,
      "--node-name=" + n.name,
      "--interval=" + absl::FormatDuration(s_.interval),
      "--listen=127.0.0.1:0",
      "--ethtool-source=dir:" + n.ethtool,
      "--nvml-library=" + o_.nvml_library,
      "--link-events=false",
      "--collectives-socket=" + n.socket,
      "--procfs-root=" + n.host->procfs_root(),  // the node's pressure files
  };
  if (Sharded()) {
    argv.push_back("--shard-map=" + shard_map_);
    argv.push_back("--topology=" + topology_);
  } else {
    argv.push_back(absl::StrCat("--aggregator=127.0.0.1:", grpc_port()));
  }
  if (static_cast<size_t>(n.index) < o_.agent_args.size()) {
    for (const std::string& x : o_.agent_args[static_cast<size_t>(n.index)]) argv.push_back(x);
  }
  std::vector<std::string> env = {"RINGSIDE_FAKE_NVML_CONFIG=" + n.nvml_config};
  // The fake NVML re-reads its config on every call unless told not to; only nodes whose NVLinks
  // change during the scenario pay for that.
  if (!n.nvml_dynamic) env.push_back("RINGSIDE_FAKE_NVML_STATIC=1");
  absl::StatusOr<ChildProcess> p = ChildProcess::Spawn(argv, env, n.log);
  if (!p.ok()) return p.status();
  n.agent = *p;
  ++n.agent_starts;
  return absl::OkStatus();
}

absl::Status Cluster::StartJob(Node& n) {
  const pid_t parent = getpid();
  for (int g = 0; g < s_.gpus; ++g) {
    const int rank = n.index * s_.gpus + g;
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork failed");
    if (pid == 0) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);
      signal(SIGTERM, JobStop);
      signal(SIGINT, SIG_IGN);
      // The rank's own cgroup, as its plugin reads /proc/self/cgroup (sim/host_state.h).
      setenv("RINGSIDE_PROC_SELF_CGROUP", n.host->CgroupFile(rank).c_str(), 1);
      _exit(RunRankJob(s_, rank, o_.plugin, n.socket, t0_ns_, &g_job_stop));
    }
    n.jobs.push_back(pid);
  }
  return absl::OkStatus();
}

std::vector<std::string> Cluster::Step(absl::Duration t) {
  std::vector<std::string> said;
  const double dt = absl::ToDoubleSeconds(t - last_t_);
  last_t_ = t;
  for (size_t fi = 0; fi < s_.faults.size(); ++fi) {
    const FaultSpec& f = s_.faults[fi];
    Node& n = *nodes_[f.node];
    const bool active = t >= f.start && t < f.start + f.duration;
    if (!announced_[fi] && t >= f.start) {
      announced_[fi] = true;
      std::string what = absl::StrCat(FaultKindName(f.kind), " on ", n.name);
      if (IsPortFault(f.kind)) {
        int rail = 0;
        ParseRail(f.device, &rail);
        absl::StrAppend(&what, " ", f.device, " (", RailNetdev(rail), ")");
      }
      if (f.kind == FaultKind::kNvlinkDegraded) {
        absl::StrAppend(&what, " GPU ", f.gpu, " NVLink ", f.link);
      }
      if (f.kind == FaultKind::kGpuThermalSlowdown) absl::StrAppend(&what, " GPU ", f.gpu);
      if (f.kind == FaultKind::kGpuXid) absl::StrAppend(&what, " GPU ", f.gpu, " XID ", f.xid);
      if (f.kind == FaultKind::kGpuPowerCap) what = "gpu_power_cap on every GPU of every node";
      if (f.kind == FaultKind::kGpuXid) n.nvml->AddXid(f.gpu, f.xid);
      if (f.kind == FaultKind::kCpuThrottled) {
        absl::StrAppend(&what, " cgroup ", RankCgroup(f.rank), " throttled ",
                        f.throttled_share * 100, "% of each period");
      }
      if (f.rank >= 0) absl::StrAppend(&what, ", rank ", f.rank, " ", f.slowdown_pct, "% slower");
      if (f.kind == FaultKind::kJobSlowdown) absl::StrAppend(&what, ", collectives ", f.factor, "x");
      if (!f.note.empty()) absl::StrAppend(&what, " — ", f.note);
      said.push_back(what);
      if (f.kind == FaultKind::kAgentCrash) {
        n.agent.Signal(SIGKILL);
        n.agent.Stop(absl::Seconds(2));
        n.crashed = true;
      }
    }
    if (announced_[fi] && !ended_[fi] && !active) {
      ended_[fi] = true;
      if (f.kind == FaultKind::kAgentCrash && n.crashed) {
        n.crashed = false;
        if (absl::Status s = StartAgent(n); !s.ok()) said.push_back("agent restart failed: " + s.ToString());
        else said.push_back(absl::StrCat("agent of ", n.name, " restarted"));
      }
    }
    // GPU throttling follows the fault's window (wall clock: the fake's counters tick on it).
    if (f.kind == FaultKind::kGpuThermalSlowdown) {
      n.nvml->SetThermalSlowdown(f.gpu, active, absl::Now());
    }
    if (f.kind == FaultKind::kGpuPowerCap) {
      for (auto& node : nodes_) {
        for (int g = 0; g < s_.gpus; ++g) node->nvml->SetPowerCap(g, active, absl::Now());
      }
    }
    if (f.kind == FaultKind::kCpuThrottled) {
      n.host->SetThrottled(f.rank, active ? f.throttled_share : 0, t);
    }
    if (active && f.kind == FaultKind::kNvlinkDegraded) {
      n.nvml->AddErrors(f.gpu, f.link, static_cast<uint64_t>(1 + 2 * dt),
                        static_cast<uint64_t>(500 * dt));
    }
  }
  for (auto& n : nodes_) {
    if (absl::Status s = n->animator->Step(t); !s.ok()) said.push_back("animator: " + s.ToString());
    if (absl::Status s = n->nvml->Write(); !s.ok()) said.push_back("nvml: " + s.ToString());
    if (absl::Status s = n->host->Write(t); !s.ok()) said.push_back("host: " + s.ToString());
  }
  return said;
}

std::vector<int> Cluster::metrics_ports() const {
  std::vector<int> ports;
  for (const auto& n : nodes_) ports.push_back(PortAfter(n->agent.Log(), "serving /metrics"));
  return ports;
}

std::vector<std::string> Cluster::DeadAgents() {
  std::vector<std::string> dead;
  for (auto& n : nodes_) {
    if (!n->crashed && !n->agent.running()) dead.push_back(n->name);
  }
  return dead;
}

Cluster::CpuUse Cluster::Cpu() const {
  CpuUse u;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  u.sim = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
          ru.ru_stime.tv_usec / 1e6 - sim_cpu_at_start_;
  for (const Aggregator& a : aggregators_) u.aggregator += CpuSecondsOf(a.proc.pid());
  for (const auto& n : nodes_) {
    u.agents += CpuSecondsOf(n->agent.pid());
    for (pid_t j : n->jobs) u.jobs += CpuSecondsOf(j);
  }
  return u;
}

void Cluster::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& n : nodes_) {
    for (pid_t j : n->jobs) kill(j, SIGTERM);
  }
  for (auto& n : nodes_) {
    for (pid_t j : n->jobs) {
      int st = 0;
      for (int i = 0; i < 250 && waitpid(j, &st, WNOHANG) == 0; ++i) usleep(20000);
      if (waitpid(j, &st, WNOHANG) == 0) {
        kill(j, SIGKILL);
        waitpid(j, &st, 0);
      }
    }
    n->jobs.clear();
  }
  for (auto& n : nodes_) n->agent.Signal(SIGTERM);
  for (auto& n : nodes_) n->agent.Stop(absl::Seconds(5));
  for (Aggregator& a : aggregators_) a.proc.Stop(absl::Seconds(10));
}

}  // namespace ringside::sim
