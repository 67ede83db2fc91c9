// TopologyText: analysis::Topology::Parse on arbitrary text, then every lookup on what it parsed.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/topology.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"

namespace ringside::fuzz {

bool TopologyText(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<analysis::Topology> t = analysis::Topology::Parse(text);
  if (!t.ok()) {
    FUZZ_CHECK(t.status().code() == absl::StatusCode::kInvalidArgument ||
               t.status().code() == absl::StatusCode::kDataLoss);
    return false;
  }
  FUZZ_CHECK(t->unnamed_cas() <= t->cas() || t->format() == analysis::Topology::Format::kNodeSwitchMap);
  for (const analysis::HcaAttachment& a : t->attachments()) {
    if (a.host.empty()) continue;
    FUZZ_CHECK(!t->HcasOf(a.host).empty());
    const std::string leaf = t->LeafOf(a.host, a.device);
    for (const std::string& l : t->LeavesOf(a.host)) {
      const std::vector<std::string> hosts = t->HostsOn(l);
      FUZZ_CHECK(!hosts.empty());
      (void)t->LeafName(l);
    }
    (void)leaf;
  }
  return true;
}

}  // namespace ringside::fuzz
