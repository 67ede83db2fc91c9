// More storage and process faults (issue #18 item 3), with real ringside-aggregator and
// ringside-agent processes on loopback (fault_cluster.h); docs/reliability.md "Fault injection:
// storage and disconnection" lists what each test injects and what must hold:
//
//  - SqliteFullDisk: incidents.db's file system fills while the journal's (a mount of its own)
//    does not; a port flaps. Records are still acknowledged, the incident is served from memory
//    and counted as unsaved, and written once space returns (a restart finds it).
//  - SqliteIoErrors: incidents.db's writes fail with EIO (an LD_PRELOAD shim,
//    tests/testing/io_fault_shim.c); the same holds.
//  - JournalIoErrors: the journal's writes, then its syncs fail with EIO, then its writes with
//    EROFS (the shim); nothing is acknowledged meanwhile, /readyz says why, another agent is
//    served; once the errors stop everything is written once.
//  - JournalReadErrorAtReplay: one journal segment cannot be read (EIO) at restart. The aggregator
//    starts, names the segment, replays the others and takes new records.
//  - ReadOnlyStateDirAtStart: the state dir is read-only (EROFS) when the aggregator starts: it
//    refuses to start and says why; once writable, the records the agent held arrive once.
//  - SigstoppedReplica / SigstoppedAggregator: one of two replicas (or the only aggregator) is
//    SIGSTOPped for 5 s while records flow, then SIGCONTed.
//
// Every test fails if a record the aggregator acknowledged is missing from its journal or stored
// twice, or if another agent stops being acknowledged.
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "daemon/aggregator/journal/journal.h"
#include "tests/integration/fault_cluster.h"
#include "tests/testing/eventually.h"
#include "tests/testing/io_fault.h"
#include "tests/testing/process.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using testing::FaultAgent;
using testing::RecordKey;
using testing::ExpectAllOnce;
using testing::ExpectNoneTwice;
using testing::Loopback;
using testing::ReadyStatus;
using testing::Stop;

// One value of the aggregator's /metrics (no labels), or -1.
double AggMetric(int http_port, const std::string& name) {
  std::vector<testing::PromSample> s =
      testing::ParsePromText(testing::HttpGet(http_port, "/metrics")).Find(name, {});
  return s.size() == 1 ? s[0].value : -1;
}

// Journal segment names of `state`, ascending.
std::vector<std::string> SegmentsOf(const std::string& state) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(state + "/journal", ec)) {
    const std::string name = e.path().filename().string();
    if (absl::StartsWith(name, "journal-") && absl::EndsWith(name, ".log")) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// tmpfs mounts of the test's own, in a private mount namespace of this process (the processes it
// starts inherit it); unmounted, innermost first, on destruction. Needs root (CAP_SYS_ADMIN).
class PrivateMounts {
 public:
  PrivateMounts() {
    if (::unshare(CLONE_NEWNS) != 0) {
      why_ = absl::StrCat("unshare(CLONE_NEWNS): ", std::strerror(errno));
      return;
    }
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      why_ = absl::StrCat("mount --make-rprivate /: ", std::strerror(errno));
      return;
    }
    ok_ = true;
  }
  ~PrivateMounts() {
    for (auto it = mounted_.rbegin(); it != mounted_.rend(); ++it)
      ::umount2(it->c_str(), MNT_DETACH);
  }
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }

  bool Tmpfs(const std::string& dir, const std::string& size) {
    std::filesystem::create_directories(dir);
    if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                absl::StrCat("size=", size).c_str()) != 0) {
      why_ = absl::StrCat("mount tmpfs on ", dir, ": ", std::strerror(errno));
      return false;
    }
    mounted_.push_back(dir);
    return true;
  }
  // A bind mount of `dir` onto itself, so that it can be made read-only on its own.
  bool BindSelf(const std::string& dir) {
    if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      why_ = absl::StrCat("bind mount ", dir, ": ", std::strerror(errno));
      return false;
    }
    mounted_.push_back(dir);
    return true;
  }
  // Remounts the bind mount at `dir` read-only (or read-write again).
  bool SetReadOnly(const std::string& dir, bool read_only) {
    const unsigned long flags =
        MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (read_only ? MS_RDONLY : 0);
    if (::mount(nullptr, dir.c_str(), nullptr, flags, nullptr) != 0) {
      why_ = absl::StrCat("remount ", dir, ": ", std::strerror(errno));
      return false;
    }
    return true;
  }

  // Writes `path` until its file system refuses (ENOSPC); returns its size.
  static uint64_t Fill(const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return 0;
    std::string chunk(4096, 'f');
    uint64_t total = 0;
    for (size_t size : {size_t{4096}, size_t{1}}) {
      for (;;) {
        const ssize_t n = ::write(fd, chunk.data(), size);
        if (n <= 0) break;
        total += static_cast<uint64_t>(n);
      }
    }
    ::fsync(fd);
    ::close(fd);
    return total;
  }
  static uint64_t FreeBytes(const std::string& dir) {
    struct statvfs st;
    if (::statvfs(dir.c_str(), &st) != 0) return 0;
    return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  }

 private:
  bool ok_ = false;
  std::string why_;
  std::vector<std::string> mounted_;
};

