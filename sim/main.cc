// ringside-sim: a simulated GPU cluster that runs the real ringside-agent, NCCL profiler plugin and
// ringside-aggregator unchanged, injects faults, and checks what they detect.
//   ringside-sim demo [--duration=150s] [--nodes=8 --gpus=8]
//   ringside-sim run SCENARIO.yaml [--report=FILE.md]
//   ringside-sim run --all [--scenarios=DIR] [--report=FILE.md]
//   ringside-sim check SCENARIO.yaml...          (parse and print, run nothing)
// docs/simulator.md describes the cluster, the faults, the scenario format and the scoring.
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "daemon/common/flags.h"
#include "sim/runner.h"
#include "sim/scenario.h"
#include "sim/scoring.h"

ABSL_FLAG(std::string, duration, "150s",
          "demo: how long it runs (\"150s\", \"2m30s\"; a bare number is seconds).");
ABSL_FLAG(int, nodes, 8, "demo: simulated nodes.");
ABSL_FLAG(int, gpus, 8, "demo: GPUs (and RoCE rails) per node.");
ABSL_FLAG(uint64_t, seed, 0, "Random seed (0: the scenario's own; the demo's is 1).");
ABSL_FLAG(absl::Duration, interval, absl::ZeroDuration(),
          "The agents' sampling interval (0: the scenario's own; the demo's is 1s).");
ABSL_FLAG(std::string, agent, "", "ringside-agent binary (default: next to this build).");
ABSL_FLAG(std::string, aggregator_bin, "", "ringside-aggregator binary (default: this build's).");
ABSL_FLAG(std::string, plugin, "", "libringside_nccl.so (default: this build's).");
ABSL_FLAG(std::string, nvml_library, "",
          "The fake libnvidia-ml.so.1 the agents load (default: this build's sim/nvml/).");
ABSL_FLAG(std::string, ctl, "", "The ringside CLI shown in the hints (default: this build's).");
ABSL_FLAG(std::string, work_dir, "",
          "Where trees, sockets, logs and the aggregator's state go (default: a temporary folder, "
          "removed at the end unless --keep).");
ABSL_FLAG(bool, keep, false, "Keep the work folder (logs, incidents.db) after the run.");
ABSL_FLAG(bool, all, false, "run: every *.yaml scenario in --scenarios.");
ABSL_FLAG(std::string, scenarios, "", "run --all: the scenario folder (default: tests/scenarios).");
ABSL_FLAG(std::string, report, "", "run: write a Markdown report here.");
ABSL_FLAG(bool, quiet, false, "run: do not print incidents as they happen.");
ABSL_FLAG(absl::Duration, step, absl::Milliseconds(250),
          "How often the simulated counters are written (keep it a fraction of --interval).");
ABSL_FLAG(std::string, only, "", "run --all: only scenarios whose file name contains this.");

namespace {

using namespace ringside::sim;  // NOLINT: a thin main

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

std::string ExeDir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  return std::filesystem::path(buf).parent_path().string();
}

std::string Or(const std::string& flag, const std::string& fallback) {
  return flag.empty() ? fallback : flag;
}

ClusterOptions Binaries() {
  const std::string dir = ExeDir();
  ClusterOptions o;
  o.agent_bin = Or(absl::GetFlag(FLAGS_agent), dir + "/../daemon/ringside-agent");
  o.aggregator_bin = Or(absl::GetFlag(FLAGS_aggregator_bin), dir + "/../daemon/ringside-aggregator");
  o.plugin = Or(absl::GetFlag(FLAGS_plugin), dir + "/../collectors/nccl_plugin/libringside_nccl.so");
  o.nvml_library = Or(absl::GetFlag(FLAGS_nvml_library), dir + "/nvml/libnvidia-ml.so.1");
  o.step = std::max(absl::Milliseconds(20), absl::GetFlag(FLAGS_step));
  return o;
}

std::string CtlBin() {
  return Or(absl::GetFlag(FLAGS_ctl),
            std::filesystem::path(ExeDir() + "/../daemon/ringside").lexically_normal().string());
}

void ApplyOverrides(Scenario& s) {
  if (absl::GetFlag(FLAGS_seed) != 0) s.seed = absl::GetFlag(FLAGS_seed);
  if (absl::GetFlag(FLAGS_interval) > absl::ZeroDuration()) s.interval = absl::GetFlag(FLAGS_interval);
}

