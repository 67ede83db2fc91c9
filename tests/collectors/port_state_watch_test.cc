// The polled port-state watcher: transitions of a generated sysfs tree whose attributes are
// rewritten in place (as the kernel's keep their inode), a device that goes away (reads fail as a
// removed attribute's do), and the link-event thread that runs it between its waits.
#include "collectors/infiniband/port_state_watch.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "daemon/agent/link_events.h"
#include "tests/testing/eventually.h"
#include "tests/testing/fault_fs.h"
#include "tests/testing/temp_dir.h"

namespace ringside::collectors {
namespace {

namespace fs = std::filesystem;

// Rewrites a file in place (same inode), as a sysfs attribute's content changes.
void WriteInPlace(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), fs::exists(path) ? "r+" : "w");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(text.data(), 1, text.size(), f), text.size());
  std::fflush(f);
  ASSERT_EQ(::ftruncate(fileno(f), static_cast<off_t>(text.size())), 0);
  std::fclose(f);
}

uint64_t InodeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

class PortStateWatchTest : public ::testing::Test {
 protected:
  std::string PortDir(const std::string& dev, int port) {
    return tmp_.path() + "/class/infiniband/" + dev + "/ports/" + std::to_string(port);
  }
  void AddPort(const std::string& dev, int port, const std::string& state,
               const std::string& phys) {
    fs::create_directories(PortDir(dev, port));
    SetState(dev, port, state, phys);
  }
  void SetState(const std::string& dev, int port, const std::string& state,
                const std::string& phys) {
    WriteInPlace(PortDir(dev, port) + "/state", state + "\n");
    WriteInPlace(PortDir(dev, port) + "/phys_state", phys + "\n");
  }
  PortStateWatchOptions Options() {
    PortStateWatchOptions o;
    o.sysfs_root = tmp_.path();
    return o;
  }
  testing::TempDir tmp_;
};

TEST_F(PortStateWatchTest, ReportsEachChangeOfAPortAfterItsFirstRead) {
  AddPort("mlx5_0", 1, "4: ACTIVE", "5: LinkUp");
  AddPort("mlx5_1", 1, "4: ACTIVE", "5: LinkUp");
  PortStateWatcher w(Options());
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  std::vector<LinkEvent> events;
  w.Poll(t0, events);
  EXPECT_TRUE(events.empty()) << "the first read says what a port is, not that it changed";
  EXPECT_EQ(w.ports(), 2u);

  const uint64_t inode = InodeOf(PortDir("mlx5_1", 1) + "/state");
  SetState("mlx5_1", 1, "1: DOWN", "3: Disabled");
  ASSERT_EQ(InodeOf(PortDir("mlx5_1", 1) + "/state"), inode);
  w.Poll(t0 + absl::Milliseconds(100), events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].source, "sysfs");
  EXPECT_EQ(events[0].device, "mlx5_1");
  EXPECT_EQ(events[0].port, "1");
  EXPECT_EQ(events[0].from, LinkState::kUp);
  EXPECT_EQ(events[0].to, LinkState::kDown);
  EXPECT_EQ(events[0].time, t0 + absl::Milliseconds(100));
  EXPECT_EQ(events[0].detail, "state 1: DOWN, phys_state 3: Disabled");

  events.clear();
  w.Poll(t0 + absl::Milliseconds(200), events);
  EXPECT_TRUE(events.empty()) << "no change, no event";

  // INIT (no subnet manager yet) is still down; ACTIVE again is up.
  SetState("mlx5_1", 1, "2: INIT", "5: LinkUp");
  w.Poll(t0 + absl::Milliseconds(300), events);
  EXPECT_TRUE(events.empty());
  SetState("mlx5_1", 1, "4: ACTIVE", "5: LinkUp");
  w.Poll(t0 + absl::Milliseconds(400), events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].to, LinkState::kUp);
  EXPECT_EQ(events[0].from, LinkState::kDown);
}

TEST_F(PortStateWatchTest, AnUnknownOrMalformedStateMakesNoClaim) {
  AddPort("mlx5_0", 1, "4: ACTIVE", "5: LinkUp");
  PortStateWatcher w(Options());
  std::vector<LinkEvent> events;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  w.Poll(t0, events);
  SetState("mlx5_0", 1, "garbage", "5: LinkUp");
  w.Poll(t0 + absl::Seconds(1), events);
  SetState("mlx5_0", 1, "9: FUTURE", "5: LinkUp");
  w.Poll(t0 + absl::Seconds(2), events);
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(IbPortStateOf("5: ACTIVE_DEFER"), LinkState::kUp);
  EXPECT_EQ(IbPortStateOf("3: ARMED"), LinkState::kDown);
  EXPECT_EQ(IbPortStateOf(""), LinkState::kUnknown);
}