// Rows of incidents.db (read-only, straight from the file): "kind entity" of each incident; a
// test failure when the file cannot be read.
std::vector<std::string> StoredIncidents(const std::string& state) {
  std::vector<std::string> out;
  sqlite3* db = nullptr;
  sqlite3_stmt* q = nullptr;
  int rc = sqlite3_open_v2((state + "/incidents.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  if (rc == SQLITE_OK) {
    rc = sqlite3_prepare_v2(db, "SELECT kind, entity FROM incidents ORDER BY id", -1, &q, nullptr);
  }
  if (rc == SQLITE_OK) {
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
      out.push_back(absl::StrCat(reinterpret_cast<const char*>(sqlite3_column_text(q, 0)), " ",
                                 reinterpret_cast<const char*>(sqlite3_column_text(q, 1))));
    }
  }
  EXPECT_TRUE(rc == SQLITE_OK || rc == SQLITE_DONE)
      << "reading incidents.db: " << sqlite3_errmsg(db);
  sqlite3_finalize(q);
  sqlite3_close(db);
  return out;
}

// Flaps port 1 of `agent`'s HCA twice: enough for a link_flapping incident.
void Flap(FaultAgent& agent) {
  for (int flap = 0; flap < 2; ++flap) {
    ASSERT_TRUE(agent.SetPortState(1, 2));
    absl::SleepFor(absl::Milliseconds(400));
    ASSERT_TRUE(agent.SetPortState(4, 5));
    absl::SleepFor(absl::Milliseconds(400));
  }
}

std::string ShimPath() { return IO_FAULT_SHIM; }

class StorageFaultTest : public ::testing::Test {
 protected:
  testing::TempDir out_;
};

// --- A full disk under SQLite alone -------------------------------------------------------------

