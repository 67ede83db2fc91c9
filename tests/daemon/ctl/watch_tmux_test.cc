// `ringside watch` in a real terminal: started in a detached tmux session (its own server socket
// in a temporary folder) against the fake Query service; an incident opens and resolves, and the
// screen (tmux capture-pane) shows both lines; Ctrl-C typed into the pane ends it with status 0.
// Skips when tmux is not installed. Every wait is bounded; the tmux server is killed at the end.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tests/daemon/ctl/fake_query_service.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

using testing::RunResult;

class WatchTmuxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::Run({"tmux", "-V"}).exit_code != 0) GTEST_SKIP() << "tmux is not installed";
    // tmux needs a terminal type for the pane; CI may have none.
    ::setenv("TERM", "xterm-256color", /*overwrite=*/0);
    socket_ = tmp_.path() + "/tmux.sock";
  }
  void TearDown() override {
    if (!socket_.empty()) Tmux({"kill-server"});
  }
  RunResult Tmux(std::vector<std::string> args) {
    std::vector<std::string> argv = {"tmux", "-S", socket_};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::Run(argv, "", absl::Seconds(10));
  }
  std::string Screen() { return Tmux({"capture-pane", "-p", "-J", "-t", "watch"}).out; }
  template <typename Pred>
  bool Eventually(Pred pred, absl::Duration timeout = absl::Seconds(15)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (pred()) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return pred();
  }

  testing::TempDir tmp_;
  std::string socket_;
};

v1::IncidentChange LinkDown(v1::IncidentChange::Type type, bool open) {
  v1::IncidentChange c;
  c.set_type(type);
  v1::Incident* i = c.mutable_incident();
  i->set_id(7);
  i->set_kind("link_down");
  i->set_severity("critical");
  (*i->mutable_entity())["node"] = "node-x";
  (*i->mutable_entity())["device"] = "mlx5_2";
  (*i->mutable_entity())["port"] = "1";
  const int64_t now = absl::ToUnixNanos(absl::Now());
  i->set_opened_unix_nanos(now);
  i->set_updated_unix_nanos(now);
  i->set_open(open);
  i->set_revision(open ? 1 : 2);
  i->set_summary("port went down");
  if (!open) {
    i->set_resolved_unix_nanos(now);
    i->set_resolution("link up again");
  }
  return c;
}

TEST_F(WatchTmuxTest, ShowsOpenAndResolveLiveAndStopsOnCtrlC) {
  testing::FakeQueryServer server{testing::FakeQueryData{}};
  // bash runs watch in the foreground and then prints its exit status on the screen (tmux's own
  // #{pane_dead_status} is not always filled in). A Ctrl-C reaches both; bash waits for watch and,
  // since watch exits normally, goes on to the echo.
  const std::string cmd =
      absl::StrCat(testing::BinaryPath("daemon/ringside"), " watch --aggregator ", server.address(),
                   "; echo \"watch exited with status $?\"");
  RunResult r = Tmux({"new-session", "-d", "-s", "watch", "-x", "200", "-y", "40", "bash", "-c",
                      cmd, ";", "set-option", "-t", "watch", "remain-on-exit", "on"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(Eventually([&] { return server.service().open_watches() == 1; })) << Screen();
  // stderr goes to the terminal too.
  ASSERT_TRUE(Eventually([&] { return absl::StrContains(Screen(), "watching incidents at"); }))
      << Screen();

  server.service().Publish(LinkDown(v1::IncidentChange::OPENED, true));
  server.service().Publish(LinkDown(v1::IncidentChange::RESOLVED, false));
  ASSERT_TRUE(Eventually([&] {
    const std::string s = Screen();
    return absl::StrContains(s,
                             "OPENED    #7 critical link_down node-x mlx5_2 port 1: port went "
                             "down") &&
           absl::StrContains(s,
                             "RESOLVED  #7 critical link_down node-x mlx5_2 port 1: link up "
                             "again");
  })) << Screen();
  const std::string screen = Screen();
  EXPECT_LT(screen.find("OPENED    #7"), screen.find("RESOLVED  #7")) << screen;

  // Ctrl-C in the terminal: the stream is cancelled and watch exits 0.
  ASSERT_EQ(Tmux({"send-keys", "-t", "watch", "C-c"}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return absl::StrContains(Screen(), "watch exited with status"); }))
      << Screen();
  EXPECT_TRUE(absl::StrContains(Screen(), "watch exited with status 0\n")) << Screen();
  EXPECT_TRUE(absl::StrContains(Screen(), "ringside watch: stopped")) << Screen();
  EXPECT_TRUE(Eventually([&] { return server.service().open_watches() == 0; }));
}

}  // namespace
}  // namespace ringside::daemon
