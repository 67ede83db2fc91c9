// deploy/prometheus and dashboards/ as shipped: promtool accepts the scrape configuration and the
// rules, the rules' unit tests pass (every alert firing on a faulty series and not on a healthy
// one), and each dashboard is importable as documented — schema 39, a `datasource` variable that
// every panel and target uses, unique ids, and queries that name only metrics ringside exports or
// records.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/testing/process.h"

namespace ringside {
namespace {

const std::string kRoot = RINGSIDE_SOURCE_DIR;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

testing::RunResult Promtool(std::vector<std::string> args) {
  args.insert(args.begin(), "promtool");
  return testing::Run(args, "", absl::Seconds(60));
}

#define SKIP_WITHOUT_PROMTOOL(r) \
  if ((r).exit_code == 127) GTEST_SKIP() << "promtool is not installed"

TEST(PrometheusDeployTest, ConfigIsValid) {
  testing::RunResult r = Promtool({"check", "config", kRoot + "/deploy/prometheus/prometheus.yml"});
  SKIP_WITHOUT_PROMTOOL(r);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("SUCCESS"), std::string::npos) << r.out << r.err;
}

// The global Prometheus of federation.yml (docs/deploy-prometheus.md, "Federation").
TEST(PrometheusDeployTest, FederationConfigIsValid) {
  testing::RunResult r = Promtool({"check", "config", kRoot + "/deploy/prometheus/federation.yml"});
  SKIP_WITHOUT_PROMTOOL(r);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("SUCCESS"), std::string::npos) << r.out << r.err;
  const std::string federation = ReadAll(kRoot + "/deploy/prometheus/federation.yml");
  EXPECT_NE(federation.find("metrics_path: /federate"), std::string::npos);
  EXPECT_NE(federation.find("honor_labels: true"), std::string::npos);
  EXPECT_NE(federation.find("'match[]':"), std::string::npos);
}

// Both replicas of the aggregator are scrape targets, told apart by a `replica` target label, and
// no rule sets a label of that name (tests/deploy/kubernetes/validate.mjs checks the rest: every
// rule on the aggregator's series aggregates it away).
TEST(PrometheusDeployTest, AggregatorReplicasAreTargetsNotAlertLabels) {
  const std::string targets = ReadAll(kRoot + "/deploy/prometheus/targets/ringside-aggregator.yml");
  EXPECT_NE(targets.find("replica: a"), std::string::npos) << targets;
  EXPECT_NE(targets.find("replica: b"), std::string::npos) << targets;
  const std::string rules = ReadAll(kRoot + "/deploy/prometheus/rules/ringside.rules.yml");
  EXPECT_FALSE(std::regex_search(rules, std::regex("\\n\\s+replica:")))
      << "a rule sets a replica label";
  EXPECT_NE(rules.find("max without (replica) (ringside_incidents_open)"), std::string::npos);
}

TEST(PrometheusDeployTest, RulesAreValid) {
  testing::RunResult r =
      Promtool({"check", "rules", kRoot + "/deploy/prometheus/rules/ringside.rules.yml"});
  SKIP_WITHOUT_PROMTOOL(r);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(PrometheusDeployTest, RuleUnitTestsPass) {
  testing::RunResult r =
      Promtool({"test", "rules", kRoot + "/deploy/prometheus/rules/ringside.rules.test.yml"});
  SKIP_WITHOUT_PROMTOOL(r);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("SUCCESS"), std::string::npos) << r.out << r.err;
}

// Every alert of the rules file has at least one alert_rule_test.
TEST(PrometheusDeployTest, EveryAlertIsUnitTested) {
  const std::string rules = ReadAll(kRoot + "/deploy/prometheus/rules/ringside.rules.yml");
  const std::string tests = ReadAll(kRoot + "/deploy/prometheus/rules/ringside.rules.test.yml");
  std::regex alert("- alert: (\\w+)");
  int n = 0;
  for (auto it = std::sregex_iterator(rules.begin(), rules.end(), alert);
       it != std::sregex_iterator(); ++it, ++n) {
    EXPECT_NE(tests.find("alertname: " + (*it)[1].str() + "\n"), std::string::npos)
        << (*it)[1].str() << " has no alert_rule_test";
  }
  EXPECT_GE(n, 8);
}

void CheckDatasource(const nlohmann::json& ds, const std::string& where) {
  ASSERT_TRUE(ds.is_object()) << where << ": no datasource";
  EXPECT_EQ(ds.value("uid", ""), "${datasource}") << where;
  EXPECT_EQ(ds.value("type", ""), "prometheus") << where;
}

void CheckPanels(const nlohmann::json& panels, const std::string& file, std::set<int>& ids,
                 int& targets) {
  for (const nlohmann::json& p : panels) {
    const std::string where = file + " / " + p.value("title", "?");
    EXPECT_TRUE(ids.insert(p.value("id", -1)).second) << where << ": duplicate id";
    ASSERT_TRUE(p.contains("gridPos")) << where;
    if (p.value("type", "") == "row") {
      if (p.contains("panels")) CheckPanels(p["panels"], file, ids, targets);
      continue;
    }
    CheckDatasource(p["datasource"], where);
    ASSERT_TRUE(p.contains("targets") && !p["targets"].empty()) << where;
    for (const nlohmann::json& t : p["targets"]) {
      CheckDatasource(t["datasource"], where);
      const std::string expr = t.value("expr", "");
      EXPECT_FALSE(expr.empty()) << where;
      EXPECT_NE(expr.find("ringside"), std::string::npos) << where << ": " << expr;
      ++targets;
    }
  }
}

TEST(DashboardsTest, ImportableWithDatasourceVariable) {
  std::set<std::string> uids;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kRoot + "/dashboards")) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    const std::string file = entry.path().filename().string();
    nlohmann::json d = nlohmann::json::parse(ReadAll(entry.path().string()), nullptr, false);
    ASSERT_FALSE(d.is_discarded()) << file << " is not JSON";
    EXPECT_EQ(d.value("schemaVersion", 0), 39) << file;
    EXPECT_TRUE(uids.insert(d.value("uid", "")).second) << file << ": duplicate uid";
    EXPECT_LE(d.value("uid", "").size(), 40u) << file;
    std::set<std::string> vars;
    for (const nlohmann::json& v : d["templating"]["list"]) {
      vars.insert(v.value("name", ""));
      if (v.value("type", "") == "datasource") {
        EXPECT_EQ(v.value("query", ""), "prometheus") << file;
      } else if (v.value("type", "") == "query") {
        CheckDatasource(v["datasource"], file + " variable " + v.value("name", ""));
        EXPECT_NE(v.value("definition", "").find("label_values("), std::string::npos) << file;
      }
    }
    EXPECT_TRUE(vars.count("datasource")) << file;
    EXPECT_TRUE(vars.count("node") || vars.count("job")) << file;
    std::set<int> ids;
    int targets = 0;
    CheckPanels(d["panels"], file, ids, targets);
    EXPECT_GE(targets, 6) << file;
  }
  EXPECT_EQ(files, 5);
}

}  // namespace
}  // namespace ringside