TEST_F(StorageFaultTest, SqliteFullDisk) {
  PrivateMounts mounts;
  if (!mounts.ok()) GTEST_SKIP() << "no private mount namespace here: " << mounts.why();
  // incidents.db on a 1 MiB file system, the journal on a 16 MiB one of its own.
  const std::string state = out_.path() + "/state";
  ASSERT_TRUE(mounts.Tmpfs(state, "1m")) << mounts.why();
  ASSERT_TRUE(mounts.Tmpfs(state + "/journal", "16m")) << mounts.why();

  testing::AggregatorPorts ports;
  std::unique_ptr<testing::Process> agg = testing::StartAggregator(state, out_.path(), {}, &ports);
  ASSERT_NE(agg, nullptr);
  FaultAgent a("node-a", out_.path());
  FaultAgent b("node-b", out_.path());
  ASSERT_TRUE(a.Start(Loopback(ports.grpc)));
  ASSERT_TRUE(b.Start(Loopback(ports.grpc)));
  ASSERT_TRUE(a.Feed("before", 0, 500));
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("before") == 500; }));
  ASSERT_TRUE(a.WaitAllAcked(absl::Seconds(15))) << agg->Stderr();
  ASSERT_TRUE(
      testing::Eventually([&] { return std::filesystem::exists(state + "/incidents.db-wal"); }));

  // incidents.db's disk fills; node-a's port flaps.
  EXPECT_GT(PrivateMounts::Fill(state + "/filler"), 0u);
  EXPECT_EQ(PrivateMounts::FreeBytes(state), 0u);
  Flap(a);
  ASSERT_TRUE(agg->WaitForStderr("opened: link_flapping", absl::Seconds(20))) << agg->Stderr();
  // The incident cannot be written: counted and logged, and served from memory.
  ASSERT_TRUE(testing::Eventually(
      [&] { return AggMetric(ports.http, "ringside_analysis_unsaved_incidents") >= 1; },
      absl::Seconds(10)))
      << agg->Stderr();
  EXPECT_TRUE(testing::Eventually(
      [&] { return AggMetric(ports.http, "ringside_analysis_flush_errors_total") > 0; }));
  EXPECT_TRUE(agg->WaitForStderr("incident store: cannot write", absl::Seconds(5)) &&
              agg->WaitForStderr("database or disk is full", absl::Seconds(1)))
      << agg->Stderr();
  const std::string listed = testing::HttpGet(ports.http, "/api/v1/incidents");
  EXPECT_TRUE(absl::StrContains(listed, "link_flapping") && absl::StrContains(listed, "node-a"))
      << listed;
  // The journal is fine: records are still stored and acknowledged, everyone is served, ready.
  ASSERT_TRUE(a.Feed("during", 0, 1000));
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("during") == 1000; }));
  EXPECT_TRUE(a.WaitAllAcked(absl::Seconds(15))) << "records not acked while only SQLite is full";
  EXPECT_TRUE(b.WaitAllAcked(absl::Seconds(5)));
  EXPECT_EQ(testing::QueryNodeCount(ports.grpc), 2);
  EXPECT_EQ(ReadyStatus(ports.http), 200);
  EXPECT_EQ(PrivateMounts::FreeBytes(state), 0u);
  EXPECT_GE(AggMetric(ports.http, "ringside_analysis_unsaved_incidents"), 1);
  EXPECT_TRUE(StoredIncidents(state).empty());

  // Space returns: the next flush writes the incident.
  std::filesystem::remove(state + "/filler");
  ASSERT_TRUE(testing::Eventually(
      [&] { return AggMetric(ports.http, "ringside_analysis_unsaved_incidents") == 0; },
      absl::Seconds(10)))
      << agg->Stderr();
  EXPECT_TRUE(agg->WaitForStderr("incident store: writable again", absl::Seconds(5)));
  ASSERT_TRUE(a.Feed("after", 0, 500));
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("after") == 500; }));
  ASSERT_TRUE(a.WaitAllAcked(absl::Seconds(15)));
  Stop(agg.get());
  // Every incident of the run (the port went down, and flapped) is in the file.
  const std::vector<std::string> rows = StoredIncidents(state);
  const bool flapping_stored = std::any_of(rows.begin(), rows.end(), [](const std::string& r) {
    return absl::StartsWith(r, "link_flapping") && absl::StrContains(r, "node-a");
  });
  EXPECT_TRUE(flapping_stored) << absl::StrJoin(rows, "\n");
  const std::string log = agg->Stderr();
  size_t opened = 0;
  for (size_t at = 0; (at = log.find(" opened: ", at)) != std::string::npos; ++at) ++opened;
  EXPECT_EQ(rows.size(), opened) << absl::StrJoin(rows, "\n") << log;

  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, "incident store")) std::cerr << line << "\n";
  }
  // A restart finds it.
  agg = testing::StartAggregator(state, out_.path(), {}, &ports);
  ASSERT_NE(agg, nullptr);
  const std::string after_restart = testing::HttpGet(ports.http, "/api/v1/incidents");
  EXPECT_TRUE(absl::StrContains(after_restart, "link_flapping") &&
              absl::StrContains(after_restart, "node-a"))
      << after_restart;
  Stop(a.process());
  Stop(b.process());
  Stop(agg.get());
  const testing::JournalContents j = testing::ReadJournalRecords(state);
  ASSERT_EQ(j.error, "");
  ExpectAllOnce(j, "node-a", "before", 500);
  ExpectAllOnce(j, "node-a", "during", 1000);
  ExpectAllOnce(j, "node-a", "after", 500);
  ExpectNoneTwice(j);
  EXPECT_EQ(j.records.size(), 2000u);
}

