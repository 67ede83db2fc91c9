#include "daemon/agent/render.h"

#include <gtest/gtest.h>

#include <memory>

#include "collectors/infiniband/infiniband_collector.h"
#include "sim/sysfs_tree.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

std::unique_ptr<Sampler> MakeSampler(const std::string& root, absl::Time* now) {
  std::vector<std::unique_ptr<collectors::Collector>> cs;
  cs.push_back(
      std::make_unique<collectors::InfinibandCollector>(collectors::InfinibandOptions{root}));
  return std::make_unique<Sampler>(SamplerOptions{"node-9"}, std::move(cs),
                                   [now] { return *now; });
}

TEST(RenderTest, JsonHasOneObjectPerSeriesWithUnitAndWidth) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  ASSERT_TRUE(w.AddHca(sim::HcaSpec{}).ok());
  ASSERT_TRUE(w.SetIbCounter("mlx5_0", 1, "symbol_error", 12).ok());
  ASSERT_TRUE(w.WriteFile(w.IbPortDir("mlx5_0", 1) + "/counters/link_downed", "bad\n").ok());
  absl::Time now = absl::FromUnixSeconds(100);
  auto s = MakeSampler(tmp.path(), &now);
  std::string json = RenderJson(*s->RunOnce());
  EXPECT_NE(json.find("{\"node\":\"node-9\",\"source\":\"infiniband\",\"device\":\"mlx5_0\","
                      "\"port\":\"1\",\"counter\":\"symbol_error\",\"kind\":\"counter\","
                      "\"value\":12,\"status\":\"ok\",\"unit\":\"count\",\"width\":16,"
                      "\"saturates\":true}"),
            std::string::npos)
      << json.substr(0, 600);
  EXPECT_NE(json.find("\"counter\":\"link_downed\",\"kind\":\"counter\",\"value\":null,"
                      "\"status\":\"error\""),
            std::string::npos);
  EXPECT_NE(json.find("\"unit\":\"4-byte-words\",\"width\":64"), std::string::npos);
  EXPECT_EQ(json.front(), '[');
}

TEST(RenderTest, RatesUseCounterWidthAndReportStateChanges) {
  testing::TempDir tmp;
  sim::SysfsTreeWriter w(tmp.path());
  ASSERT_TRUE(w.AddHca(sim::HcaSpec{}).ok());
  ASSERT_TRUE(w.SetHwCounter("mlx5_0", 1, "out_of_sequence", 4294967290u).ok());  // 32-bit
  ASSERT_TRUE(w.SetIbCounter("mlx5_0", 1, "port_xmit_data", 0).ok());
  ASSERT_TRUE(w.SetIbCounter("mlx5_0", 1, "symbol_error", 65000).ok());
  absl::Time now = absl::FromUnixSeconds(100);
  auto s = MakeSampler(tmp.path(), &now);
  RatePrinter printer;
  EXPECT_EQ(printer.Render(*s->RunOnce()), "");
  ASSERT_TRUE(w.SetHwCounter("mlx5_0", 1, "out_of_sequence", 4).ok());  // wrapped: +10
  ASSERT_TRUE(w.SetIbCounter("mlx5_0", 1, "port_xmit_data", 250000000).ok());  // 1 GB in 2 s
  ASSERT_TRUE(w.SetIbCounter("mlx5_0", 1, "symbol_error", 65535).ok());
  ASSERT_TRUE(w.SetPortState("mlx5_0", 1, 1, 3).ok());
  now += absl::Seconds(2);
  std::string out = printer.Render(*s->RunOnce());
  EXPECT_NE(out.find("out_of_sequence"), std::string::npos) << out;
  EXPECT_NE(out.find("5.0/s (wrapped)"), std::string::npos) << out;
  EXPECT_NE(out.find("500.0 MB/s"), std::string::npos) << out;
  EXPECT_NE(out.find("symbol_error                       saturated at 65535 (16-bit)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("state                              changed 4 -> 1"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace ringside::daemon
