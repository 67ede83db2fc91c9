// The agent's /healthz and /readyz verdicts on a fake clock: a stuck sampler fails liveness after
// max(3 x interval, 10s); readiness needs the first cycle and, with an aggregator, a stream that is
// connected or a buffer that is not dropping.
#include "daemon/agent/agent_health.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace ringside::daemon {
namespace {

class AgentHealthTest : public ::testing::Test {
 protected:
  AgentHealthOptions Options(bool upload) {
    AgentHealthOptions o;
    o.interval = absl::Seconds(1);
    o.now = [this] { return now_; };
    if (upload) {
      o.upload_stats = [this] {
        std::vector<ReplicaUploadStats> out{{"a:9472", stats_}};
        if (two_replicas_) out.push_back({"b:9472", second_});
        return out;
      };
    }
    return o;
  }
  absl::Time now_ = absl::FromUnixSeconds(1000);
  UploaderStats stats_;
  bool two_replicas_ = false;
  UploaderStats second_;
};

TEST_F(AgentHealthTest, LiveUntilTheSamplerStopsCompletingCycles) {
  AgentHealth h(Options(false));
  EXPECT_EQ(h.stale_after(), absl::Seconds(10));  // max(3 x 1s, 10s)
  HealthVerdict v = h.Live();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.reason, "no sampling cycle completed yet");
  h.OnCycle();
  now_ += absl::Seconds(10);
  EXPECT_TRUE(h.Live().ok);
  now_ += absl::Milliseconds(1);
  v = h.Live();
  EXPECT_FALSE(v.ok);
  EXPECT_TRUE(absl::StrContains(v.reason, "sampler stuck: last cycle completed 10.001s ago"))
      << v.reason;
  h.OnCycle();
  EXPECT_TRUE(h.Live().ok);

  AgentHealthOptions slow = Options(false);
  slow.interval = absl::Seconds(30);
  EXPECT_EQ(AgentHealth(slow).stale_after(), absl::Seconds(90));
}

TEST_F(AgentHealthTest, ReadyAfterTheFirstCycleWithoutUpload) {
  AgentHealth h(Options(false));
  HealthVerdict v = h.Ready();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.reason, "first sampling cycle not done yet");
  h.OnCycle();
  EXPECT_TRUE(h.Ready().ok);
}

TEST_F(AgentHealthTest, ReadyWhileConnectedOrBufferingNotWhileDropping) {
  AgentHealth h(Options(true));
  h.OnCycle();
  stats_.buffer_capacity = 1000;
  stats_.buffer_bytes = 250;
  HealthVerdict v = h.Ready();  // aggregator down, buffer filling
  EXPECT_TRUE(v.ok);
  EXPECT_EQ(v.reason, "ok: aggregator not connected, buffering (25% of the upload buffer)");

  stats_.dropped[0].messages = 3;  // full: the oldest batches go
  v = h.Ready();
  EXPECT_FALSE(v.ok);
  EXPECT_TRUE(absl::StrContains(v.reason, "dropping messages (3 dropped since start)")) << v.reason;
  now_ += absl::Seconds(59);
  EXPECT_FALSE(h.Ready().ok);
  now_ += absl::Seconds(2);  // no new drop for a minute: buffering within bound again
  EXPECT_TRUE(h.Ready().ok);

  stats_.dropped[1].messages = 1;
  EXPECT_FALSE(h.Ready().ok);
  stats_.connected = true;  // the stream is back: ready whatever was lost
  v = h.Ready();
  EXPECT_TRUE(v.ok);
  EXPECT_EQ(v.reason, "ok: connected to the aggregator");
}

TEST_F(AgentHealthTest, DropsSeenAtTheFirstCheckCountAsRecent) {
  AgentHealth h(Options(true));
  h.OnCycle();
  stats_.dropped[0].messages = 5;
  EXPECT_FALSE(h.Ready().ok);
}

// Two replicas of the shard: ready while either gets the data; each replica's drops are its own.
TEST_F(AgentHealthTest, ReadyWhileAnyReplicaGetsTheData) {
  two_replicas_ = true;
  AgentHealth h(Options(true));
  h.OnCycle();
  stats_.connected = true;
  second_.buffer_capacity = 1000;
  second_.dropped[0].messages = 2;  // b has been down long enough to drop
  HealthVerdict v = h.Ready();
  EXPECT_TRUE(v.ok);
  EXPECT_EQ(v.reason,
            "ok: a:9472 connected to the aggregator; b:9472 aggregator not connected and the "
            "upload buffer is full: dropping messages (2 dropped since start)");
  stats_.connected = false;  // a goes down too, within its buffer: still ready
  EXPECT_TRUE(h.Ready().ok);
  stats_.dropped[0].messages = 1;  // now both drop
  v = h.Ready();
  EXPECT_FALSE(v.ok);
  EXPECT_TRUE(absl::StartsWith(v.reason, "no aggregator replica gets the data: a:9472 ")) << v.reason;
  now_ += absl::Seconds(61);  // neither dropped for a minute
  EXPECT_TRUE(h.Ready().ok);
}

}  // namespace
}  // namespace ringside::daemon