// I/O errors (EIO) on incidents.db's writes, the journal well.
TEST_F(StorageFaultTest, SqliteIoErrors) {
  const std::string state = out_.path() + "/state";
  testing::IoFault fault(out_.path() + "/io-fault", ShimPath(), "/incidents.db");
  ASSERT_TRUE(fault.ok());
  testing::AggregatorPorts ports;
  std::unique_ptr<testing::Process> agg = testing::StartAggregator(
      state, out_.path(), {}, &ports,
      [&](std::vector<std::string> argv) { return fault.Wrap(std::move(argv)); });
  ASSERT_NE(agg, nullptr);
  FaultAgent a("node-a", out_.path());
  ASSERT_TRUE(a.Start(Loopback(ports.grpc)));
  ASSERT_TRUE(a.Feed("before", 0, 500));
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("before") == 500; }));
  ASSERT_TRUE(a.WaitAllAcked(absl::Seconds(15))) << agg->Stderr();

  fault.Set(testing::IoFault::kWrite, EIO);
  Flap(a);
  ASSERT_TRUE(agg->WaitForStderr("opened: link_flapping", absl::Seconds(20))) << agg->Stderr();
  ASSERT_TRUE(testing::Eventually(
      [&] { return AggMetric(ports.http, "ringside_analysis_unsaved_incidents") >= 1; },
      absl::Seconds(10)))
      << agg->Stderr();
  EXPECT_GT(fault.hits(), 0);
  EXPECT_TRUE(agg->WaitForStderr("incident store: cannot write", absl::Seconds(5)) &&
              agg->WaitForStderr("COMMIT: disk I/O error", absl::Seconds(1)))
      << agg->Stderr();
  const std::string listed = testing::HttpGet(ports.http, "/api/v1/incidents");
  EXPECT_TRUE(absl::StrContains(listed, "link_flapping")) << listed;
  ASSERT_TRUE(a.Feed("during", 0, 1000));
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("during") == 1000; }));
  EXPECT_TRUE(a.WaitAllAcked(absl::Seconds(15))) << "records not acked while SQLite fails";
  EXPECT_EQ(ReadyStatus(ports.http), 200);
  EXPECT_GE(AggMetric(ports.http, "ringside_analysis_unsaved_incidents"), 1);

  fault.Set(testing::IoFault::kWrite, 0);
  ASSERT_TRUE(testing::Eventually(
      [&] { return AggMetric(ports.http, "ringside_analysis_unsaved_incidents") == 0; },
      absl::Seconds(10)))
      << agg->Stderr();
  EXPECT_TRUE(agg->WaitForStderr("incident store: writable again", absl::Seconds(5)));
  Stop(a.process());
  Stop(agg.get());
  const std::string log = agg->Stderr();
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, "incident store")) std::cerr << line << "\n";
  }
  const std::vector<std::string> rows = StoredIncidents(state);
  size_t opened = 0;
  for (size_t at = 0; (at = log.find(" opened: ", at)) != std::string::npos; ++at) ++opened;
  EXPECT_EQ(rows.size(), opened) << absl::StrJoin(rows, "\n") << log;
  const testing::JournalContents j = testing::ReadJournalRecords(state);
  ASSERT_EQ(j.error, "");
  ExpectAllOnce(j, "node-a", "before", 500);
  ExpectAllOnce(j, "node-a", "during", 1000);
  ExpectNoneTwice(j);
}

// --- I/O errors on the journal ----------------------------------------------------------------

