// Detector thresholds by name: each one settable and listed, bad names and values refused with the
// option named, the config file format, and docs/detection.md naming every option.
#include "analysis/detection_options.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace ringside::analysis {
namespace {

TEST(DetectionOptionsTest, EveryOptionIsListedAndCanBeSetToItsOwnValue) {
  FabricAnalysisOptions o;
  std::vector<DetectionOptionInfo> all = ListDetectionOptions(o);
  EXPECT_GT(all.size(), 50u);
  for (const DetectionOptionInfo& i : all) {
    EXPECT_FALSE(i.help.empty()) << i.name;
    EXPECT_TRUE(SetDetectionOption(o, i.name, i.value).ok()) << i.name << " = " << i.value;
  }
  // Setting each to its printed default changes nothing.
  std::vector<DetectionOptionInfo> again = ListDetectionOptions(o);
  for (size_t k = 0; k < all.size(); ++k) EXPECT_EQ(all[k].value, again[k].value) << all[k].name;
}

TEST(DetectionOptionsTest, SetsTheFieldItNames) {
  FabricAnalysisOptions o;
  ASSERT_TRUE(SetDetectionOption(o, "link.flap_window", "90s").ok());
  EXPECT_EQ(o.link.flap_window, absl::Seconds(90));
  ASSERT_TRUE(SetDetectionOption(o, " straggler.window ", " 50 ").ok());
  EXPECT_EQ(o.straggler.window, 50);
  ASSERT_TRUE(SetDetectionOption(o, "pause_storm.storm_fraction", "0.3").ok());
  EXPECT_DOUBLE_EQ(o.pause_storm.storm_fraction, 0.3);
  ASSERT_TRUE(SetDetectionOption(o, "link.local_link_integrity_any", "false").ok());
  EXPECT_FALSE(o.link.local_link_integrity_any);
  ASSERT_TRUE(SetDetectionOption(o, "incidents.keep_resolved", "7").ok());
  EXPECT_EQ(o.incidents.keep_resolved, 7u);
}

TEST(DetectionOptionsTest, BadNamesAndValuesNameTheOption) {
  FabricAnalysisOptions o;
  absl::Status s = SetDetectionOption(o, "link.flap_windw", "5m");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unknown detection option \"link.flap_windw\""), std::string::npos);
  s = SetDetectionOption(o, "link.flap_window", "five minutes");
  EXPECT_NE(s.message().find("link.flap_window"), std::string::npos) << s;
  EXPECT_FALSE(SetDetectionOption(o, "straggler.window", "-3").ok());
  EXPECT_FALSE(SetDetectionOption(o, "congestion.min_rate", "nan").ok());
  EXPECT_FALSE(SetDetectionOption(o, "pause_storm.storm_events", "maybe").ok());
  EXPECT_EQ(o.link.flap_window, FabricAnalysisOptions{}.link.flap_window);  // untouched
}

TEST(DetectionOptionsTest, ConfigFileAndAssignments) {
  FabricAnalysisOptions o;
  ASSERT_TRUE(ParseDetectionConfig("# thresholds\n\nlink.flap_cycles = 3  # stricter\n"
                                   "straggler.min_margin 1ms\n",
                                   o)
                  .ok());
  EXPECT_EQ(o.link.flap_cycles, 3);
  EXPECT_EQ(o.straggler.min_margin, absl::Milliseconds(1));
  absl::Status s = ParseDetectionConfig("link.flap_cycles = 3\nnonsense\n", o);
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s;
  ASSERT_TRUE(ParseDetectionAssignments("congestion.min_rate=500, link.flap_quiet=2m", o).ok());
  EXPECT_DOUBLE_EQ(o.congestion.min_rate, 500);
  EXPECT_EQ(o.link.flap_quiet, absl::Minutes(2));
  EXPECT_FALSE(ParseDetectionAssignments("congestion.min_rate", o).ok());
}

TEST(DetectionOptionsTest, DocsNameEveryOption) {
  std::ifstream in(std::string(RINGSIDE_SOURCE_DIR) + "/docs/detection.md");
  ASSERT_TRUE(in) << "docs/detection.md";
  std::stringstream text;
  text << in.rdbuf();
  for (const DetectionOptionInfo& i : ListDetectionOptions(FabricAnalysisOptions{})) {
    EXPECT_NE(text.str().find("`" + i.name + "`"), std::string::npos)
        << i.name << " is not in docs/detection.md";
  }
}

}  // namespace
}  // namespace ringside::analysis