TEST_F(PortStateWatchTest, APortThatAppearsIsWatchedAfterTheNextRescan) {
  PortStateWatchOptions o = Options();
  o.rescan = absl::Seconds(10);
  PortStateWatcher w(o);
  std::vector<LinkEvent> events;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  w.Poll(t0, events);
  EXPECT_EQ(w.ports(), 0u);
  AddPort("mlx5_2", 1, "4: ACTIVE", "5: LinkUp");
  w.Poll(t0 + absl::Seconds(1), events);
  EXPECT_EQ(w.ports(), 0u);
  w.Poll(t0 + absl::Seconds(10), events);
  EXPECT_EQ(w.ports(), 1u);
  EXPECT_TRUE(events.empty());
}

TEST_F(PortStateWatchTest, ADeviceWhoseReadsFailIsReportedDownOnceAndUpWhenItReturns) {
  AddPort("mlx5_0", 1, "4: ACTIVE", "5: LinkUp");
  testing::FaultFileSystem faults;
  PortStateWatcher w(Options(), &faults);
  std::vector<LinkEvent> events;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  w.Poll(t0, events);
  // A removed device: reads of its open attribute fail (the kernel answers ENODEV).
  faults.FailReads("mlx5_0/ports/1/state", absl::NotFoundError("No such device"));
  w.Poll(t0 + absl::Milliseconds(100), events);
  w.Poll(t0 + absl::Milliseconds(200), events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].to, LinkState::kDown);
  EXPECT_NE(events[0].detail.find("unreadable"), std::string::npos) << events[0].detail;
  EXPECT_EQ(w.read_failures(), 2u);
  faults.Clear();
  w.Poll(t0 + absl::Milliseconds(300), events);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].from, LinkState::kDown);
  EXPECT_EQ(events[1].to, LinkState::kUp);
}

TEST_F(PortStateWatchTest, AWatchedCounterThatMovesIsReportedOnceAndUnwatchedOnesAreNot) {
  AddPort("mlx5_0", 1, "4: ACTIVE", "5: LinkUp");
  fs::create_directories(PortDir("mlx5_0", 1) + "/counters");
  WriteInPlace(PortDir("mlx5_0", 1) + "/counters/symbol_error", "0\n");
  WriteInPlace(PortDir("mlx5_0", 1) + "/counters/port_xmit_data", "100\n");
  PortStateWatchOptions o = Options();
  o.counters = {"symbol_error", "link_downed"};  // link_downed absent: skipped
  PortStateWatcher w(o);
  std::vector<LinkEvent> events;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  w.Poll(t0, events);
  EXPECT_FALSE(w.TakeCountersMoved()) << "the first read is a baseline";
  WriteInPlace(PortDir("mlx5_0", 1) + "/counters/port_xmit_data", "900\n");
  w.Poll(t0 + absl::Milliseconds(100), events);
  EXPECT_FALSE(w.TakeCountersMoved()) << "traffic counters are not watched";
  WriteInPlace(PortDir("mlx5_0", 1) + "/counters/symbol_error", "1000\n");
  w.Poll(t0 + absl::Milliseconds(200), events);
  EXPECT_TRUE(w.TakeCountersMoved());
  EXPECT_FALSE(w.TakeCountersMoved()) << "taken";
  w.Poll(t0 + absl::Milliseconds(300), events);
  EXPECT_FALSE(w.TakeCountersMoved()) << "no further change";
  EXPECT_EQ(w.counter_moves(), 1u);
  EXPECT_TRUE(events.empty());
}

TEST_F(PortStateWatchTest, TheLinkEventThreadPollsStatesBetweenItsWaits) {
  AddPort("mlx5_0", 1, "4: ACTIVE", "5: LinkUp");
  daemon::LinkEventLog log;
  daemon::LinkEventReader reader(&log, nullptr, nullptr);
  reader.WatchPortStates(std::make_unique<PortStateWatcher>(Options()), absl::Milliseconds(20));
  reader.Start();
  ASSERT_TRUE(testing::Eventually([&] { return reader.port_state_ports() == 1; }));
  SetState("mlx5_0", 1, "1: DOWN", "2: Polling");
  ASSERT_TRUE(testing::Eventually([&] { return log.last_seq() >= 1; }));
  std::vector<daemon::LinkEventLog::Entry> entries = log.Since(0);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].event.source, "sysfs");
  EXPECT_EQ(entries[0].event.to, LinkState::kDown);
  // With no netlink and no verbs, the thread still blocks between polls: about one wake per
  // period, not a spin (generous bound: 2 s of 20 ms periods is 100).
  const uint64_t before = reader.polls();
  absl::SleepFor(absl::Seconds(2));
  EXPECT_LT(reader.polls() - before, 400u);
  EXPECT_GT(reader.polls() - before, 10u);
}

}  // namespace
}  // namespace ringside::collectors