TEST_F(StorageFaultTest, JournalIoErrors) {
  const std::string state = out_.path() + "/state";
  testing::IoFault fault(out_.path() + "/io-fault", ShimPath(), "/journal/journal-");
  ASSERT_TRUE(fault.ok());
  testing::AggregatorPorts ports;
  std::unique_ptr<testing::Process> agg = testing::StartAggregator(
      state, out_.path(), {"--journal-retry-interval=200ms"}, &ports,
      [&](std::vector<std::string> argv) { return fault.Wrap(std::move(argv)); });
  ASSERT_NE(agg, nullptr);
  FaultAgent a("node-a", out_.path());
  FaultAgent b("node-b", out_.path());
  ASSERT_TRUE(a.Start(Loopback(ports.grpc)));
  ASSERT_TRUE(b.Start(Loopback(ports.grpc)));
  ASSERT_TRUE(a.Feed("before", 0, 500));
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("before") == 500; }));
  ASSERT_TRUE(a.WaitAllAcked(absl::Seconds(15))) << agg->Stderr();
  EXPECT_EQ(ReadyStatus(ports.http), 200);
  EXPECT_EQ(AggMetric(ports.http, "ringside_aggregator_journal_write_errors_total"), 0);

  // Writes fail with EIO, then syncs do (the writes succeed), then writes fail with EROFS (what a
  // file system remounted read-only after errors returns); records keep coming.
  struct Phase {
    testing::IoFault::Kind kind;
    int err;
    const char* call;
    const char* says;
  };
  const Phase phases[] = {{testing::IoFault::kWrite, EIO, "write", "Input/output error"},
                          {testing::IoFault::kSync, EIO, "fdatasync", "Input/output error"},
                          {testing::IoFault::kWrite, EROFS, "write", "Read-only file system"}};
  for (int phase = 0; phase < 3; ++phase) {
    SCOPED_TRACE(absl::StrCat(phases[phase].call, ": ", phases[phase].says));
    const int32_t hits_before = fault.hits();
    fault.Set(phases[phase].kind, phases[phase].err);
    const std::string job = absl::StrCat("during-", phase);
    ASSERT_TRUE(a.Feed(job, 0, 1000));
    ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn(job) == 1000; }));
    ASSERT_TRUE(
        testing::Eventually([&] { return ReadyStatus(ports.http) == 503; }, absl::Seconds(10)))
        << agg->Stderr();
    const double acked_stuck = a.Upload("ringside_agent_upload_acked_seq");
    absl::SleepFor(absl::Milliseconds(1200));
    EXPECT_GT(fault.hits(), hits_before + 2) << "the journal did not retry";
    // Nothing unwritten acknowledged; the aggregator says why; everyone else is served.
    EXPECT_EQ(a.Upload("ringside_agent_upload_acked_seq"), acked_stuck);
    EXPECT_GT(a.Upload("ringside_agent_upload_sent_seq"), acked_stuck + 5);
    EXPECT_TRUE(b.WaitAllAcked(absl::Seconds(5))) << "the aggregator stopped serving node-b";
    EXPECT_EQ(testing::QueryNodeCount(ports.grpc), 2);
    const std::string readyz = testing::HttpGet(ports.http, "/readyz");
    EXPECT_TRUE(absl::StrContains(readyz, "journal cannot be written") &&
                absl::StrContains(readyz, phases[phase].call) &&
                absl::StrContains(readyz, phases[phase].says))
        << readyz;
    EXPECT_EQ(AggMetric(ports.http, "ringside_aggregator_journal_healthy"), 0);
    EXPECT_GT(AggMetric(ports.http, "ringside_aggregator_journal_write_errors_total"), 0);
    EXPECT_TRUE(absl::StrContains(agg->Stderr(), "not acknowledging until it succeeds"));
    fault.Set(phases[phase].kind, 0);
    // The errors stop: the backlog is written and acknowledged.
    ASSERT_TRUE(
        testing::Eventually([&] { return ReadyStatus(ports.http) == 200; }, absl::Seconds(10)))
        << agg->Stderr();
    ASSERT_TRUE(a.WaitAllAcked(absl::Seconds(15))) << agg->Stderr();
  }
  ASSERT_TRUE(a.Feed("after", 0, 500));
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("after") == 500; }));
  ASSERT_TRUE(a.WaitAllAcked(absl::Seconds(15)));
  EXPECT_EQ(a.Upload("ringside_agent_upload_dropped_records_total", {{"type", "collectives"}}), 0);
  EXPECT_EQ(AggMetric(ports.http, "ringside_aggregator_journal_healthy"), 1);

  Stop(a.process());
  Stop(b.process());
  Stop(agg.get());
  const testing::JournalContents j = testing::ReadJournalRecords(state);
  ASSERT_EQ(j.error, "");
  ExpectAllOnce(j, "node-a", "before", 500);
  ExpectAllOnce(j, "node-a", "during-0", 1000);
  ExpectAllOnce(j, "node-a", "during-1", 1000);
  ExpectAllOnce(j, "node-a", "during-2", 1000);
  ExpectAllOnce(j, "node-a", "after", 500);
  ExpectNoneTwice(j);
  EXPECT_EQ(j.records.size(), 4000u);
  EXPECT_EQ(j.corrupt_segments, 0u) << agg->Stderr();
}

