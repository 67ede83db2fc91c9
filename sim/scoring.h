// Scores a scenario run against its ground truth. Per fault class (the fault's kind):
//  - recall: expected incidents raised (right kind, opened between the fault's start and its end
//    plus the scenario's grace);
//  - correct entity / correct cause: of those, how many name the expected entity (every key of the
//    expectation matches; a device also matches its netdev) and the expected first cause;
//  - precision: of the incidents attributed to the class (an expected kind within a fault's
//    window), how many match an expectation; kinds a fault is allowed to raise are not counted;
//  - time to detect: opened − fault start.
// Incidents no fault explains are false alarms, also given per node-hour.
#ifndef RINGSIDE_SIM_SCORING_H_
#define RINGSIDE_SIM_SCORING_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "sim/incident_reader.h"
#include "sim/scenario.h"

namespace ringside::sim {

struct ExpectationResult {
  int fault = 0;
  Expectation expect;
  uint64_t incident = 0;  // the matching incident (0: none with the right entity)
  bool detected = false;  // some incident of the kind in the window
  bool entity_ok = false;
  bool cause_ok = false;
  absl::Duration time_to_detect = absl::InfiniteDuration();
  std::string got;  // what was raised (kind, entity, cause), for the table
};

struct ClassScore {
  std::string fault_class;
  int faults = 0;
  int expected = 0, detected = 0, entity_ok = 0, cause_expected = 0, cause_ok = 0;
  int raised = 0, raised_ok = 0;
  int false_alarms = 0;  // negative classes (counter_reset, agent_crash): incidents they caused
  std::vector<double> ttd_seconds;
  double precision() const { return raised == 0 ? (false_alarms == 0 ? 1.0 : 0.0) : double(raised_ok) / raised; }
  double recall() const { return expected == 0 ? 1.0 : double(detected) / expected; }
  double entity() const { return detected == 0 ? (expected == 0 ? 1.0 : 0.0) : double(entity_ok) / expected; }
  double cause() const { return cause_expected == 0 ? 1.0 : double(cause_ok) / cause_expected; }
};

struct ScoreReport {
  std::vector<ExpectationResult> expectations;
  std::map<std::string, ClassScore> classes;
  std::vector<SimIncident> false_alarms;
  double node_hours = 0;
  bool all_detected() const;  // every expectation met with the right entity and cause
};

// Which fault an incident is explained by (-1: none); `expected` says whether it matches one of
// that fault's expectations (entity included), `allowed` whether it is a kind the fault may also
// raise.
int ExplainingFault(const Scenario& s, absl::Time t0, const SimIncident& inc, bool* expected,
                    bool* allowed = nullptr);

bool EntityMatches(const std::map<std::string, std::string>& want,
                   const std::map<std::string, std::string>& got);

ScoreReport Score(const Scenario& s, absl::Time t0, absl::Duration ran,
                  const std::vector<SimIncident>& incidents);

std::string EntityText(const std::map<std::string, std::string>& entity);
std::string CauseText(const SimIncident& inc);
// A plain-text table of the expectations and per-class scores.
std::string FormatScoreTable(const Scenario& s, const ScoreReport& r);

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_SCORING_H_