// A work folder for one run; removed afterwards unless --keep or --work-dir.
struct WorkDir {
  std::string path;
  bool remove = false;
  explicit WorkDir(const std::string& name) {
    const std::string given = absl::GetFlag(FLAGS_work_dir);
    if (!given.empty()) {
      path = given + "/" + name;
      std::filesystem::create_directories(path);
      return;
    }
    std::string tmpl = (std::filesystem::temp_directory_path() / "ringside-sim-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path = tmpl;
    remove = !absl::GetFlag(FLAGS_keep);
  }
  ~WorkDir() {
    if (remove && !path.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    } else if (!path.empty()) {
      std::printf("work folder kept: %s (aggregator.log, node-*/agent.log, aggregator/incidents.db)\n",
                  path.c_str());
    }
  }
};

void PrintCpu(const RunResult& r, const Scenario& s) {
  const double secs = absl::ToDoubleSeconds(r.ran);
  if (secs <= 0) return;
  std::printf(
      "CPU over %.0f s (cores): simulator %.3f, %d agents %.3f (%.4f each), aggregator %.3f, "
      "job processes %.3f\n",
      secs, r.cpu.sim / secs, s.nodes, r.cpu.agents / secs, r.cpu.agents / secs / s.nodes,
      r.cpu.aggregator / secs, r.cpu.jobs / secs);
}

int Demo() {
  const int nodes = absl::GetFlag(FLAGS_nodes), gpus = absl::GetFlag(FLAGS_gpus);
  if (nodes < 1 || nodes > 1024 || gpus < 1 || gpus > 16) {
    std::fprintf(stderr, "ringside-sim: --nodes 1..1024, --gpus 1..16\n");
    return 2;
  }
  absl::Duration duration;
  double secs = 0;
  const std::string d = absl::GetFlag(FLAGS_duration);
  if (absl::SimpleAtod(d, &secs) && secs > 0 && secs < 1e7) {
    duration = absl::Seconds(secs);
  } else if (!absl::ParseDuration(d, &duration) || duration <= absl::ZeroDuration()) {
    std::fprintf(stderr, "ringside-sim: --duration: bad duration \"%s\"\n", d.c_str());
    return 2;
  }
  Scenario s = DemoScenario(nodes, gpus, duration);
  ApplyOverrides(s);
  WorkDir work("demo");
  if (work.path.empty()) {
    std::perror("ringside-sim: mkdtemp");
    return 1;
  }
  ClusterOptions co = Binaries();
  co.work_dir = work.path;
  RunOptions ro;
  ro.live = true;
  ro.ctl_bin = CtlBin();
  std::printf("ringside-sim demo: a simulated GPU cluster running the real agent, plugin and "
              "aggregator (work folder %s)\n",
              work.path.c_str());
  absl::StatusOr<RunResult> r = RunScenario(s, co, ro, &g_stop);
  if (!r.ok()) {
    std::fprintf(stderr, "ringside-sim: %s\n", r.status().ToString().c_str());
    return 1;
  }
  std::printf("\n%s after %.0f s. Incidents read from the aggregator (%s): %zu.\n\n",
              r->interrupted ? "Stopped" : "Done", absl::ToDoubleSeconds(r->ran),
              r->incident_source.c_str(), r->incidents.size());
  std::printf("%s", FormatScoreTable(s, r->score).c_str());
  PrintCpu(*r, s);
  for (const std::string& p : r->problems) std::printf("problem: %s\n", p.c_str());
  const bool ok = r->score.all_detected();
  std::printf("%s\n", ok ? "Every injected fault was detected with the right entity and cause."
                         : "Some injected faults were not detected as expected (see above).");
  return ok ? 0 : 1;
}

int Run(const std::vector<std::string>& files) {
  std::vector<std::string> paths = files;
  if (absl::GetFlag(FLAGS_all)) {
    std::string dir = absl::GetFlag(FLAGS_scenarios);
    if (dir.empty()) dir = "tests/scenarios";
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".yaml" &&
          e.path().filename().string().find(absl::GetFlag(FLAGS_only)) != std::string::npos) {
        paths.push_back(e.path().string());
      }
    }
    if (ec) {
      std::fprintf(stderr, "ringside-sim: %s: %s\n", dir.c_str(), ec.message().c_str());
      return 2;
    }
    std::sort(paths.begin(), paths.end());
  }
  if (paths.empty()) {
    std::fprintf(stderr, "usage: ringside-sim run SCENARIO.yaml... | run --all [--report=FILE]\n");
    return 2;
  }
  std::vector<std::pair<Scenario, ScoreReport>> runs;
  bool all_ok = true;
  double wall = 0;
  for (const std::string& path : paths) {
    absl::StatusOr<Scenario> s = LoadScenario(path);
    if (!s.ok()) {
      std::fprintf(stderr, "ringside-sim: %s\n", s.status().ToString().c_str());
      return 2;
    }
    ApplyOverrides(*s);
    std::printf("=== %s (%s): %s\n", s->name.c_str(), path.c_str(), s->description.c_str());
    std::fflush(stdout);
    WorkDir work(s->name);
    ClusterOptions co = Binaries();
    co.work_dir = work.path;
    RunOptions ro;
    ro.live = !absl::GetFlag(FLAGS_quiet);
    ro.ctl_bin = CtlBin();
    absl::StatusOr<RunResult> r = RunScenario(*s, co, ro, &g_stop);
    if (!r.ok()) {
      std::fprintf(stderr, "ringside-sim: %s: %s\n", path.c_str(), r.status().ToString().c_str());
      return 1;
    }
    wall += absl::ToDoubleSeconds(r->ran);
    std::printf("%s", FormatScoreTable(*s, r->score).c_str());
    PrintCpu(*r, *s);
    const bool ok = r->score.all_detected() && r->score.false_alarms.empty();
    std::printf("=== %s: %s\n\n", s->name.c_str(), ok ? "PASS" : "FAIL");
    all_ok &= ok;
    runs.emplace_back(*s, r->score);
    if (g_stop) break;
  }
  const std::string report = absl::GetFlag(FLAGS_report);
  if (!report.empty()) {
    std::string header = absl::StrFormat(
        "# ringside-sim scenario report\n\n%d scenarios, %.0f s of wall time, run on %s with the "
        "real ringside-agent, libringside_nccl.so and ringside-aggregator.\n",
        runs.size(), wall, absl::FormatTime("%Y-%m-%d %H:%M UTC", absl::Now(), absl::UTCTimeZone()));
    std::ofstream out(report);
    out << MarkdownReport(runs, header);
    if (!out) {
      std::fprintf(stderr, "ringside-sim: cannot write %s\n", report.c_str());
      return 1;
    }
    std::printf("report: %s\n", report.c_str());
  }
  return all_ok ? 0 : 1;
}

