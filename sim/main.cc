// ringside-sim: a simulated GPU cluster that runs the real ringside-agent, NCCL profiler plugin and
// ringside-aggregator unchanged, injects faults, and checks what they detect.
//   ringside-sim demo [--duration=150s] [--nodes=8 --gpus=8]
//   ringside-sim run SCENARIO.yaml [--report=FILE.md]
//   ringside-sim run --all [--scenarios=DIR] [--report=FILE.md]
//   ringside-sim run --all --seeds=N [--jobs=K] [--report=FILE.md]   (N seeds per scenario)
//   ringside-sim check SCENARIO.yaml...          (parse and print, run nothing)
//   ringside-sim soak SCENARIO.yaml --node-hours=1000   (virtual clock, in one process)
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
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "daemon/common/flags.h"
#include "sim/runner.h"
#include "sim/scenario.h"
#include "sim/scoring.h"
#include "sim/soak.h"
#include "sim/fork_pool.h"
#include "sim/sweep.h"

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
ABSL_FLAG(int, seeds, 1,
          "run: run each scenario this many times, with seeds S, S+1, ... (S: --seed, else the "
          "scenario's own); the report pools every run.");
ABSL_FLAG(int, jobs, 1,
          "run: scenario runs at once, each in a child process with its own ports and work "
          "folder; with more than one, a run's output is printed when it ends.");
ABSL_FLAG(double, node_hours, 1000,
          "soak: simulated node-hours to run (the cluster runs node_hours / nodes hours).");
ABSL_FLAG(double, max_false_alarms_per_1000h, 1,
          "soak: exit 1 when false alarms per 1,000 node-hours exceed this.");

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

// One run of one scenario (in a child process of `run`): prints what happens and the score, and
// writes the result for the parent to `result_path`. Exit code 0 when it passed.
int RunOne(const std::string& path, bool several_seeds, SweepRun run, const std::string& result_path) {
  const Scenario& s = run.scenario;
  std::printf("=== %s (%s, seed %llu): %s\n", s.name.c_str(), path.c_str(),
              static_cast<unsigned long long>(s.seed), s.description.c_str());
  std::fflush(stdout);
  const std::string label = several_seeds ? absl::StrCat(s.name, "-seed", s.seed) : s.name;
  {
    WorkDir work(label);
    ClusterOptions co = Binaries();
    co.work_dir = work.path;
    RunOptions ro;
    ro.live = !absl::GetFlag(FLAGS_quiet);
    ro.ctl_bin = CtlBin();
    absl::StatusOr<RunResult> r = RunScenario(s, co, ro, &g_stop);
    if (!r.ok()) {
      std::fprintf(stderr, "ringside-sim: %s: %s\n", path.c_str(), r.status().ToString().c_str());
      run.error = r.status().ToString();
    } else {
      run.wall_seconds = absl::ToDoubleSeconds(r->ran);
      run.cpu_seconds = r->cpu.sim + r->cpu.agents + r->cpu.aggregator + r->cpu.jobs;
      run.interrupted = r->interrupted;
      run.problems = r->problems;
      run.score = r->score;
      std::printf("%s", FormatScoreTable(s, r->score).c_str());
      PrintCpu(*r, s);
      for (const std::string& p : r->problems) std::printf("problem: %s\n", p.c_str());
      std::printf("=== %s%s: %s\n\n", s.name.c_str(),
                  several_seeds ? absl::StrCat(" seed ", s.seed).c_str() : "",
                  run.passed() ? "PASS" : "FAIL");
    }
  }
  std::ofstream out(result_path);
  out << SweepRunToJson(run);
  return out && run.passed() ? 0 : 1;
}

