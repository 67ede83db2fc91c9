// The aggregator's metric catalog: valid, conventional names; every family Collect() emits is in
// the catalog; docs/metrics.md "## Aggregator" lists the same families with the same types.
#include "daemon/aggregator/metrics/aggregator_metrics.h"
#include "daemon/aggregator/metrics/analysis_metrics.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "prometheus/check_names.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

std::string AggregatorSectionOfDocs() {
  std::string doc = testing::ReadFileOrEmpty(std::string(RINGSIDE_SOURCE_DIR) + "/docs/metrics.md");
  size_t start = doc.find("## Aggregator");
  if (start == std::string::npos) return "";
  size_t end = doc.find("\n## ", start + 1);
  return doc.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

TEST(AggregatorMetricsTest, NamesAreValidAndConventional) {
  std::set<std::string> seen;
  for (const AggregatorMetricSpec& m : AggregatorMetricCatalog()) {
    const std::string name(m.name);
    EXPECT_TRUE(prometheus::CheckMetricName(name)) << name;
    EXPECT_TRUE(absl::StartsWith(name, "ringside_aggregator_")) << name;
    EXPECT_EQ(absl::EndsWith(name, "_total"), m.type == prometheus::MetricType::Counter) << name;
    EXPECT_FALSE(m.help.empty()) << name;
    EXPECT_TRUE(seen.insert(name).second) << name << " twice";
  }
}

TEST(AggregatorMetricsTest, CollectEmitsOnlyCatalogFamilies) {
  IngestStats stats;
  IngestOptions o;
  IngestCore core(o, &stats);
  AggregatorCollectable c(&core, &stats, nullptr, "test");
  std::set<std::string> catalog;
  for (const AggregatorMetricSpec& m : AggregatorMetricCatalog())
    catalog.insert(std::string(m.name));
  std::vector<prometheus::MetricFamily> families = c.Collect();
  EXPECT_FALSE(families.empty());
  for (const prometheus::MetricFamily& f : families) {
    EXPECT_TRUE(catalog.count(f.name)) << f.name;
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const auto& l : m.label) EXPECT_TRUE(prometheus::CheckLabelName(l.name)) << l.name;
    }
  }
}

TEST(AggregatorMetricsTest, DocsListEveryMetricWithItsType) {
  const std::string docs = AggregatorSectionOfDocs();
  ASSERT_FALSE(docs.empty()) << "docs/metrics.md has no '## Aggregator' section";
  std::set<std::string> in_code;
  for (const AggregatorMetricSpec& m : AggregatorMetricCatalog()) {
    const std::string name(m.name);
    in_code.insert(name);
    const std::string type = m.type == prometheus::MetricType::Counter ? "counter" : "gauge";
    std::regex row("\\|\\s*`" + name + "`\\s*\\|\\s*" + type + "\\s*\\|");
    EXPECT_TRUE(std::regex_search(docs, row)) << name << " (" << type << ") is not in the docs";
  }
  // The topology families are the analysis' (AnalysisMetricCatalog, analysis_metrics_test.cc).
  for (const AnalysisMetricSpec& m : AnalysisMetricCatalog()) in_code.insert(std::string(m.name));
  std::regex any_name("`(ringside_aggregator_[a-z0-9_]+)`");
  for (auto it = std::sregex_iterator(docs.begin(), docs.end(), any_name);
       it != std::sregex_iterator(); ++it) {
    EXPECT_TRUE(in_code.count((*it)[1].str())) << (*it)[1].str() << " is documented, not exported";
  }
}

}  // namespace
}  // namespace ringside::daemon
