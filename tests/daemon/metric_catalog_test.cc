// The catalog in code and docs/metrics.md list the same agent metrics, with the same types, and
// every name follows Prometheus' rules and conventions.
#include "daemon/agent/metric_catalog.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "prometheus/check_names.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

std::string AgentSectionOfDocs() {
  std::string doc = testing::ReadFileOrEmpty(std::string(RINGSIDE_SOURCE_DIR) + "/docs/metrics.md");
  size_t start = doc.find("## Agent");
  if (start == std::string::npos) return "";
  size_t end = doc.find("\n## ", start + 1);
  return doc.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

TEST(MetricCatalogTest, NamesAreValidAndConventional) {
  std::set<std::string> seen;
  for (const MetricSpec& m : MetricCatalog()) {
    std::string name(m.name);
    EXPECT_TRUE(prometheus::CheckMetricName(name)) << name;
    EXPECT_TRUE(absl::StartsWith(name, "ringside_")) << name;
    if (m.type == MetricType::kCounter) {
      EXPECT_TRUE(absl::EndsWith(name, "_total")) << name;
    } else {
      EXPECT_FALSE(absl::EndsWith(name, "_total")) << name;
    }
    // Base units: no kilo/mega, no milliseconds.
    EXPECT_FALSE(absl::StrContains(name, "_milliseconds")) << name;
    EXPECT_FALSE(absl::StrContains(name, "_kilobytes")) << name;
    EXPECT_FALSE(m.help.empty()) << name;
    // A family name may be listed for several sources (e.g. never), but not twice for one.
    EXPECT_TRUE(seen.insert(std::string(m.source) + "/" + std::string(m.counter)).second) << name;
  }
  for (const char* label : {"node", "device", "port", "netdev", "counter", "collector"}) {
    EXPECT_TRUE(prometheus::CheckLabelName(label)) << label;
  }
}

TEST(MetricCatalogTest, DocsListEveryMetricWithItsType) {
  const std::string docs = AgentSectionOfDocs();
  ASSERT_FALSE(docs.empty()) << "docs/metrics.md has no '## Agent' section";
  std::set<std::string> in_code;
  for (const MetricSpec& m : MetricCatalog()) {
    const std::string name(m.name);
    in_code.insert(name);
    const std::string type = m.type == MetricType::kCounter ? "counter" : "gauge";
    std::regex row("\\|\\s*`" + name + "`\\s*\\|\\s*" + type + "\\s*\\|");
    EXPECT_TRUE(std::regex_search(docs, row)) << name << " (" << type << ") is not in docs/metrics.md";
  }
  std::regex any_name("`(ringside_[a-z0-9_]+)`");
  for (std::sregex_iterator it(docs.begin(), docs.end(), any_name), end; it != end; ++it) {
    EXPECT_TRUE(in_code.count((*it)[1].str())) << (*it)[1].str()
                                               << " is documented but not in the catalog";
  }
}

}  // namespace
}  // namespace ringside::daemon
