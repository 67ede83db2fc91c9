// Many runs of the scenario suite (`ringside-sim run --seeds=N --jobs=K`, docs/simulator.md): the
// seeds each scenario runs with, one run's result as it travels from the child process that ran
// it, and the report that pools every run per fault class with how much each figure is worth
// (Wilson 95 % lower bounds, time-to-detect quantiles, false alarms per node-hour with a Poisson
// upper bound).
#ifndef RINGSIDE_SIM_SWEEP_H_
#define RINGSIDE_SIM_SWEEP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/scenario.h"
#include "sim/scoring.h"

namespace ringside::sim {

// `n` seeds from `first`: first, first + 1, … (n < 1 counts as 1).
std::vector<uint64_t> SweepSeeds(uint64_t first, int n);

// One run of one scenario with one seed.
struct SweepRun {
  Scenario scenario;  // as run (its seed is the run's)
  double wall_seconds = 0;
  double cpu_seconds = 0;  // the simulator, agents, aggregator and job processes
  bool interrupted = false;
  std::string error;  // the run failed to start or to report ("" when it ran)
  std::vector<std::string> problems;
  ScoreReport score;
  // Ran to the end, every expectation met (detected, entity, cause), no false alarm.
  bool passed() const;
};

// The parts of a run a child process hands back to its parent (the scenario stays with the
// parent): JSON, round-trips every field the report uses.
std::string SweepRunToJson(const SweepRun& r);
absl::Status SweepRunFromJson(const std::string& text, SweepRun* r);

// Per fault class over every run; `runs` (optional) gets how many runs had the class.
std::map<std::string, ClassScore> TotalByClass(const std::vector<SweepRun>& runs,
                                               std::map<std::string, int>* runs_with = nullptr);

// The Markdown report: per fault class with bounds, false alarms, one line per run, and the
// score tables of the runs that failed.
std::string SweepMarkdown(const std::vector<SweepRun>& runs, const std::string& header);

// A short plain-text summary per fault class (printed at the end of a sweep).
std::string SweepSummary(const std::vector<SweepRun>& runs);

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_SWEEP_H_
