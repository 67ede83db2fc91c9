// DetectionConfig: the detection-threshold parsers (analysis/detection_options.h) on arbitrary
// text, and the listing of what they set.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "analysis/detection_options.h"
#include "analysis/fabric_analysis.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"

namespace ringside::fuzz {

namespace a = ringside::analysis;

bool DetectionConfig(const uint8_t* data, size_t size) {
  if (size == 0) return false;
  const absl::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  a::FabricAnalysisOptions o;
  const absl::Status s = (data[0] & 1) ? a::ParseDetectionAssignments(text, o)
                                       : a::ParseDetectionConfig(text, o);
  if (!s.ok()) FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  // Whatever was set (all of it, or the lines before a refused one) lists as values the setter
  // takes back, and setting them again lists the same: the list is a fixed point.
  const std::vector<a::DetectionOptionInfo> listed = a::ListDetectionOptions(o);
  a::FabricAnalysisOptions again;
  for (const a::DetectionOptionInfo& i : listed) {
    FUZZ_CHECK(a::SetDetectionOption(again, i.name, i.value).ok());
  }
  const std::vector<a::DetectionOptionInfo> relisted = a::ListDetectionOptions(again);
  FUZZ_CHECK(relisted.size() == listed.size());
  for (size_t k = 0; k < listed.size(); ++k) FUZZ_CHECK(relisted[k].value == listed[k].value);
  return s.ok();
}

}  // namespace ringside::fuzz
