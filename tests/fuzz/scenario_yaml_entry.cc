// ScenarioYaml: the simulator's scenario parser (sim/scenario.h) on arbitrary text, then what the
// runner does next with a parsed scenario (default expectations, node names).
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/scenario.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"

namespace ringside::fuzz {

namespace s = ringside::sim;

bool ScenarioYaml(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<s::Scenario> sc = s::ParseScenario(text);
  if (!sc.ok()) {
    FUZZ_CHECK(sc.status().code() == absl::StatusCode::kInvalidArgument);
    return false;
  }
  // The limits ParseScenario promises (docs/simulator.md).
  FUZZ_CHECK(sc->nodes >= 1 && sc->nodes <= 4096);
  FUZZ_CHECK(sc->gpus >= 1 && sc->gpus <= 16);
  FUZZ_CHECK(sc->nvlinks >= 1 && sc->nvlinks <= 18);
  FUZZ_CHECK(sc->interval >= absl::Milliseconds(50) && sc->duration > absl::ZeroDuration());
  for (const s::FaultSpec& f : sc->faults) {
    FUZZ_CHECK(f.node >= 0 && f.node < sc->nodes);
    FUZZ_CHECK(f.rank < sc->ranks());
    FUZZ_CHECK(f.gpu >= 0 && f.gpu < sc->gpus);
    bool known = false;
    s::FaultKind k;
    known = s::ParseFaultKind(s::FaultKindName(f.kind), &k) && k == f.kind;
    FUZZ_CHECK(known);
  }
  s::FillDefaultExpectations(*sc);
  std::set<std::string> names;
  for (int i = 0; i < sc->nodes; ++i) FUZZ_CHECK(names.insert(sc->NodeName(i)).second);
  return true;
}

}  // namespace ringside::fuzz
