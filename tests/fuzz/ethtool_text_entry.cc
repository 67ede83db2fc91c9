// EthtoolText: the `ethtool -S` text parser (collectors/ethtool/ethtool_text.h) on arbitrary text.
#include <set>
#include <string>

#include "absl/strings/string_view.h"
#include "collectors/ethtool/ethtool_text.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_entries.h"

namespace ringside::fuzz {

bool EthtoolText(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  const collectors::EthtoolText t = collectors::ParseEthtoolText(text);
  FUZZ_CHECK(t.names.size() == t.values.size());
  const std::set<std::string> unique(t.names.begin(), t.names.end());
  FUZZ_CHECK(unique.size() == t.names.size());
  for (const std::string& d : t.duplicates) FUZZ_CHECK(unique.count(d) == 1);
  FUZZ_CHECK(t.first_malformed.size() <= 80);
  if (t.malformed == 0) FUZZ_CHECK(t.first_malformed.empty());
  return t.malformed == 0 && !t.error.has_value();
}

}  // namespace ringside::fuzz
