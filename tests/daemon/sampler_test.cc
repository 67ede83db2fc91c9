#include "daemon/agent/sampler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace ringside::daemon {
namespace {

using collectors::CollectorSnapshot;
using collectors::CycleErrors;

// A collector with one counter series that counts its calls and fails when told to.
class CountingCollector final : public collectors::Collector {
 public:
  explicit CountingCollector(std::atomic<int>* calls) : calls_(calls) {
    auto t = std::make_shared<collectors::SeriesTable>();
    t->defs.push_back(collectors::SeriesDef{"test", "dev0", "1", "ticks"});
    table_ = t;
  }
  absl::string_view name() const override { return "counting"; }
  void Collect(absl::Time now, CollectorSnapshot& out, CycleErrors& errors) override {
    int n = ++*calls_;
    out.table = table_;
    out.values.assign(1, collectors::Value{static_cast<uint64_t>(n), collectors::ValueStatus::kOk});
    if (fail) {
      out.values[0].status = collectors::ValueStatus::kError;
      errors.Add(absl::DataLossError("ticks: garbage"));
    }
  }
  bool fail = false;

 private:
  std::atomic<int>* calls_;
  std::shared_ptr<const collectors::SeriesTable> table_;
};

TEST(SamplerTest, RunOncePublishesSnapshotAndHealth) {
  std::atomic<int> calls{0};
  std::vector<std::unique_ptr<collectors::Collector>> cs;
  cs.push_back(std::make_unique<CountingCollector>(&calls));
  Sampler s(SamplerOptions{"n1"}, std::move(cs));
  EXPECT_EQ(s.Latest(), nullptr);
  auto a = s.RunOnce();
  auto b = s.RunOnce();
  EXPECT_EQ(s.Latest(), b);
  EXPECT_EQ(a->cycle, 1u);
  EXPECT_EQ(b->cycle, 2u);
  EXPECT_EQ(b->node, "n1");
  ASSERT_EQ(b->collectors.size(), 1u);
  EXPECT_EQ(b->collectors[0].values[0].raw, 2u);
  EXPECT_EQ(b->health[0].cycles, 2u);
  EXPECT_EQ(b->health[0].series, 1u);
  // The first snapshot is immutable: still the value it had.
  EXPECT_EQ(a->collectors[0].values[0].raw, 1u);
}

TEST(SamplerTest, ReadErrorsAreCountedAndLoggedAtALimitedRate) {
  std::atomic<int> calls{0};
  auto owned = std::make_unique<CountingCollector>(&calls);
  CountingCollector* c = owned.get();
  c->fail = true;
  std::vector<std::unique_ptr<collectors::Collector>> cs;
  cs.push_back(std::move(owned));
  absl::Time now = absl::FromUnixSeconds(1000);
  std::vector<std::string> logs;
  SamplerOptions opts{"n1"};
  opts.error_log_period = absl::Seconds(60);
  Sampler s(opts, std::move(cs), [&] { return now; },
            [&](const std::string& m) { logs.push_back(m); });
  for (int i = 0; i < 30; ++i) {
    s.RunOnce();
    now += absl::Seconds(1);
  }
  EXPECT_EQ(s.Latest()->health[0].read_errors_total, 30u);
  ASSERT_EQ(logs.size(), 1u);  // once in the first minute, not every cycle
  EXPECT_NE(logs[0].find("ticks: garbage"), std::string::npos);
  for (int i = 0; i < 40; ++i) {
    s.RunOnce();
    now += absl::Seconds(1);
  }
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_NE(logs[1].find("60 read errors"), std::string::npos) << logs[1];
}

// Run() cycles until stopped and returns promptly when stopped.
TEST(SamplerTest, RunCyclesUntilStopped) {
  std::atomic<int> calls{0};
  std::vector<std::unique_ptr<collectors::Collector>> cs;
  cs.push_back(std::make_unique<CountingCollector>(&calls));
  SamplerOptions opts{"n1"};
  opts.interval = absl::Milliseconds(5);
  Sampler s(opts, std::move(cs));
  absl::Notification stop;
  std::atomic<int> seen{0};
  std::thread t([&] { s.Run(stop, [&](const auto&) { ++seen; }); });
  for (int i = 0; i < 2000 && seen.load() < 5; ++i) absl::SleepFor(absl::Milliseconds(5));
  stop.Notify();
  t.join();
  EXPECT_GE(seen.load(), 5);
  EXPECT_EQ(calls.load(), seen.load());
}

// Issue #25: an early cycle runs only the collectors named to EnableEarlyCycles (the agent: the
// InfiniBand one, whose error counters moved); the others are carried over from the last cycle
// and marked so, and the uploader sends them with the cycle that read them only.
TEST(SamplerTest, AnEarlyCycleRunsOnlyTheNamedCollectorsAndMarksTheOthersCarried) {
  std::atomic<int> other_calls{0};
  std::vector<std::unique_ptr<collectors::Collector>> cs;
  cs.push_back(std::make_unique<CountingCollector>(&other_calls));  // named "counting"
  Sampler s(SamplerOptions{"n1", absl::Seconds(30)}, std::move(cs));
  s.EnableEarlyCycles({"infiniband"});
  absl::Notification stop;
  std::atomic<int> seen{0};
  std::shared_ptr<const AgentSnapshot> last;
  absl::Mutex mu;
  std::thread t([&] {
    s.Run(stop, [&](const std::shared_ptr<const AgentSnapshot>& snap) {
      absl::MutexLock l(&mu);
      last = snap;
      ++seen;
    });
  });
  for (int i = 0; i < 2000 && seen.load() < 1; ++i) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(seen.load(), 1);
  {
    absl::MutexLock l(&mu);
    ASSERT_EQ(last->carried.size(), 1u);
    EXPECT_FALSE(last->carried[0]);  // a scheduled cycle reads everything
  }
  s.RequestCycle();
  for (int i = 0; i < 2000 && seen.load() < 2; ++i) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(seen.load(), 2);
  stop.Notify();
  t.join();
  EXPECT_EQ(other_calls.load(), 1) << "the early cycle read a collector it was not asked to";
  absl::MutexLock l(&mu);
  EXPECT_EQ(last->early_total, 1u);
  ASSERT_EQ(last->carried.size(), 1u);
  EXPECT_TRUE(last->carried[0]);
  ASSERT_EQ(last->collectors[0].values.size(), 1u);
  EXPECT_EQ(last->collectors[0].values[0].raw, 1u);  // the last reading, carried over
}

// RequestCycle(): one cycle ahead of the slot, at most one per slot, the schedule kept; a stop
// still ends Run() at once (not at the next slot) although it waits on its own condition.
TEST(SamplerTest, ARequestedCycleRunsAtOnceAtMostOncePerSlotAndStopStaysPrompt) {
  std::atomic<int> calls{0};
  std::vector<std::unique_ptr<collectors::Collector>> cs;
  cs.push_back(std::make_unique<CountingCollector>(&calls));
  SamplerOptions opts{"n1"};
  opts.interval = absl::Seconds(30);  // the slots never come in this test: only requests cycle
  Sampler s(opts, std::move(cs));
  s.EnableEarlyCycles();
  absl::Notification stop;
  std::atomic<int> seen{0};
  std::thread t([&] { s.Run(stop, [&](const auto&) { ++seen; }); });
  auto wait_for = [&](int n) {
    for (int i = 0; i < 2000 && seen.load() < n; ++i) absl::SleepFor(absl::Milliseconds(5));
    return seen.load();
  };
  ASSERT_EQ(wait_for(1), 1);  // the first scheduled cycle runs at once
  s.RequestCycle();
  ASSERT_EQ(wait_for(2), 2) << "a request runs a cycle without waiting for the 30 s slot";
  EXPECT_EQ(s.Latest()->early_total, 1u);
  s.RequestCycle();
  s.RequestCycle();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(seen.load(), 2) << "one early cycle per slot";
  const absl::Time before = absl::Now();
  stop.Notify();
  t.join();
  EXPECT_LT(absl::Now() - before, absl::Seconds(10)) << "stop waited for the slot";
  EXPECT_EQ(calls.load(), 2);
}

// The clock of the sample times (daemon/common/forward_clock.h): a step back of the wall clock
// goes on at the monotonic pace from the last time given, a step forward is taken, and a slewed
// wall clock is followed.
TEST(ForwardClockTest, NeverGoesBackAndTakesStepsForward) {
  absl::Time wall = absl::FromUnixSeconds(1'800'000'000);
  absl::Time steady = absl::UnixEpoch() + absl::Hours(1);
  ForwardClock c([&] { return wall; }, [&] { return steady; });
  EXPECT_EQ(c.Now(), wall);
  wall += absl::Seconds(1);
  steady += absl::Seconds(1);
  EXPECT_EQ(c.Now(), absl::FromUnixSeconds(1'800'000'001));
  wall -= absl::Minutes(5);  // a step back: 1 s later is 1 s after the last time
  steady += absl::Seconds(1);
  EXPECT_EQ(c.Now(), absl::FromUnixSeconds(1'800'000'002));
  wall += absl::Seconds(1);  // still behind: the times stay ahead of it
  steady += absl::Seconds(1);
  EXPECT_EQ(c.Now(), absl::FromUnixSeconds(1'800'000'003));
  EXPECT_EQ(c.Now(), absl::FromUnixSeconds(1'800'000'003));  // no time passed: the same
  wall = absl::FromUnixSeconds(1'800'000'603);  // a step forward of 10 minutes is taken
  steady += absl::Seconds(1);
  EXPECT_EQ(c.Now(), wall);
  wall += absl::Milliseconds(900);  // slewing: the wall clock's pace is followed
  steady += absl::Seconds(1);
  EXPECT_EQ(c.Now(), wall);
}

// Other readers of the sample clock (the link-event reader) get times in one order with the
// sample times, whatever the wall clock did.
TEST(ForwardClockTest, SamplerSharesItsClock) {
  absl::Time wall = absl::FromUnixSeconds(1'800'000'000);
  std::vector<std::unique_ptr<collectors::Collector>> cs;
  std::atomic<int> calls{0};
  cs.push_back(std::make_unique<CountingCollector>(&calls));
  Sampler s(SamplerOptions{"n1"}, std::move(cs), [&] { return wall; });
  const absl::Time first = s.RunOnce()->timestamp;
  wall -= absl::Minutes(5);
  const absl::Time event = s.clock()->Now();
  EXPECT_GE(event, first);
  EXPECT_GE(s.RunOnce()->timestamp, event);
}

}  // namespace
}  // namespace ringside::daemon
