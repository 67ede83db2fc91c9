// SystemdNotifier: what it sends (through an injected sender and through the real sd_notify to a
// datagram socket bound here), the watchdog's pet spacing, the no-op without $NOTIFY_SOCKET, and
// the start-up warning for a loop too slow for the watchdog.
#include "daemon/common/systemd_notify.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

// Restores an environment variable on scope exit.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

struct Fake {
  std::vector<std::string> sent;
  absl::Time now = absl::FromUnixSeconds(1000);
  SystemdNotifyOptions Options(absl::Duration watchdog) {
    SystemdNotifyOptions o;
    o.send = [this](const std::string& s) {
      sent.push_back(s);
      return 1;
    };
    o.watchdog_period = watchdog;
    o.now = [this] { return now; };
    return o;
  }
};

TEST(SystemdNotifierTest, ReadyStatusStoppingStrings) {
  Fake f;
  SystemdNotifier n(f.Options(absl::ZeroDuration()));
  EXPECT_TRUE(n.active());
  n.Ready("sampling every 1s\nsecond line");
  n.Status("uploading");
  n.Stopping();
  n.Stopping("bye");
  EXPECT_EQ(f.sent,
            (std::vector<std::string>{"READY=1\nSTATUS=sampling every 1s second line",
                                      "STATUS=uploading", "STOPPING=1", "STOPPING=1\nSTATUS=bye"}));
  EXPECT_EQ(n.sent(), 4u);
}

TEST(SystemdNotifierTest, PetsAtMostEveryQuarterPeriodAndNeverWithoutWatchdog) {
  Fake f;
  SystemdNotifier n(f.Options(absl::Seconds(4)));
  EXPECT_EQ(n.watchdog_period(), absl::Seconds(4));
  // A 10ms loop pets once per second (a quarter of 4s), not 100 times.
  for (int i = 0; i < 300; ++i) {
    n.PetWatchdog();
    f.now += absl::Milliseconds(10);
  }
  EXPECT_EQ(f.sent.size(), 3u);
  for (const std::string& s : f.sent) EXPECT_EQ(s, "WATCHDOG=1");

  Fake off;
  SystemdNotifier none(off.Options(absl::ZeroDuration()));
  none.PetWatchdog();
  EXPECT_TRUE(off.sent.empty());
}

TEST(SystemdNotifierTest, WithoutNotifySocketEverythingIsANoOp) {
  ScopedEnv socket("NOTIFY_SOCKET", nullptr);
  ScopedEnv usec("WATCHDOG_USEC", "1000000");
  SystemdNotifier n;
  EXPECT_FALSE(n.active());
  EXPECT_EQ(n.watchdog_period(), absl::ZeroDuration());
  n.Ready("x");
  n.PetWatchdog();
  n.Stopping();
  EXPECT_EQ(n.sent(), 0u);
}

// The real sd_notify to a socket bound here, the period from $WATCHDOG_USEC, and $WATCHDOG_PID
// of another process turning the watchdog off for this one.
TEST(SystemdNotifierTest, RealSdNotifyReachesTheSocket) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/notify";
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.data(), path.size());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);

  ScopedEnv socket("NOTIFY_SOCKET", path.c_str());
  ScopedEnv usec("WATCHDOG_USEC", "2000000");
  {
    ScopedEnv pid("WATCHDOG_PID", std::to_string(::getpid()).c_str());
    SystemdNotifier n;
    EXPECT_TRUE(n.active());
    EXPECT_EQ(n.watchdog_period(), absl::Seconds(2));
    n.Ready("up");
    n.PetWatchdog();
    std::vector<std::string> got;
    for (int i = 0; i < 2; ++i) {
      pollfd p = {fd, POLLIN, 0};
      ASSERT_EQ(::poll(&p, 1, 5000), 1);
      char buf[512];
      const ssize_t len = ::recv(fd, buf, sizeof(buf), 0);
      ASSERT_GT(len, 0);
      got.emplace_back(buf, static_cast<size_t>(len));
    }
    EXPECT_EQ(got, (std::vector<std::string>{"READY=1\nSTATUS=up", "WATCHDOG=1"}));
    EXPECT_EQ(n.sent(), 2u);
  }
  {
    ScopedEnv pid("WATCHDOG_PID", "1");  // someone else's watchdog
    SystemdNotifier n;
    EXPECT_EQ(n.watchdog_period(), absl::ZeroDuration());
  }
  ::close(fd);
}

TEST(SystemdNotifierTest, WarnsWhenTheLoopIsSlowerThanHalfTheWatchdog) {
  EXPECT_EQ(WatchdogPeriodWarning("sampling cycle", absl::Seconds(1), absl::ZeroDuration()), "");
  EXPECT_EQ(WatchdogPeriodWarning("sampling cycle", absl::Seconds(1), absl::Seconds(2)), "");
  const std::string w =
      WatchdogPeriodWarning("sampling cycle", absl::Seconds(30), absl::Seconds(20));
  EXPECT_TRUE(absl::StrContains(w, "WatchdogSec=20s")) << w;
  EXPECT_TRUE(absl::StrContains(w, "at least 1m")) << w;
}

}  // namespace
}  // namespace ringside::daemon