int Check(const std::vector<std::string>& files) {
  int rc = 0;
  for (const std::string& path : files) {
    absl::StatusOr<Scenario> s = LoadScenario(path);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
      rc = 1;
      continue;
    }
    std::printf("%s: %s — %d nodes × %d GPUs, %s, %zu faults\n", path.c_str(), s->name.c_str(),
                s->nodes, s->gpus, absl::FormatDuration(s->duration).c_str(), s->faults.size());
    for (const FaultSpec& f : s->faults) {
      for (const Expectation& e : f.expect) {
        std::printf("  %-15s at %-5s → %s %s%s%s\n", std::string(FaultKindName(f.kind)).c_str(),
                    absl::FormatDuration(f.start).c_str(), e.kind.c_str(),
                    EntityText(e.entity).c_str(), e.cause.empty() ? "" : " ← ", e.cause.c_str());
      }
      if (f.expect.empty()) {
        std::printf("  %-15s at %-5s → nothing\n", std::string(FaultKindName(f.kind)).c_str(),
                    absl::FormatDuration(f.start).c_str());
      }
    }
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ringside-sim: a simulated GPU cluster for ringside.\n"
      "  ringside-sim demo [--duration=150s] [--nodes=8 --gpus=8]\n"
      "  ringside-sim run SCENARIO.yaml... [--report=FILE.md]\n"
      "  ringside-sim run --all [--scenarios=tests/scenarios] [--report=FILE.md]\n"
      "  ringside-sim check SCENARIO.yaml...");
  std::vector<std::string> args = ringside::daemon::NormalizeFlagNames(argc, argv);
  std::vector<char*> argp = ringside::daemon::ArgvPointers(args);
  std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(args.size()), argp.data());
  setvbuf(stdout, nullptr, _IOLBF, 0);
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (rest.size() < 2) {
    std::fprintf(stderr, "%s\n", absl::ProgramUsageMessage().data());
    return 2;
  }
  const std::string cmd = rest[1];
  std::vector<std::string> files(rest.begin() + 2, rest.end());
  if (cmd == "demo") return Demo();
  if (cmd == "run") return Run(files);
  if (cmd == "check") return Check(files);
  std::fprintf(stderr, "ringside-sim: unknown command \"%s\"\n%s\n", cmd.c_str(),
               absl::ProgramUsageMessage().data());
  return 2;
}