// A journal segment the disk will not read at restart (EIO).
TEST_F(StorageFaultTest, JournalReadErrorAtReplay) {
  const std::string state = out_.path() + "/state";
  const std::vector<std::string> flags = {"--journal-segment-bytes=8192"};
  testing::AggregatorPorts ports;
  std::unique_ptr<testing::Process> agg =
      testing::StartAggregator(state, out_.path(), flags, &ports);
  ASSERT_NE(agg, nullptr);
  FaultAgent a("node-a", out_.path());
  testing::PartitionRelay front(ports.grpc);  // the agent's fixed address across the restart
  ASSERT_TRUE(a.Start(Loopback(front.port())));
  for (int part = 0; part < 10; ++part) {
    ASSERT_TRUE(a.Feed("before", part * 150, 150));
    absl::SleepFor(absl::Milliseconds(150));  // separate batches, several segments
  }
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("before") == 1500; }));
  ASSERT_TRUE(a.WaitAllAcked(absl::Seconds(15))) << agg->Stderr();
  Stop(agg.get());

  // The victim: a segment in the middle. What a replay without it restores (the same reader, on a
  // copy of the journal that lacks it).
  const std::vector<std::string> segments = SegmentsOf(state);
  ASSERT_GE(segments.size(), 3u);
  const std::string victim = segments[segments.size() / 2];
  testing::TempDir copy;
  std::filesystem::create_directories(copy.path() + "/journal");
  for (const std::string& seg : segments) {
    if (seg != victim) {
      std::filesystem::copy_file(state + "/journal/" + seg, copy.path() + "/journal/" + seg);
    }
  }
  uint64_t expect_payloads = 0;
  ASSERT_TRUE(
      daemon::ReadJournal(copy.path() + "/journal", nullptr, [&](const daemon::JournalEntry&) {
        ++expect_payloads;
      }).ok());
  daemon::JournalReadStats all;
  ASSERT_TRUE(daemon::ReadJournal(state + "/journal", nullptr, nullptr, nullptr, &all).ok());
  ASSERT_LT(expect_payloads, all.payloads - all.duplicates) << "the victim holds no payload";

  testing::IoFault fault(out_.path() + "/io-fault", ShimPath(), "/journal/" + victim);
  ASSERT_TRUE(fault.ok());
  fault.Set(testing::IoFault::kRead, EIO);
  agg = testing::StartAggregator(
      state, out_.path(), flags, &ports,
      [&](std::vector<std::string> argv) { return fault.Wrap(std::move(argv)); });
  ASSERT_NE(agg, nullptr);
  front.SetTarget(ports.grpc);
  const std::string log = agg->Stderr();
  EXPECT_GT(fault.hits(), 0);
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat(victim, ": could not be read")) &&
              absl::StrContains(log, "Input/output error"))
      << log;
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat(expect_payloads, " payloads from ")) &&
              absl::StrContains(log, "1 unreadable segments"))
      << "expected " << expect_payloads << " payloads replayed: " << log;
  EXPECT_EQ(ReadyStatus(ports.http), 200);
  // New records are taken.
  ASSERT_TRUE(a.Feed("after", 0, 500));
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("after") == 500; }));
  ASSERT_TRUE(a.WaitAllAcked(absl::Seconds(20))) << agg->Stderr();
  Stop(a.process());
  Stop(agg.get());
  // The segment was only unreadable, not gone: with the disk well again, everything is there once.
  fault.Set(testing::IoFault::kRead, 0);
  const testing::JournalContents j = testing::ReadJournalRecords(state);
  ASSERT_EQ(j.error, "");
  ExpectAllOnce(j, "node-a", "before", 1500);
  ExpectAllOnce(j, "node-a", "after", 500);
  ExpectNoneTwice(j);
}

// --- A read-only state dir (EROFS) at start ---------------------------------------------------

// The kernel refuses to remount a file system (or a bind mount) read-only while a file on it is
// open for writing (EBUSY), which the journal's current segment always is: a running aggregator
// meets EROFS only from a file system that turns read-only after errors (ext4 errors=remount-ro),
// as JournalIoErrors injects. Here the state dir is read-only when the aggregator starts.
TEST_F(StorageFaultTest, ReadOnlyStateDirAtStart) {
  PrivateMounts mounts;
  if (!mounts.ok()) GTEST_SKIP() << "no private mount namespace here: " << mounts.why();
  const std::string state = out_.path() + "/state";
  std::filesystem::create_directories(state);
  ASSERT_TRUE(mounts.BindSelf(state)) << mounts.why();
  testing::AggregatorPorts ports;
  std::unique_ptr<testing::Process> agg = testing::StartAggregator(state, out_.path(), {}, &ports);
  ASSERT_NE(agg, nullptr);
  testing::PartitionRelay front(ports.grpc);  // the agent's fixed address across the restarts
  FaultAgent a("node-a", out_.path());
  ASSERT_TRUE(a.Start(Loopback(front.port())));
  ASSERT_TRUE(a.Feed("before", 0, 500));
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("before") == 500; }));
  ASSERT_TRUE(a.WaitAllAcked(absl::Seconds(15))) << agg->Stderr();
  Stop(agg.get());

  // Read-only: the aggregator refuses to start and says why (it can write neither incidents.db
  // nor its journal), rather than run without persisting. Records meanwhile wait in the agent.
  ASSERT_TRUE(mounts.SetReadOnly(state, true)) << mounts.why();
  ASSERT_TRUE(a.Feed("during", 0, 500));
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("during") == 500; }));
  testing::Process refused(
      {testing::BinaryPath("daemon/ringside-aggregator"), "--listen=127.0.0.1:0",
       "--http-listen=127.0.0.1:0", "--state-dir=" + state},
      out_.path());
  EXPECT_EQ(refused.Wait(absl::Seconds(20)), 1) << refused.Stderr();
  std::cerr << "read-only state dir: " << refused.Stderr();
  EXPECT_TRUE(absl::StrContains(refused.Stderr(), "Read-only file system") &&
              absl::StrContains(refused.Stderr(), state + "/"))
      << refused.Stderr();

  // Writable again: it starts, and what the agent held arrives once.
  ASSERT_TRUE(mounts.SetReadOnly(state, false)) << mounts.why();
  agg = testing::StartAggregator(state, out_.path(), {}, &ports);
  ASSERT_NE(agg, nullptr);
  front.SetTarget(ports.grpc);
  ASSERT_TRUE(a.WaitAllAcked(absl::Seconds(20))) << agg->Stderr();
  EXPECT_EQ(a.Upload("ringside_agent_upload_dropped_records_total", {{"type", "collectives"}}), 0);
  Stop(a.process());
  Stop(agg.get());
  const testing::JournalContents j = testing::ReadJournalRecords(state);
  ASSERT_EQ(j.error, "");
  ExpectAllOnce(j, "node-a", "before", 500);
  ExpectAllOnce(j, "node-a", "during", 500);
  ExpectNoneTwice(j);
}