int Run(const std::vector<std::string>& files, const std::vector<std::string>& args) {
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
  // Every (scenario, seed) run, loaded first so a bad file stops the sweep before it starts; run
  // seed by seed, so the large scenarios' runs do not all overlap.
  std::vector<Scenario> scenarios;
  for (const std::string& path : paths) {
    absl::StatusOr<Scenario> s = LoadScenario(path);
    if (!s.ok()) {
      std::fprintf(stderr, "ringside-sim: %s\n", s.status().ToString().c_str());
      return 2;
    }
    ApplyOverrides(*s);
    scenarios.push_back(*s);
  }
  std::vector<SweepRun> runs;
  std::vector<std::string> run_paths;
  for (int k = 0; k < std::max(1, absl::GetFlag(FLAGS_seeds)); ++k) {
    for (size_t i = 0; i < paths.size(); ++i) {
      runs.emplace_back();
      runs.back().scenario = scenarios[i];
      runs.back().scenario.seed = SweepSeeds(scenarios[i].seed, k + 1).back();
      run_paths.push_back(paths[i]);
    }
  }
  const int jobs = std::max(1, absl::GetFlag(FLAGS_jobs));
  const bool several_seeds = absl::GetFlag(FLAGS_seeds) > 1;
  std::string results = (std::filesystem::temp_directory_path() / "ringside-sim-runs-XXXXXX").string();
  if (mkdtemp(results.data()) == nullptr) {
    std::perror("ringside-sim: mkdtemp");
    return 1;
  }
  std::vector<bool> finished(runs.size(), false);
  const absl::Time began = absl::Now();
  auto result_file = [&](int i) { return absl::StrCat(results, "/run-", i, ".json"); };
  auto log_file = [&](int i) { return absl::StrCat(results, "/run-", i, ".log"); };
  auto task = [&](int i) {  // in the child
    if (jobs > 1 && (std::freopen(log_file(i).c_str(), "w", stdout) == nullptr ||
                     dup2(fileno(stdout), 2) < 0)) {
      return 1;
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    return RunOne(run_paths[i], several_seeds, runs[i], result_file(i));
  };
  auto done = [&](int i, int rc) {  // in the parent, as each run ends
    if (jobs > 1) {
      std::ifstream log(log_file(i));
      std::printf("%s", std::string(std::istreambuf_iterator<char>(log), {}).c_str());
    }
    std::ifstream in(result_file(i));
    const std::string text(std::istreambuf_iterator<char>(in), {});
    finished[i] = true;
    if (text.empty()) {
      runs[i].error = absl::StrCat("the run ended (code ", rc, ") without a result");
    } else if (absl::Status st = SweepRunFromJson(text, &runs[i]); !st.ok()) {
      runs[i].error = st.ToString();
    }
    if (!runs[i].error.empty()) {
      std::printf("=== %s seed %llu: FAIL (%s)\n\n", runs[i].scenario.name.c_str(),
                  static_cast<unsigned long long>(runs[i].scenario.seed), runs[i].error.c_str());
    }
  };
  RunInChildren(static_cast<int>(runs.size()), task, done, {jobs, &g_stop});
  std::error_code ec;
  std::filesystem::remove_all(results, ec);
  std::vector<SweepRun> ran;
  double wall = 0;
  bool all_ok = true;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!finished[i]) continue;  // not started: interrupted before its turn
    ran.push_back(runs[i]);
    wall += runs[i].wall_seconds;
    all_ok &= runs[i].passed();
  }
  std::stable_sort(ran.begin(), ran.end(), [](const SweepRun& a, const SweepRun& b) {
    return a.scenario.name != b.scenario.name ? a.scenario.name < b.scenario.name
                                              : a.scenario.seed < b.scenario.seed;
  });
  if (ran.size() > 1) {
    std::printf("%zu runs (%.0f s of simulated cluster time, %.0f s of wall time, --jobs=%d):\n%s",
                ran.size(), wall, absl::ToDoubleSeconds(absl::Now() - began), jobs,
                SweepSummary(ran).c_str());
  }
  const std::string report = absl::GetFlag(FLAGS_report);
  if (!report.empty()) {
    std::string header = absl::StrFormat(
        "# ringside-sim scenario report\n\n%d runs of %d scenarios (%d seeds each), %.0f s of run "
        "time in %.0f s of wall time (--jobs=%d), on %s with the real ringside-agent, "
        "libringside_nccl.so and ringside-aggregator.\n\n```sh\n%s\n```\n",
        ran.size(), paths.size(), std::max(1, absl::GetFlag(FLAGS_seeds)), wall,
        absl::ToDoubleSeconds(absl::Now() - began), jobs,
        absl::FormatTime("%Y-%m-%d %H:%M UTC", absl::Now(), absl::UTCTimeZone()),
        absl::StrJoin(args, " "));
    std::ofstream out(report);
    out << SweepMarkdown(ran, header);
    if (!out) {
      std::fprintf(stderr, "ringside-sim: cannot write %s\n", report.c_str());
      return 1;
    }
    std::printf("report: %s\n", report.c_str());
  }
  return all_ok && !g_stop ? 0 : 1;
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

