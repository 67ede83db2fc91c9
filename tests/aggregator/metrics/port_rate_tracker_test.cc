// PortRateTracker: one entry per (node, device, port, priority, signal), found by the series' slot
// on the hot path; redefinitions, slot reuse and forgotten entries keep the entries right.
#include "daemon/aggregator/metrics/port_rate_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"

#include "absl/time/time.h"

namespace ringside::daemon {
namespace {

using analysis::ObservedSample;

constexpr int64_t kSecond = 1'000'000'000;

// A counter step of 1 s on `counter` with `delta`, in `slot` with the identity handle `identity`.
ObservedSample Step(const char* device, const char* counter, uint64_t delta, uint32_t slot,
                    uint32_t identity, int64_t t_s, const char* source = "ethtool",
                    const char* port = "") {
  ObservedSample s;
  s.source = source;
  s.device = device;
  s.port = port;
  s.counter = counter;
  s.kind = analysis::SeriesKind::kCounter;
  s.time_ns = t_s * kSecond;
  s.prev_time_ns = (t_s - 1) * kSecond;
  s.step.accepted = true;
  s.step.kind = analysis::StepKind::kNormal;
  s.step.delta = delta;
  s.identity = identity;
  s.identity_generation = 1;
  s.slot = slot;
  return s;
}

const PortSignalValue* FindValue(const std::vector<PortSignalValue>& v, const std::string& node,
                                 const std::string& device, PortSignal signal) {
  for (const PortSignalValue& x : v) {
    if (x.node == node && x.device == device && x.signal == signal) return &x;
  }
  return nullptr;
}

TEST(PortRateTrackerTest, RatiosAndRatesOneEntryEach) {
  PortRateTracker t;
  const absl::Time now = absl::FromUnixSeconds(1000);
  std::vector<ObservedSample> batch = {
      Step("eth2", "rx_prio3_pause_duration", 250'000, 0, 10, 1000),
      Step("eth2", "tx_prio3_pause_duration", 2'000'000, 1, 11, 1000),  // clamped to 1
      Step("mlx5_0", "np_cnp_sent", 40, 2, 12, 1000, "infiniband_hw", "1"),
      Step("eth2", "rx_discards_phy", 5, 3, 13, 1000),  // not tracked
  };
  t.Observe("n1", batch, now);
  t.Observe("n2", batch, now);
  std::vector<PortSignalValue> v = t.Snapshot(now);
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(t.size(), 6u);
  const PortSignalValue* rx = FindValue(v, "n1", "eth2", PortSignal::kRxPausedRatio);
  ASSERT_NE(rx, nullptr);
  EXPECT_DOUBLE_EQ(rx->value, 0.25);
  EXPECT_EQ(rx->priority, 3);
  EXPECT_EQ(rx->time, absl::FromUnixSeconds(1000));
  const PortSignalValue* tx = FindValue(v, "n2", "eth2", PortSignal::kTxPausedRatio);
  ASSERT_NE(tx, nullptr);
  EXPECT_DOUBLE_EQ(tx->value, 1.0);
  const PortSignalValue* cnp = FindValue(v, "n1", "mlx5_0", PortSignal::kCnpSentRate);
  ASSERT_NE(cnp, nullptr);
  EXPECT_DOUBLE_EQ(cnp->value, 40.0);
  EXPECT_EQ(cnp->port, "1");

  // The next step updates the same entries.
  t.Observe("n1", {Step("eth2", "rx_prio3_pause_duration", 500'000, 0, 10, 1001)}, now);
  v = t.Snapshot(now);
  EXPECT_EQ(v.size(), 6u);
  EXPECT_DOUBLE_EQ(FindValue(v, "n1", "eth2", PortSignal::kRxPausedRatio)->value, 0.5);
  EXPECT_DOUBLE_EQ(FindValue(v, "n2", "eth2", PortSignal::kRxPausedRatio)->value, 0.25);
}

TEST(PortRateTrackerTest, ARedefinedSeriesInAnotherSlotFeedsTheSameEntry) {
  PortRateTracker t;
  const absl::Time now = absl::FromUnixSeconds(1000);
  t.Observe("n1", {Step("eth2", "rx_prio3_pause_duration", 100'000, 0, 10, 1000)}, now);
  // The agent restarted and numbered its series otherwise: the same series now sits in slot 7
  // under another identity generation.
  ObservedSample moved = Step("eth2", "rx_prio3_pause_duration", 300'000, 7, 10, 1001);
  moved.identity_generation = 2;
  t.Observe("n1", {moved}, now);
  std::vector<PortSignalValue> v = t.Snapshot(now);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_DOUBLE_EQ(v[0].value, 0.3);
}

TEST(PortRateTrackerTest, ASlotNowHoldingAnotherSeriesLinksAnew) {
  PortRateTracker t;
  const absl::Time now = absl::FromUnixSeconds(1000);
  t.Observe("n1", {Step("eth2", "rx_prio3_pause_duration", 100'000, 0, 10, 1000)}, now);
  t.Observe("n1", {Step("eth3", "rx_prio3_pause_duration", 700'000, 0, 20, 1001)}, now);
  std::vector<PortSignalValue> v = t.Snapshot(now);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_DOUBLE_EQ(FindValue(v, "n1", "eth2", PortSignal::kRxPausedRatio)->value, 0.1);
  EXPECT_DOUBLE_EQ(FindValue(v, "n1", "eth3", PortSignal::kRxPausedRatio)->value, 0.7);
}

TEST(PortRateTrackerTest, ForgottenEntriesAreReusedWithoutOldLinksWritingIntoThem) {
  PortRateTracker t(absl::Minutes(2));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  t.Observe("n1", {Step("eth2", "rx_prio3_pause_duration", 100'000, 0, 10, 1000)}, t0);
  // n1 falls silent; n2 reports later. n1's entry is forgotten at the snapshot after 2 minutes.
  const absl::Time t1 = t0 + absl::Minutes(3);
  t.Observe("n2", {Step("eth9", "tx_prio5_pause_duration", 200'000, 0, 30, 1180)}, t1);
  std::vector<PortSignalValue> v = t.Snapshot(t1);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].node, "n2");
  EXPECT_EQ(t.size(), 1u);
  // n3 takes the freed entry; then n1 reports again through its old slot link: it must get an
  // entry of its own, not overwrite n3's.
  t.Observe("n3", {Step("eth4", "rx_prio3_pause_duration", 400'000, 0, 40, 1181)}, t1);
  t.Observe("n1", {Step("eth2", "rx_prio3_pause_duration", 600'000, 0, 10, 1182)}, t1);
  v = t.Snapshot(t1);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_DOUBLE_EQ(FindValue(v, "n3", "eth4", PortSignal::kRxPausedRatio)->value, 0.4);
  EXPECT_DOUBLE_EQ(FindValue(v, "n1", "eth2", PortSignal::kRxPausedRatio)->value, 0.6);
}

TEST(PortRateTrackerTest, StepsThatGiveNoRateAreSkipped) {
  PortRateTracker t;
  const absl::Time now = absl::FromUnixSeconds(1000);
  ObservedSample reset = Step("eth2", "rx_prio3_pause_duration", 100'000, 0, 10, 1000);
  reset.step.kind = analysis::StepKind::kReset;
  ObservedSample baseline = Step("eth2", "tx_prio3_pause_duration", 0, 1, 11, 1000);
  baseline.prev_time_ns = 0;
  ObservedSample no_identity = Step("eth2", "rx_prio5_pause_duration", 500'000, 2, 0, 1000);
  no_identity.identity_generation = 0;  // tracked by its key alone
  t.Observe("n1", {reset, baseline, no_identity}, now);
  std::vector<PortSignalValue> v = t.Snapshot(now);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].priority, 5);
  EXPECT_DOUBLE_EQ(v[0].value, 0.5);
}

// WorstOf (what /metrics shows) keeps, per family, what sorting a full Snapshot would keep, in
// the same order, and counts every live entry; many values tie at 0, so names decide the cut.
TEST(PortRateTrackerTest, WorstOfKeepsWhatAFullSortKeeps) {
  PortRateTracker t;
  const absl::Time now = absl::FromUnixSeconds(1000);
  for (int n = 0; n < 40; ++n) {
    std::vector<ObservedSample> batch = {
        Step("eth2", "rx_prio3_pause_duration", n % 3 == 0 ? 0 : 10'000u * (n % 7), 0, 10, 1000),
        Step("eth2", "tx_prio3_pause_duration", n % 5 == 0 ? 1000 : 0, 1, 11, 1000),
        Step("mlx5_0", "np_ecn_marked_roce_packets", static_cast<uint64_t>(n % 4), 2, 12, 1000,
             "infiniband_hw", "1"),
        Step("mlx5_0", "np_cnp_sent", static_cast<uint64_t>(40 - n), 3, 13, 1000, "infiniband_hw",
             "1"),
    };
    t.Observe(absl::StrCat("n", n), batch, now);
  }
  const std::vector<PortSignalValue> all = t.Snapshot(now);
  auto worse = [](const PortSignalValue& a, const PortSignalValue& b) {
    return std::tie(a.value, a.node, a.device, a.port, a.priority, a.signal) >
           std::tie(b.value, b.node, b.device, b.port, b.priority, b.signal);
  };
  for (size_t max : {size_t{0}, size_t{1}, size_t{7}, size_t{39}, size_t{80}, size_t{100}}) {
    SCOPED_TRACE(max);
    const PortRateTracker::Worst w = t.WorstOf(now, max);
    for (int f = 0; f < 4; ++f) {
      std::vector<PortSignalValue> family;
      for (const PortSignalValue& v : all) {
        if (PortFamilyOf(v.signal) == f) family.push_back(v);
      }
      EXPECT_EQ(w.live[f], family.size()) << f;
      std::sort(family.begin(), family.end(), worse);
      family.resize(std::min(max, family.size()));
      ASSERT_EQ(w.kept[f].size(), family.size()) << f;
      for (size_t i = 0; i < family.size(); ++i) {
        EXPECT_EQ(w.kept[f][i].node, family[i].node) << f << " " << i;
        EXPECT_EQ(w.kept[f][i].signal, family[i].signal) << f << " " << i;
        EXPECT_DOUBLE_EQ(w.kept[f][i].value, family[i].value) << f << " " << i;
      }
    }
  }
  EXPECT_EQ(t.WorstOf(now, 10).live[0], 80u);  // rx and tx of 40 nodes
  // Stale entries are forgotten by WorstOf as by Snapshot.
  const PortRateTracker::Worst later = t.WorstOf(now + absl::Hours(1), 10);
  for (int f = 0; f < 4; ++f) EXPECT_EQ(later.live[f], 0u);
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace ringside::daemon
