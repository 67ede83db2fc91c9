// Every detector threshold as a named option ("link.flap_window", "straggler.window", ...), so the
// aggregator can take them from flags or a file and list them with their defaults. One table in
// detection_options.cc names each field of FabricAnalysisOptions once; docs/detection.md lists the
// same names (a test checks both ways).
//
//   FabricAnalysisOptions o;
//   absl::Status s = SetDetectionOption(o, "link.flap_window", "5m");
//   s = ParseDetectionConfig("# comment\nstraggler.window = 50\n", o);
//   for (const DetectionOptionInfo& i : ListDetectionOptions(o)) ...   // name, value, help
//
// Values: durations as absl durations ("90s", "5m", "200us"), numbers, integers, booleans
// (true/false/1/0). A wrong name or value is an InvalidArgument naming the option.
#ifndef RINGSIDE_ANALYSIS_DETECTION_OPTIONS_H_
#define RINGSIDE_ANALYSIS_DETECTION_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "analysis/fabric_analysis.h"

namespace ringside::analysis {

struct DetectionOptionInfo {
  std::string name;   // "link.flap_window"
  std::string type;   // duration, number, integer, bool
  std::string value;  // current value, in the form SetDetectionOption takes
  std::string help;
};

absl::Status SetDetectionOption(FabricAnalysisOptions& options, absl::string_view name,
                                absl::string_view value);
// Lines of `name = value` (or `name value`); blank lines and `#` comments are skipped. Errors name
// the line.
absl::Status ParseDetectionConfig(absl::string_view text, FabricAnalysisOptions& options);
// "name=value,name=value" (the aggregator's --detect-set).
absl::Status ParseDetectionAssignments(absl::string_view list, FabricAnalysisOptions& options);
std::vector<DetectionOptionInfo> ListDetectionOptions(const FabricAnalysisOptions& options);

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_DETECTION_OPTIONS_H_
