// ringside-sim: a simulated node for people without an InfiniBand fabric or GPUs.
//   ringside-sim demo [--agent=PATH] [--duration=60s] [--listen=127.0.0.1:9471]
// writes a DGX-class sysfs tree (8 InfiniBand HCAs, 2 RoCE functions with netdevs), runs the real
// ringside-agent on it printing live rates, and drives traffic and faults through the same files
// the kernel would change: a link flap, a symbol-error burst, ECN congestion, a 32-bit wrap.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "daemon/common/flags.h"
#include "daemon/common/signals.h"
#include "sim/node_animator.h"
#include "sim/sysfs_tree.h"

ABSL_FLAG(std::string, agent, "ringside-agent", "Path of the ringside-agent binary to run.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(60), "How long the demo runs.");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(1), "The agent's sampling interval.");
ABSL_FLAG(std::string, listen, "127.0.0.1:9471", "The agent's /metrics address.");
ABSL_FLAG(std::string, tree, "", "Where to write the sysfs tree (default: a temporary folder).");
ABSL_FLAG(uint64_t, seed, 1, "Random seed of the traffic noise.");

namespace {

using ringside::sim::AnimatedPort;
using ringside::sim::HcaSpec;
using ringside::sim::PortFault;

int Demo() {
  std::string tree = absl::GetFlag(FLAGS_tree);
  bool remove_tree = false;
  if (tree.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ringside-demo-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("ringside-sim: mkdtemp");
      return 1;
    }
    tree = tmpl;
    remove_tree = true;
  }
  const std::string sys = tree + "/sys";
  ringside::sim::SysfsTreeWriter writer(sys);
  std::vector<AnimatedPort> ports;
  for (int i = 0; i < 10; ++i) {
    HcaSpec h;
    h.name = absl::StrCat("mlx5_", i);
    h.pci = absl::StrFormat("0000:%02x:00.0", 0x17 + i * 0x10);
    h.node_guid = absl::StrFormat("b83f:d203:00%02x:3456", i);
    AnimatedPort p;
    p.device = h.name;
    if (i == 2) {  // a slightly lossy path whose 32-bit counter wraps about 10 s in
      p.out_of_sequence_per_second = 400;
      p.out_of_sequence_start = 4294967295u - 4000;
    }
    if (i >= 8) {  // two RoCE functions for storage and the front end
      h.link_layer = "Ethernet";
      h.rate = "200 Gb/sec (4X HDR)";
      h.netdev = absl::StrCat("ens", i - 7, "f0np0");
      p.roce = true;
      p.netdev = h.netdev;
      p.gbytes_per_second = 5;
    }
    if (absl::Status s = writer.AddHca(h); !s.ok()) {
      std::fprintf(stderr, "ringside-sim: %s\n", s.ToString().c_str());
      return 1;
    }
    ports.push_back(p);
  }
  const std::string ethtool_dir = tree + "/ethtool";
  std::filesystem::create_directories(ethtool_dir);
  ringside::sim::NodeAnimator animator(&writer, ports, absl::GetFlag(FLAGS_seed), ethtool_dir);
  struct Scheduled {
    PortFault fault;
    const char* what;
  };
  const std::vector<Scheduled> schedule = {
      {{PortFault::Kind::kSymbolErrors, "mlx5_5", 1, absl::Seconds(8), absl::Seconds(15)},
       "symbol-error burst on mlx5_5 port 1 (a degrading cable)"},
      {{PortFault::Kind::kEcnCongestion, "mlx5_8", 1, absl::Seconds(18), absl::Seconds(20)},
       "ECN congestion on RoCE port mlx5_8 (ens1f0np0)"},
      {{PortFault::Kind::kFlap, "mlx5_3", 1, absl::Seconds(25), absl::Seconds(25)},
       "link flap on mlx5_3 port 1 (down 3 s of every 10 s)"},
      {{PortFault::Kind::kPauseStorm, "mlx5_9", 1, absl::Seconds(35), absl::Seconds(15)},
       "PFC pause storm sent by ens2f0np0 (mlx5_9) on priority 3"},
      {{PortFault::Kind::kPaused, "mlx5_8", 1, absl::Seconds(36), absl::Seconds(14)},
       "ens1f0np0 (mlx5_8) paused by its peer on priority 3"},
  };
  for (const Scheduled& s : schedule) animator.AddFault(s.fault);
  if (absl::Status s = animator.Step(absl::ZeroDuration()); !s.ok()) {
    std::fprintf(stderr, "ringside-sim: %s\n", s.ToString().c_str());
    return 1;
  }

  absl::Notification stop;
  ringside::daemon::InstallStopSignals(&stop);

  const std::string listen = absl::GetFlag(FLAGS_listen);
  std::vector<std::string> args = {absl::GetFlag(FLAGS_agent), "--sysfs-root=" + sys,
                                   "--node-name=sim-node-01", "--print-rates", "--rates-top=12",
                                   "--ethtool-source=dir:" + ethtool_dir,
                                   "--listen=" + listen,
                                   "--interval=" + absl::FormatDuration(absl::GetFlag(FLAGS_interval))};
  std::printf("ringside-sim demo: a DGX-class node (8 InfiniBand HCAs, 2 RoCE ports) in %s\n",
              sys.c_str());
  std::printf("  agent: %s\n", absl::StrJoin(args, " ").c_str());
  std::printf("  metrics: curl -s http://%s/metrics | grep ringside_ib_port_link_downed\n",
              listen.c_str());
  std::printf("  faults ahead:\n");
  for (const Scheduled& s : schedule) {
    std::printf("    t=%-4s %s\n", absl::FormatDuration(s.fault.start).c_str(), s.what);
  }
  std::fflush(stdout);

  pid_t agent = fork();
  if (agent == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "ringside-sim: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }

  const absl::Time start = absl::Now();
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  size_t announced = 0;
  int status = 0;
  bool agent_exited = false;
  while (!stop.HasBeenNotified()) {
    const absl::Duration t = absl::Now() - start;
    if (t >= duration) break;
    while (announced < schedule.size() && t >= schedule[announced].fault.start) {
      std::printf(">>> t=%s injecting: %s\n",
                  absl::FormatDuration(absl::Trunc(t, absl::Milliseconds(100))).c_str(),
                  schedule[announced].what);
      std::fflush(stdout);
      ++announced;
    }
    if (absl::Status s = animator.Step(t); !s.ok()) {
      std::fprintf(stderr, "ringside-sim: %s\n", s.ToString().c_str());
    }
    if (waitpid(agent, &status, WNOHANG) == agent) {
      agent_exited = true;
      break;
    }
    stop.WaitForNotificationWithTimeout(absl::Milliseconds(200));
  }
  if (!agent_exited) {
    kill(agent, SIGTERM);
    waitpid(agent, &status, 0);
  }
  if (remove_tree) {
    std::error_code ec;
    std::filesystem::remove_all(tree, ec);
  }
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::printf("ringside-sim demo: done after %s; agent %s\n",
              absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Seconds(1))).c_str(),
              ok ? "exited cleanly" : "failed");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ringside-sim demo [--agent=PATH] [--duration=60s]: a simulated node with injected faults.");
  std::vector<std::string> args = ringside::daemon::NormalizeFlagNames(argc, argv);
  std::vector<char*> argp = ringside::daemon::ArgvPointers(args);
  std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(args.size()), argp.data());
  if (rest.size() < 2 || std::string(rest[1]) != "demo") {
    std::fprintf(stderr, "usage: ringside-sim demo [--agent=PATH] [--duration=60s]\n");
    return 2;
  }
  return Demo();
}
