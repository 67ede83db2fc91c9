// Reading what infiniband-diags' perfquery prints, to check the fabric scan against it.
// Compiled into the tests that use it (ibmad_test, ibsim_fabric_test).
#ifndef RINGSIDE_TESTS_TESTING_PERFQUERY_TEXT_H_
#define RINGSIDE_TESTS_TESTING_PERFQUERY_TEXT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ringside::testing {

// One "# Port counters: Lid 18 port 9 (CapMask: 0x1300)" or "# Port extended counters: ..." block.
struct PerfqueryBlock {
  bool extended = false;
  uint32_t lid = 0;
  uint32_t port = 0;
  uint32_t cap_mask = 0;
  std::map<std::string, uint64_t> fields;  // by perfquery's name ("SymbolErrorCounter")
};

// Every block of a perfquery output, in order. Lines that are not "Name:....value" are skipped;
// values may be decimal or 0x-hex.
std::vector<PerfqueryBlock> ParsePerfquery(absl::string_view text);

// The scan's (and sysfs') counter name for a perfquery field; empty for fields the scan does not
// export (PortSelect, CounterSelect, CounterSelect2, QP1Dropped).
absl::string_view ScanCounterOf(absl::string_view perfquery_field);

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_PERFQUERY_TEXT_H_