// --- A SIGSTOPped aggregator ------------------------------------------------------------------

// Sessions of `agent`'s uploader `labels` that ended so far, whatever the reason.
double SessionEnds(FaultAgent& agent, const std::map<std::string, std::string>& labels) {
  double sum = 0;
  for (const testing::PromSample& s :
       testing::ParsePromText(testing::HttpGet(agent.metrics_port(), "/metrics"))
           .Find("ringside_agent_upload_session_ends_total", labels)) {
    sum += s.value;
  }
  return sum;
}

// Records fed to `a` in 20 parts over about `span` (the caller's clock keeps running).
void FeedOver(FaultAgent& a, const std::string& job, uint64_t count, absl::Duration span,
              const std::function<void()>& each) {
  const uint64_t part = count / 20;
  for (uint64_t first = 0; first < count; first += part) {
    ASSERT_TRUE(a.Feed(job, first, std::min(part, count - first)));
    if (each) each();
    absl::SleepFor(span / 20);
  }
}

TEST_F(StorageFaultTest, SigstoppedReplica) {
  testing::AggregatorPorts pa, pb;
  std::unique_ptr<testing::Process> agg_a =
      testing::StartAggregator(out_.path() + "/state-a", out_.path(), {}, &pa);
  std::unique_ptr<testing::Process> agg_b =
      testing::StartAggregator(out_.path() + "/state-b", out_.path(), {}, &pb);
  ASSERT_NE(agg_a, nullptr);
  ASSERT_NE(agg_b, nullptr);
  const std::map<std::string, std::string> to_a = {{"aggregator", Loopback(pa.grpc)}};
  const std::map<std::string, std::string> to_b = {{"aggregator", Loopback(pb.grpc)}};
  constexpr uint64_t kBuffer = 16 << 20;
  FaultAgent n("node-a", out_.path());
  ASSERT_TRUE(n.Start(absl::StrCat(Loopback(pa.grpc), ",", Loopback(pb.grpc)),
                      {absl::StrCat("--upload-buffer=", kBuffer)}));
  ASSERT_TRUE(n.Feed("before", 0, 1000));
  ASSERT_TRUE(testing::Eventually([&] { return n.RecordsIn("before") == 1000; }));
  ASSERT_TRUE(n.WaitAllAcked(absl::Seconds(15), to_a));
  ASSERT_TRUE(n.WaitAllAcked(absl::Seconds(15), to_b));
  const double ends_before = SessionEnds(n, to_a);

  // Replica A stops for 5 s while 20,000 records arrive; B acknowledges throughout.
  agg_a->Signal(SIGSTOP);
  const absl::Time stopped_at = absl::Now();
  double buffer_max = 0;
  double b_acked_last = n.Upload("ringside_agent_upload_acked_seq", to_b);
  int b_ack_moves = 0;
  FeedOver(n, "during", 20000, absl::Seconds(4), [&] {
    buffer_max = std::max(buffer_max, n.Upload("ringside_agent_upload_buffer_bytes", to_a));
    const double acked = n.Upload("ringside_agent_upload_acked_seq", to_b);
    b_ack_moves += acked > b_acked_last;
    b_acked_last = acked;
  });
  ASSERT_TRUE(testing::Eventually([&] { return n.RecordsIn("during") == 20000; }));
  EXPECT_TRUE(n.WaitAllAcked(absl::Seconds(5), to_b)) << "replica B stopped acknowledging";
  EXPECT_GE(b_ack_moves, 10) << "replica B's acks did not keep moving while A was stopped";
  EXPECT_EQ(testing::QueryNodeCount(pb.grpc), 1);
  while (absl::Now() < stopped_at + absl::Seconds(5)) absl::SleepFor(absl::Milliseconds(100));
  buffer_max = std::max(buffer_max, n.Upload("ringside_agent_upload_buffer_bytes", to_a));
  // A's share waits in its own buffer, within its bound.
  EXPECT_GT(buffer_max, 0);
  EXPECT_LE(buffer_max, static_cast<double>(kBuffer));
  EXPECT_LT(n.Upload("ringside_agent_upload_acked_seq", to_a),
            n.Upload("ringside_agent_upload_sent_seq", to_a));
  const double buffer_b = n.Upload("ringside_agent_upload_buffer_bytes", to_b);

  agg_a->Signal(SIGCONT);
  ASSERT_TRUE(n.WaitAllAcked(absl::Seconds(20), to_a)) << n.process()->Stderr();
  ASSERT_TRUE(n.Feed("after", 0, 1000));
  ASSERT_TRUE(testing::Eventually([&] { return n.RecordsIn("after") == 1000; }));
  ASSERT_TRUE(n.WaitAllAcked(absl::Seconds(15), to_a));
  ASSERT_TRUE(n.WaitAllAcked(absl::Seconds(15), to_b));
  // The stop (5 s) is shorter than the uploader's write (30 s) and ack (60 s) timeouts and its
  // keepalive (30 s): the session is expected to resume, not to end (printed, not asserted).
  const double ends_after = SessionEnds(n, to_a);
  EXPECT_EQ(n.Upload("ringside_agent_upload_connected", to_a), 1);
  std::cerr << "replica A stopped 5 s: its buffer held at most " << buffer_max
            << " bytes (B's: " << buffer_b << "); A's session ends " << ends_before << " -> "
            << ends_after << "\n";
  for (const auto* to : {&to_a, &to_b}) {
    std::map<std::string, std::string> l = *to;
    l["type"] = "collectives";
    EXPECT_EQ(n.Upload("ringside_agent_upload_dropped_records_total", l), 0);
  }

  Stop(n.process());
  Stop(agg_a.get());
  Stop(agg_b.get());
  for (const char* which : {"/state-a", "/state-b"}) {
    SCOPED_TRACE(which);
    const testing::JournalContents j = testing::ReadJournalRecords(out_.path() + which);
    ASSERT_EQ(j.error, "");
    ExpectAllOnce(j, "node-a", "before", 1000);
    ExpectAllOnce(j, "node-a", "during", 20000);
    ExpectAllOnce(j, "node-a", "after", 1000);
    ExpectNoneTwice(j);
  }
}