// `soak`: the scenario's cluster in one process on a virtual clock (sim/soak.h). --nodes, when
// given, replaces the scenario's node count; --seed and --interval as for run.
int Soak(const std::vector<std::string>& files, const std::vector<std::string>& args) {
  if (files.size() != 1) {
    std::fprintf(stderr, "usage: ringside-sim soak SCENARIO.yaml [--node-hours=1000] [--nodes=N] "
                         "[--interval=1s] [--seed=N] [--report=FILE.md]\n");
    return 2;
  }
  absl::StatusOr<Scenario> s = LoadScenario(files[0]);
  if (!s.ok()) {
    std::fprintf(stderr, "ringside-sim: %s\n", s.status().ToString().c_str());
    return 2;
  }
  ApplyOverrides(*s);
  const bool nodes_given = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "--nodes" || a.rfind("--nodes=", 0) == 0 || a == "-nodes" ||
           a.rfind("-nodes=", 0) == 0;
  });
  if (nodes_given) {
    if (absl::GetFlag(FLAGS_nodes) < 1 || absl::GetFlag(FLAGS_nodes) > 1024) {
      std::fprintf(stderr, "ringside-sim: --nodes 1..1024\n");
      return 2;
    }
    s->nodes = absl::GetFlag(FLAGS_nodes);
  }
  // The trees are rewritten every cycle: on tmpfs when there is one, unless --work-dir says.
  std::string work_base = absl::GetFlag(FLAGS_work_dir);
  bool remove = false;
  if (work_base.empty()) {
    const std::string parent = access("/dev/shm", W_OK) == 0
                                   ? std::string("/dev/shm")
                                   : std::filesystem::temp_directory_path().string();
    std::string tmpl = parent + "/ringside-soak-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("ringside-sim: mkdtemp");
      return 1;
    }
    work_base = tmpl;
    remove = !absl::GetFlag(FLAGS_keep);
  } else {
    work_base += "/soak-" + s->name;
    std::filesystem::create_directories(work_base);
  }
  SoakOptions o;
  o.node_hours = absl::GetFlag(FLAGS_node_hours);
  o.work_dir = work_base;
  o.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  if (!absl::GetFlag(FLAGS_quiet)) {
    o.on_incident = [](const SimIncident& i) {
      std::fprintf(stderr, "soak: incident #%llu %s %s\n", static_cast<unsigned long long>(i.id),
                   i.kind.c_str(), EntityText(i.entity).c_str());
    };
  }
  std::printf("=== soak %s (%s): %d nodes x %d GPUs, every %s, %.4g node-hours on a virtual "
              "clock (trees in %s)\n",
              s->name.c_str(), files[0].c_str(), s->nodes, s->gpus,
              absl::FormatDuration(s->interval).c_str(), o.node_hours, work_base.c_str());
  absl::StatusOr<SoakResult> r = RunSoak(*s, o, &g_stop);
  if (remove) {
    std::error_code ec;
    std::filesystem::remove_all(work_base, ec);
  }
  if (!r.ok()) {
    std::fprintf(stderr, "ringside-sim: %s\n", r.status().ToString().c_str());
    return 1;
  }
  const double bound = absl::GetFlag(FLAGS_max_false_alarms_per_1000h);
  std::printf("%s", FormatSoakSummary(*s, *r, bound).c_str());
  if (const std::string report = absl::GetFlag(FLAGS_report); !report.empty()) {
    std::string command = "ringside-sim";
    for (size_t i = 1; i < args.size(); ++i) absl::StrAppend(&command, " ", args[i]);
    std::ofstream out(report, std::ios::app);
    out << SoakMarkdown(*s, *r, bound, command);
    if (!out) {
      std::fprintf(stderr, "ringside-sim: cannot write %s\n", report.c_str());
      return 1;
    }
    std::printf("report appended to %s\n", report.c_str());
  }
  const bool ok = !r->interrupted && r->false_alarms_per_1000h() <= bound &&
                  (s->faults.empty() || r->score.all_detected());
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ringside-sim: a simulated GPU cluster for ringside.\n"
      "  ringside-sim demo [--duration=150s] [--nodes=8 --gpus=8]\n"
      "  ringside-sim run SCENARIO.yaml... [--report=FILE.md]\n"
      "  ringside-sim run --all [--scenarios=tests/scenarios] [--report=FILE.md]\n"
      "  ringside-sim run --all --seeds=N [--jobs=K] [--report=FILE.md]\n"
      "  ringside-sim check SCENARIO.yaml...\n"
      "  ringside-sim soak SCENARIO.yaml [--node-hours=1000] [--nodes=N] [--report=FILE.md]");
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
  if (cmd == "run") return Run(files, args);
  if (cmd == "check") return Check(files);
  if (cmd == "soak") return Soak(files, std::vector<std::string>(argv, argv + argc));
  std::fprintf(stderr, "ringside-sim: unknown command \"%s\"\n%s\n", cmd.c_str(),
               absl::ProgramUsageMessage().data());
  return 2;
}