TEST_F(StorageFaultTest, SigstoppedAggregator) {
  const std::string state = out_.path() + "/state";
  testing::AggregatorPorts ports;
  std::unique_ptr<testing::Process> agg = testing::StartAggregator(state, out_.path(), {}, &ports);
  ASSERT_NE(agg, nullptr);
  constexpr uint64_t kBuffer = 16 << 20;
  FaultAgent a("node-a", out_.path());
  ASSERT_TRUE(a.Start(Loopback(ports.grpc), {absl::StrCat("--upload-buffer=", kBuffer)}));
  ASSERT_TRUE(a.Feed("before", 0, 1000));
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("before") == 1000; }));
  ASSERT_TRUE(a.WaitAllAcked(absl::Seconds(15)));

  agg->Signal(SIGSTOP);
  const absl::Time stopped_at = absl::Now();
  double buffer_max = 0;
  FeedOver(a, "during", 20000, absl::Seconds(4), [&] {
    buffer_max = std::max(buffer_max, a.Upload("ringside_agent_upload_buffer_bytes"));
  });
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("during") == 20000; }));
  while (absl::Now() < stopped_at + absl::Seconds(5)) absl::SleepFor(absl::Milliseconds(100));
  buffer_max = std::max(buffer_max, a.Upload("ringside_agent_upload_buffer_bytes"));
  EXPECT_GT(buffer_max, 0);
  EXPECT_LE(buffer_max, static_cast<double>(kBuffer));
  agg->Signal(SIGCONT);
  ASSERT_TRUE(a.WaitAllAcked(absl::Seconds(20))) << a.process()->Stderr();
  ASSERT_TRUE(a.Feed("after", 0, 1000));
  ASSERT_TRUE(testing::Eventually([&] { return a.RecordsIn("after") == 1000; }));
  ASSERT_TRUE(a.WaitAllAcked(absl::Seconds(15)));
  EXPECT_EQ(a.Upload("ringside_agent_upload_dropped_records_total", {{"type", "collectives"}}), 0);
  std::cerr << "aggregator stopped 5 s: the agent's buffer held at most " << buffer_max
            << " bytes\n";

  Stop(a.process());
  Stop(agg.get());
  const testing::JournalContents j = testing::ReadJournalRecords(state);
  ASSERT_EQ(j.error, "");
  ExpectAllOnce(j, "node-a", "before", 1000);
  ExpectAllOnce(j, "node-a", "during", 20000);
  ExpectAllOnce(j, "node-a", "after", 1000);
  ExpectNoneTwice(j);
}

}  // namespace
}  // namespace ringside
