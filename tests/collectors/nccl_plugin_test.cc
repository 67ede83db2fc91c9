// libringside_nccl.so driven the way NCCL drives it (nccl_plugin_driver, one process per rank)
// against the agent's real CollectiveListener on a temporary socket.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/timex.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "collectors/nccl_plugin/record_format.h"
#include "daemon/agent/collective_listener.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/collectors/nccl_driver_plan.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside::daemon {
namespace {

namespace plan = ::ringside::testing::nccl_plan;
using ::ringside::testing::Process;
using ::ringside::testing::TempDir;

constexpr int kRanks = 8;
constexpr int kCollectives = 40;  // per communicator per rank

std::string HostName() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return std::string(buf).substr(0, 63);
}

bool ClockSynchronized() {
  struct timex tx = {};
  const int state = adjtimex(&tx);
  return state >= 0 && state != TIME_ERROR && (tx.status & STA_UNSYNC) == 0;
}

// Everything the listener handed to its sink.
class Received {
 public:
  Received() {
    open_.Notify();
    gate_ = &open_;
  }
  CollectiveSink Sink() {
    return [this](v1::CollectiveBatch b) {
      gate_.load()->WaitForNotification();
      absl::MutexLock lock(&mu_);
      for (const auto& [job, n] : b.dropped_by_job()) dropped_[job] += n;
      for (auto& r : *b.mutable_records()) records_.push_back(std::move(r));
    };
  }
  // Holds the sink, and with it the listener's only thread, until Release(): a stalled agent.
  // Call before the listener starts.
  void Hold() { gate_ = &held_; }
  void Release() { held_.Notify(); }

  bool WaitForRecords(size_t n, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      {
        absl::MutexLock lock(&mu_);
        if (records_.size() >= n) return true;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }
  std::vector<v1::CollectiveRecord> records() {
    absl::MutexLock lock(&mu_);
    return records_;
  }
  std::map<std::string, uint64_t> dropped() {
    absl::MutexLock lock(&mu_);
    return dropped_;
  }

 private:
  absl::Notification open_;
  absl::Notification held_;
  std::atomic<absl::Notification*> gate_{nullptr};
  absl::Mutex mu_;
  std::vector<v1::CollectiveRecord> records_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> dropped_ ABSL_GUARDED_BY(mu_);
};

struct DriverOutput {
  int pid = 0;
  int mask = -1;
  std::string name;
  // (comm, i) → [before, after] around the Coll start/stop.
  std::map<std::pair<int, int>, std::pair<int64_t, int64_t>> enqueue;
  std::vector<std::string> lines;
};

DriverOutput ParseDriver(const std::string& out) {
  DriverOutput d;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    d.lines.push_back(line);
    std::istringstream l(line);
    std::string word;
    l >> word;
    if (word == "pid") l >> d.pid;
    if (word == "mask") l >> d.mask;
    if (word == "name") l >> d.name;
    if (word == "enqueue") {
      int c, i;
      int64_t before, after;
      l >> c >> i >> before >> after;
      d.enqueue[{c, i}] = {before, after};
    }
  }
  return d;
}

std::string Line(const DriverOutput& d, const std::string& word) {
  for (const std::string& l : d.lines) {
    if (absl::StartsWith(l, word + " ")) return l;
  }
  return "";
}

// The record the plugin must produce for (comm, i) of a world rank, enqueue time aside.
v1::CollectiveRecord Expected(int comm, int i, int world_rank, int pid, const std::string& job) {
  const plan::CommSpec c = plan::Comm(comm, world_rank, kRanks);
  const plan::CollSpec s = plan::Coll(comm, i, world_rank);
  v1::CollectiveRecord r;
  r.set_job_id(job);
  r.set_comm_id(c.comm_id);
  r.set_comm_name(c.name == nullptr ? "" : c.name);
  r.set_rank(c.rank);
  r.set_nranks(c.nranks);
  r.set_function(s.func);
  r.set_seq(s.seq);
  r.set_bytes(s.count * s.element_size);
  r.set_algorithm(s.algo);
  r.set_protocol(s.proto);
  r.set_channels(s.channels);
  if (s.channels > 0) {
    r.set_kernel_start_unix_nanos(
        static_cast<int64_t>(*std::min_element(s.start, s.start + s.channels)));
    r.set_kernel_stop_unix_nanos(
        static_cast<int64_t>(*std::max_element(s.stop, s.stop + s.channels)));
  }
  r.set_pid(pid);
  r.set_host(HostName());
  r.set_clock_synchronized(ClockSynchronized());
  return r;
}

class NcclPluginTest : public ::testing::Test {
 protected:
  std::string SocketPath() const { return tmp_.path() + "/collectives.sock"; }

  void StartListener(CollectiveListenerOptions o = {}) {
    o.socket_path = SocketPath();
    absl::StatusOr<std::unique_ptr<CollectiveListener>> l =
        CollectiveListener::Start(o, received_.Sink(), absl::Now, [this](const std::string& m) {
          absl::MutexLock lock(&log_mu_);
          log_.push_back(m);
        });
    ASSERT_TRUE(l.ok()) << l.status();
    listener_ = std::move(*l);
  }

  std::vector<std::string> DriverArgs(int version, const std::string& mode) {
    return {NCCL_PLUGIN_DRIVER, absl::StrCat("--plugin=", NCCL_PLUGIN_PATH),
            absl::StrCat("--version=", version), absl::StrCat("--mode=", mode),
            absl::StrCat("--socket=", SocketPath())};
  }

  // The listener's counters and log, for failure messages.
  std::string Diagnostics() {
    const CollectiveListenerStats st = listener_->Stats();
    std::string out = absl::StrCat("connections accepted ", st.connections_accepted, ", open ",
                                   st.connections_open);
    for (const auto& [reason, n] : st.rejections) {
      if (n > 0) absl::StrAppend(&out, ", ", reason, " ", n);
    }
    for (const auto& [job, j] : st.jobs) {
      absl::StrAppend(&out, ", job ", job, ": ", j.records, " records ", j.drops, " drops ",
                      j.rate_limited, " rate-limited");
    }
    absl::MutexLock lock(&log_mu_);
    for (const std::string& l : log_) absl::StrAppend(&out, "\n  log: ", l);
    return out;
  }

  uint64_t TotalRejections() {
    uint64_t n = 0;
    for (const auto& [reason, count] : listener_->Stats().rejections) n += count;
    return n;
  }

  TempDir tmp_;
  Received received_;
  std::unique_ptr<CollectiveListener> listener_;
  absl::Mutex log_mu_;
  std::vector<std::string> log_;
};

class PluginVersionTest : public NcclPluginTest, public ::testing::WithParamInterface<int> {};

TEST_P(PluginVersionTest, EightRanksInEightProcessesDeliverExactlyTheExpectedRecords) {
  const int version = GetParam();
  StartListener();
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    std::vector<std::string> args = DriverArgs(version, "plan");
    args.push_back(absl::StrCat("--rank=", r));
    args.push_back(absl::StrCat("--nranks=", kRanks));
    args.push_back(absl::StrCat("--collectives=", kCollectives));
    args.push_back("--env=RINGSIDE_JOB_ID=job-42");
    args.push_back("--env=SLURM_JOB_ID=not-this-one");
    ranks.push_back(std::make_unique<Process>(args, tmp_.path()));
  }
  std::vector<DriverOutput> outs;
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(ranks[r]->Wait(absl::Seconds(120)), 0) << "rank " << r << ":\n" << ranks[r]->Stderr();
    outs.push_back(ParseDriver(ranks[r]->Stdout()));
    EXPECT_EQ(outs[r].pid, ranks[r]->pid());
    EXPECT_EQ(outs[r].mask, version >= 6 ? 0x1042 : 0x42)
        << "the plugin asks for Coll | KernelCh, and CeColl from v6 on";
    EXPECT_EQ(outs[r].name, "ringside");
    EXPECT_TRUE(absl::StrContains(ranks[r]->Stderr(),
                                  absl::StrCat("ringside: NCCL profiler v", version, ", comm ")))
        << ranks[r]->Stderr();
  }
  const size_t expected_count = static_cast<size_t>(kRanks) * plan::kComms * kCollectives;
  // Every rank finalized (and flushed) before it exited, so everything is there already; allow the
  // listener's thread a moment.
  ASSERT_TRUE(received_.WaitForRecords(expected_count, absl::Seconds(20)));
  absl::SleepFor(absl::Milliseconds(100));  // anything extra would arrive now
  const std::vector<v1::CollectiveRecord> got = received_.records();
  ASSERT_EQ(got.size(), expected_count);

  std::map<std::tuple<uint32_t, uint64_t, std::string, uint64_t>, const v1::CollectiveRecord*>
      by_key;
  for (const v1::CollectiveRecord& r : got) {
    auto [it, fresh] =
        by_key.emplace(std::make_tuple(r.pid(), r.comm_id(), r.function(), r.seq()), &r);
    EXPECT_TRUE(fresh) << "duplicate record " << r.ShortDebugString();
  }
  int checked = 0;
  for (int rank = 0; rank < kRanks; ++rank) {
    for (int c = 0; c < plan::kComms; ++c) {
      for (int i = 0; i < kCollectives; ++i) {
        v1::CollectiveRecord want = Expected(c, i, rank, outs[rank].pid, "job-42");
        auto it =
            by_key.find(std::make_tuple(want.pid(), want.comm_id(), want.function(), want.seq()));
        ASSERT_NE(it, by_key.end()) << "missing " << want.ShortDebugString();
        const v1::CollectiveRecord& have = *it->second;
        // The host enqueue time lies between the driver's clock readings around Coll start/stop.
        const auto [before, after] = outs[rank].enqueue.at({c, i});
        EXPECT_GE(have.enqueue_unix_nanos(), before);
        EXPECT_LE(have.enqueue_unix_nanos(), after);
        want.set_enqueue_unix_nanos(have.enqueue_unix_nanos());
        std::string diff;
        google::protobuf::util::MessageDifferencer d;
        d.ReportDifferencesToString(&diff);
        EXPECT_TRUE(d.Compare(want, have)) << "rank " << rank << " comm " << c << " #" << i << ":\n"
                                           << diff;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(expected_count));

  const CollectiveListenerStats stats = listener_->Stats();
  ASSERT_EQ(stats.jobs.count("job-42"), 1u);
  EXPECT_EQ(stats.jobs.at("job-42").records, expected_count);
  EXPECT_EQ(stats.jobs.at("job-42").drops, 0u);
  EXPECT_EQ(stats.jobs.at("job-42").rate_limited, 0u);
  EXPECT_EQ(TotalRejections(), 0u);
  EXPECT_GE(stats.connections_accepted, static_cast<uint64_t>(kRanks));
  EXPECT_TRUE(received_.dropped().empty());
}

INSTANTIATE_TEST_SUITE_P(EveryExportedVersion, PluginVersionTest, ::testing::Values(4, 5, 6),
                         [](const auto& info) { return absl::StrCat("v", info.param); });

TEST_F(NcclPluginTest, JobIdComesFromTheEnvironmentThenTheCommunicator) {
  StartListener();
  struct Case {
    std::vector<std::string> env;
    std::string world_job;  // comm 0, named "world"
    std::string pair_job;   // comm 1, unnamed
  };
  const std::vector<Case> cases = {
      {{"RINGSIDE_JOB_ID=rs", "SLURM_JOB_ID=slurm", "TORCHELASTIC_RUN_ID=te"}, "rs", "rs"},
      {{"SLURM_JOB_ID=slurm", "TORCHELASTIC_RUN_ID=te"}, "slurm", "slurm"},
      {{"RINGSIDE_JOB_ID=", "TORCHELASTIC_RUN_ID=te"}, "te", "te"},
      {{}, "world", "comm-5252000000000000"},
  };
  size_t total = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    std::vector<std::string> args = DriverArgs(5, "plan");
    args.push_back("--collectives=1");
    args.push_back("--nranks=2");
    for (const std::string& e : cases[k].env) args.push_back("--env=" + e);
    Process p(args, tmp_.path());
    ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Stderr();
    total += 2;
    ASSERT_TRUE(received_.WaitForRecords(total, absl::Seconds(20)));
    std::vector<v1::CollectiveRecord> got = received_.records();
    std::map<uint64_t, std::string> job_by_comm;
    for (size_t i = total - 2; i < total; ++i) job_by_comm[got[i].comm_id()] = got[i].job_id();
    EXPECT_EQ(job_by_comm[plan::Comm(0, 0, 2).comm_id], cases[k].world_job) << "case " << k;
    EXPECT_EQ(job_by_comm[plan::Comm(1, 0, 2).comm_id], cases[k].pair_job) << "case " << k;
  }
}

TEST_F(NcclPluginTest, WithNoAgentAMillionCollectivesNeverBlockAndTheDropCountIsExact) {
  constexpr int kMillion = 1'000'000;
  constexpr int kRing = 4096;  // records the plugin keeps for an agent that is not there yet
  std::vector<std::string> args = DriverArgs(6, "count");
  args.push_back(absl::StrCat("--collectives=", kMillion));
  args.push_back("--env=RINGSIDE_JOB_ID=million");
  args.push_back("--seccomp");
  args.push_back("--wait-file=" + SocketPath());
  Process p(args, tmp_.path());
  ASSERT_TRUE(p.WaitForStderr("phase 1 done", absl::Seconds(240))) << p.Stderr();
  const DriverOutput out = ParseDriver(p.Stdout());
  // "count N WALL_NS MAX_NS": the million ran at full speed with no agent.
  std::vector<std::string> count = absl::StrSplit(Line(out, "count"), ' ');
  ASSERT_EQ(count.size(), 4u) << p.Stdout();
  const double wall_s = std::stod(count[2]) / 1e9;
  const double max_ms = std::stod(count[3]) / 1e6;
  std::printf(
      "1,000,000 collectives with no agent: %.2f s (%.0f ns per collective of 4 events + 2 "
      "KernelCh), slowest %.3f ms\n",
      wall_s, wall_s * 1e9 / kMillion, max_ms);
  EXPECT_LT(wall_s, 60.0);
  EXPECT_LT(max_ms, 1000.0);
  // No system call at all on the calling thread (a seccomp filter counted them).
  const std::string syscalls = Line(out, "syscalls");
  if (syscalls == "syscalls unavailable") {
    std::printf("seccomp unavailable here: the no-syscall check was skipped\n");
  } else {
    EXPECT_EQ(syscalls, "syscalls 0 -1") << "system calls on the hot path (count, last number)";
  }

  // Now an agent appears: the plugin delivers the records its ring kept (the first 4096), then
  // the one made after the agent appeared, unless the ring was still full when it completed (the
  // sender reconnects with up to 2 s of backoff); and the exact number it dropped.
  StartListener();
  ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Stderr();
  ASSERT_TRUE(received_.WaitForRecords(kRing, absl::Seconds(20)))
      << received_.records().size() << " records; " << Diagnostics() << "\n"
      << p.Stderr();
  absl::SleepFor(absl::Milliseconds(200));
  std::vector<v1::CollectiveRecord> got = received_.records();
  ASSERT_GE(got.size(), static_cast<size_t>(kRing));
  ASSERT_LE(got.size(), static_cast<size_t>(kRing + 1));
  std::vector<uint64_t> seqs;
  for (const auto& r : got) seqs.push_back(r.seq());
  std::sort(seqs.begin(), seqs.end());
  for (int i = 0; i < kRing; ++i) ASSERT_EQ(seqs[i], static_cast<uint64_t>(i));
  if (got.size() == kRing + 1) {
    EXPECT_EQ(seqs[kRing], static_cast<uint64_t>(kMillion));
  }
  const uint64_t dropped = kMillion + 1 - got.size();
  std::printf("delivered %zu, dropped %llu (of %d)\n", got.size(),
              static_cast<unsigned long long>(dropped), kMillion + 1);
  EXPECT_EQ(received_.dropped(), (std::map<std::string, uint64_t>{{"million", dropped}}));
  EXPECT_EQ(listener_->Stats().jobs.at("million").drops, dropped);
  EXPECT_EQ(listener_->Stats().jobs.at("million").records, got.size());
}

TEST_F(NcclPluginTest, AStalledAgentNeverBlocksTrainingAndTheDropCountIsExact) {
  constexpr int kCollectives = 300'000;
  CollectiveListenerOptions o;
  o.records_per_second = 1e9;
  o.burst_records = 1e9;
  received_.Hold();  // the agent accepts the connection, then reads nothing
  StartListener(o);
  const std::string go = tmp_.path() + "/go";
  std::vector<std::string> args = DriverArgs(6, "count");
  args.push_back(absl::StrCat("--collectives=", kCollectives));
  args.push_back("--env=SLURM_JOB_ID=4711");
  args.push_back("--wait-file=" + go);
  Process p(args, tmp_.path());
  ASSERT_TRUE(p.WaitForStderr("phase 1 done", absl::Seconds(120))) << p.Stderr();
  std::vector<std::string> count = absl::StrSplit(Line(ParseDriver(p.Stdout()), "count"), ' ');
  ASSERT_EQ(count.size(), 4u);
  std::printf("%d collectives against a stalled agent: %.2f s, slowest %.3f ms\n", kCollectives,
              std::stod(count[2]) / 1e9, std::stod(count[3]) / 1e6);
  received_.Release();
  std::ofstream(go) << "go";
  ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Stderr();
  absl::SleepFor(absl::Milliseconds(300));
  const size_t got = received_.records().size();
  const std::map<std::string, uint64_t> dropped = received_.dropped();
  const uint64_t drops = dropped.count("4711") ? dropped.at("4711") : 0;
  std::printf("delivered %zu, dropped %llu\n", got, static_cast<unsigned long long>(drops));
  EXPECT_GT(drops, 0u) << "the stalled agent should have cost records";
  EXPECT_GT(got, 0u);
  EXPECT_EQ(got + drops, static_cast<uint64_t>(kCollectives + 1));
  EXPECT_EQ(dropped.size(), 1u);
}

TEST_F(NcclPluginTest, AnAgentRestartIsFollowed) {
  StartListener();
  const std::string go = tmp_.path() + "/go";
  std::vector<std::string> args = DriverArgs(5, "count");
  args.push_back("--collectives=1000");
  args.push_back("--env=RINGSIDE_JOB_ID=restart");
  args.push_back("--wait-file=" + go);
  Process p(args, tmp_.path());
  ASSERT_TRUE(p.WaitForStderr("phase 1 done", absl::Seconds(60))) << p.Stderr();
  ASSERT_TRUE(received_.WaitForRecords(1000, absl::Seconds(20))) << Diagnostics();
  // The agent goes away and a new one takes the socket: the plugin sees the connection close and
  // connects to the new one.
  listener_.reset();
  Received after;
  CollectiveListenerOptions o;
  o.socket_path = SocketPath();
  auto l = CollectiveListener::Start(o, after.Sink());
  ASSERT_TRUE(l.ok()) << l.status();
  std::ofstream(go) << "go";
  ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Stderr();
  ASSERT_TRUE(after.WaitForRecords(1, absl::Seconds(20)));
  EXPECT_EQ(after.records()[0].seq(), 1000u);
  EXPECT_EQ(after.records()[0].job_id(), "restart");
  EXPECT_TRUE(after.dropped().empty());
}

TEST_F(NcclPluginTest, SurvivesFork) {
  StartListener();
  std::vector<std::string> args = DriverArgs(5, "fork");
  args.push_back("--env=RINGSIDE_JOB_ID=forked");
  Process p(args, tmp_.path());
  ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Stderr();
  const DriverOutput out = ParseDriver(p.Stdout());
  std::vector<std::string> child_line = absl::StrSplit(Line(out, "child-pid"), ' ');
  ASSERT_EQ(child_line.size(), 2u) << p.Stdout();
  const uint32_t parent = static_cast<uint32_t>(p.pid());
  const uint32_t child = static_cast<uint32_t>(std::stoi(child_line[1]));
  std::set<std::tuple<uint32_t, uint64_t, uint64_t>> want;  // (pid, comm, seq)
  const uint64_t world = plan::Comm(0, 0, 2).comm_id;
  for (uint64_t s = 0; s < 20; ++s) want.insert({parent, world, s});
  for (uint64_t s = 100; s < 105; ++s) want.insert({child, world, s});
  for (uint64_t s = 200; s < 205; ++s) want.insert({child, 0x6363000000000001ull, s});
  ASSERT_TRUE(received_.WaitForRecords(want.size(), absl::Seconds(20)));
  absl::SleepFor(absl::Milliseconds(200));
  std::multiset<std::tuple<uint32_t, uint64_t, uint64_t>> got;
  for (const auto& r : received_.records()) {
    got.insert({r.pid(), r.comm_id(), r.seq()});
    EXPECT_EQ(r.job_id(), "forked");
  }
  using Key = std::tuple<uint32_t, uint64_t, uint64_t>;
  EXPECT_TRUE(got == std::multiset<Key>(want.begin(), want.end()))
      << "got " << got.size() << " records, want " << want.size() << " (each exactly once)";
  EXPECT_TRUE(received_.dropped().empty());
}

TEST_F(NcclPluginTest, OddInputsNeverProduceARecordTheAgentRejects) {
  StartListener();
  for (int version : {4, 6}) {
    std::vector<std::string> args = DriverArgs(version, "weird");
    Process p(args, tmp_.path());
    ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Stderr();
    EXPECT_TRUE(absl::StrContains(p.Stderr(), "NCCL WARN")) << "the bad init is logged";
  }
  ASSERT_TRUE(received_.WaitForRecords(4, absl::Seconds(20)));
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(TotalRejections(), 0u);
  std::vector<v1::CollectiveRecord> got = received_.records();
  ASSERT_EQ(got.size(), 4u);
  for (const auto& r : got) {
    EXPECT_EQ(r.rank(), 1u);
    EXPECT_EQ(r.nranks(), 4u);
    EXPECT_EQ(r.job_id(), "world");
    EXPECT_EQ(r.kernel_start_unix_nanos(), 0) << "no valid kernel interval was given";
    EXPECT_EQ(r.kernel_stop_unix_nanos(), 0);
    if (r.seq() == 1) {
      EXPECT_EQ(r.function(), "unknown");
      EXPECT_EQ(r.bytes(), 0u);  // unknown datatype
      EXPECT_EQ(r.algorithm(), "");
      EXPECT_EQ(r.channels(), 0u);
    } else {
      EXPECT_EQ(r.seq(), 2u);
      EXPECT_EQ(r.function(), "All?Reduce?");
      EXPECT_EQ(r.algorithm(), "RING?");
      EXPECT_EQ(r.protocol(), "");
      EXPECT_EQ(r.bytes(), 20u);  // 10 × ncclFloat16
      EXPECT_EQ(r.channels(), 2u);
    }
  }
}

TEST_F(NcclPluginTest, PodFromTheDownwardApiReachesEveryRecord) {
  StartListener();
  struct Case {
    std::vector<std::string> env;
    std::string pod, pod_namespace;  // what the records must carry
    std::string log;                 // in NCCL's log
  };
  const std::vector<Case> cases = {
      {{"POD_NAME=trainer-7f9c-0", "POD_NAMESPACE=ml-team"}, "trainer-7f9c-0", "ml-team",
       "pod ml-team/trainer-7f9c-0, records to"},
      {{}, "", "", "pod -, records to"},
      {{"POD_NAME=Trainer_0", "POD_NAMESPACE=ml-team"}, "", "", "POD_NAME is not a Kubernetes"},
      {{"POD_NAME=" + std::string(254, 'a'), "POD_NAMESPACE=ml-team"}, "", "",
       "POD_NAME is not a Kubernetes"},
      {{"POD_NAME=trainer-0"}, "", "", "POD_NAME without POD_NAMESPACE"},
  };
  size_t total = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    std::vector<std::string> args = DriverArgs(k % 2 == 0 ? 5 : 6, "plan");
    args.push_back("--collectives=3");
    args.push_back("--nranks=2");
    for (const std::string& e : cases[k].env) args.push_back("--env=" + e);
    Process p(args, tmp_.path());
    ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Stderr();
    EXPECT_TRUE(absl::StrContains(p.Stderr(), cases[k].log)) << "case " << k << ":\n" << p.Stderr();
    total += 6;
    ASSERT_TRUE(received_.WaitForRecords(total, absl::Seconds(20))) << Diagnostics();
    std::vector<v1::CollectiveRecord> got = received_.records();
    for (size_t i = total - 6; i < total; ++i) {
      EXPECT_EQ(got[i].pod(), cases[k].pod) << "case " << k;
      EXPECT_EQ(got[i].pod_namespace(), cases[k].pod_namespace) << "case " << k;
    }
  }
  EXPECT_EQ(TotalRejections(), 0u) << Diagnostics();
}

// An agent from before format version 3: it takes frames up to `newest` (1 or 2) only, and cuts a
// connection off at the first header of another version (bad_version), as that release's decoder
// did. A version-1 agent never writes to the plugin; a version-2 agent acknowledges the first
// version-2 header of a connection with one byte, 2. Its records are decoded with the rules of
// their frame's version (a version-2 record must keep bytes 76–79 zero).
class OldAgent {
 public:
  explicit OldAgent(const std::string& path, uint16_t newest = 1) : newest_(newest) {
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    ok_ = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
          ::listen(listen_fd_, 16) == 0;
    thread_ = std::thread([this] { Loop(); });
  }
  ~OldAgent() {
    stop_ = true;
    thread_.join();
    for (auto& c : conns_) ::close(c.fd);
    ::close(listen_fd_);
  }
  bool ok() const { return ok_; }
  uint64_t records() const { return records_; }
  uint64_t dropped() const { return dropped_; }
  uint64_t refused() const { return refused_; }
  uint64_t garbage() const { return garbage_; }
  // Records received in version-2 frames, and how many of them named a pod.
  uint64_t v2_records() const { return v2_records_; }
  uint64_t v2_records_with_pod() const { return v2_with_pod_; }

 private:
  struct Conn {
    int fd;
    std::string buf;
    bool acked = false;
  };
  void Loop() {
    while (!stop_) {
      std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
      for (const Conn& c : conns_) fds.push_back({c.fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) conns_.push_back({fd, ""});
      }
      for (size_t i = 0; i + 1 < fds.size(); ++i) {
        if (fds[i + 1].revents == 0) continue;
        Conn& c = conns_[i];
        char buf[65536];
        const ssize_t n = ::recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) c.buf.append(buf, static_cast<size_t>(n));
        if (n == 0 || !Consume(c)) {
          ::close(c.fd);
          c.fd = -1;
        }
      }
      conns_.erase(std::remove_if(conns_.begin(), conns_.end(),
                                  [](const Conn& c) { return c.fd < 0; }),
                   conns_.end());
    }
  }
  // False: cut the connection off.
  bool Consume(Conn& c) {
    while (c.buf.size() >= 6) {
      const auto* p = reinterpret_cast<const uint8_t*>(c.buf.data());
      const int version = p[4] | p[5] << 8;
      if (version < 1 || version > newest_) {
        ++refused_;
        return false;
      }
      collectors::BatchHeaderFields h;
      size_t frame_size = 0;
      collectors::DecodeStatus s = collectors::DecodeBatchHeader(p, c.buf.size(), &h, &frame_size);
      if (s.error == collectors::DecodeError::kTruncated) return true;
      if (s.ok() && version == 2 && !c.acked) {
        c.acked = true;
        const uint8_t ack = 2;
        (void)!::send(c.fd, &ack, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
      }
      if (!s.ok() || c.buf.size() < frame_size) {
        if (!s.ok()) ++garbage_;
        return s.ok();
      }
      std::vector<collectors::CollectiveRecordFields> records(collectors::kMaxRecordsPerBatch);
      s = collectors::DecodeFrame(p, frame_size, &h, records.data(), records.size());
      if (!s.ok()) {
        ++garbage_;
        return false;
      }
      records_ += h.record_count;
      dropped_ += h.dropped;
      if (version == 2) {
        v2_records_ += h.record_count;
        if (!h.pod.empty()) v2_with_pod_ += h.record_count;
      }
      c.buf.erase(0, frame_size);
    }
    return true;
  }

  const int newest_;
  int listen_fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::vector<Conn> conns_;  // the thread's
  std::atomic<uint64_t> records_{0}, dropped_{0}, refused_{0}, garbage_{0}, v2_records_{0},
      v2_with_pod_{0};
  std::thread thread_;
};

TEST_F(NcclPluginTest, AnAgentThatSpeaksOnlyVersionOneGetsEveryRecordInVersionOne) {
  OldAgent old(SocketPath());
  ASSERT_TRUE(old.ok());
  constexpr int kCollectives = 500;
  const std::string go = tmp_.path() + "/go";
  std::vector<std::string> args = DriverArgs(6, "count");
  args.push_back(absl::StrCat("--collectives=", kCollectives));
  args.push_back("--env=RINGSIDE_JOB_ID=legacy");
  args.push_back("--env=POD_NAME=trainer-0");
  args.push_back("--env=POD_NAMESPACE=ml-team");
  args.push_back("--wait-file=" + go);
  Process p(args, tmp_.path());
  ASSERT_TRUE(p.WaitForStderr("phase 1 done", absl::Seconds(60))) << p.Stderr();
  // The plugin's version-4 and -3 hellos are cut off, then its version-2 hello (it has a pod); it
  // reconnects in version 1 and loses nothing.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (old.records() + old.dropped() < kCollectives && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(old.records(), static_cast<uint64_t>(kCollectives));
  std::ofstream(go) << "go";
  ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Stderr();
  EXPECT_EQ(old.records(), static_cast<uint64_t>(kCollectives + 1));
  EXPECT_EQ(old.dropped(), 0u);
  EXPECT_EQ(old.refused(), 3u) << "refused hellos of versions 4, 3 and 2, then version 1 for good";
  EXPECT_EQ(old.garbage(), 0u);
  EXPECT_EQ(old.v2_records(), 0u);
}

// A version-2 agent (pods, no devices) and a plugin that knows its CUDA device: the version-3
// hello is cut off, the plugin reconnects in version 2 and every record arrives, with the pod and
// with the device bytes zeroed as version 2 wants them (else the agent would reject the frames).
// Without a pod the plugin goes from 3 straight to 1 (version 2 would add nothing).
TEST_F(NcclPluginTest, AnAgentThatSpeaksVersionTwoGetsEveryRecordInVersionTwoWithoutTheDevice) {
  for (const bool pod : {true, false}) {
    SCOPED_TRACE(pod ? "with a pod" : "without a pod");
    TempDir dir;
    const std::string socket = dir.path() + "/old.sock";
    OldAgent old(socket, /*newest=*/2);
    ASSERT_TRUE(old.ok());
    constexpr int kCollectives = 300;
    const std::string go = dir.path() + "/go";
    std::vector<std::string> args = {NCCL_PLUGIN_DRIVER, absl::StrCat("--plugin=", NCCL_PLUGIN_PATH),
                                     "--version=6", "--mode=count",
                                     absl::StrCat("--socket=", socket),
                                     absl::StrCat("--collectives=", kCollectives),
                                     "--env=RINGSIDE_JOB_ID=v2-agent", "--wait-file=" + go,
                                     absl::StrCat("--preload-global=", FAKE_CUDART_PATH),
                                     "--env=FAKE_CUDA_DEVICE=3"};
    if (pod) {
      args.push_back("--env=POD_NAME=trainer-0");
      args.push_back("--env=POD_NAMESPACE=ml-team");
    }
    Process p(args, dir.path());
    ASSERT_TRUE(p.WaitForStderr("phase 1 done", absl::Seconds(60))) << p.Stderr();
    EXPECT_TRUE(absl::StrContains(p.Stderr(), "cuda device 3 (cudaGetDevice)")) << p.Stderr();
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (old.records() + old.dropped() < kCollectives && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_EQ(old.records(), static_cast<uint64_t>(kCollectives));
    std::ofstream(go) << "go";
    ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Stderr();
    EXPECT_EQ(old.records(), static_cast<uint64_t>(kCollectives + 1));
    EXPECT_EQ(old.dropped(), 0u);
    EXPECT_EQ(old.garbage(), 0u) << "a version-2 record with device bytes would be rejected";
    EXPECT_EQ(old.refused(), 2u) << "refused version-4 and version-3 hellos";
    EXPECT_EQ(old.v2_records(), pod ? static_cast<uint64_t>(kCollectives + 1) : 0u);
    EXPECT_EQ(old.v2_records_with_pod(), old.v2_records());
  }
}

// The plugin learns the communicator's GPU at init from the CUDA library the application already
// loaded (never loading one): a fake libcudart.so.12 / libcuda.so.1 reports FAKE_CUDA_DEVICE.
TEST_F(NcclPluginTest, InitFindsTheCudaDeviceInTheAlreadyLoadedCudaLibrary) {
  StartListener();
  struct Case {
    std::vector<std::string> extra;
    std::string log;
    int device;  // in every record (format version 3); -1: absent
  };
  const std::vector<Case> cases = {
      {{}, "cuda device -1 (none)", -1},  // no CUDA library loaded: the rank tells GPUs apart
      {{absl::StrCat("--preload-local=", FAKE_CUDART_PATH), "--env=FAKE_CUDA_DEVICE=3"},
       "cuda device 3 (cudaGetDevice)", 3},  // a libcudart private to a Python extension
      {{absl::StrCat("--preload-global=", FAKE_CUDART_PATH), "--env=FAKE_CUDA_DEVICE=5"},
       "cuda device 5 (cudaGetDevice)", 5},  // in the global scope
      {{absl::StrCat("--preload-local=", FAKE_CUDA_DRIVER_PATH), "--env=FAKE_CUDA_DEVICE=2"},
       "cuda device 2 (cuCtxGetDevice)", 2},  // only the driver (NCCL with a static runtime)
      {{absl::StrCat("--preload-local=", FAKE_CUDART_PATH), "--env=FAKE_CUDA_DEVICE=0"},
       "cuda device 0 (cudaGetDevice)", 0},  // ordinal 0 is a device, not "unknown"
      {{absl::StrCat("--preload-local=", FAKE_CUDART_PATH)}, "cuda device -1 (none)", -1},  // fails
  };
  size_t total = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    std::vector<std::string> args = DriverArgs(6, "plan");
    args.push_back("--collectives=1");
    args.push_back("--nranks=2");
    for (const std::string& e : cases[k].extra) args.push_back(e);
    Process p(args, tmp_.path());
    ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << "case " << k << ":\n" << p.Stderr();
    EXPECT_TRUE(absl::StrContains(p.Stderr(), cases[k].log)) << "case " << k << ":\n" << p.Stderr();
    total += plan::kComms;  // one collective per communicator
    ASSERT_TRUE(received_.WaitForRecords(total, absl::Seconds(20))) << Diagnostics();
    const std::vector<v1::CollectiveRecord> got = received_.records();
    for (size_t i = total - plan::kComms; i < total; ++i) {
      EXPECT_EQ(got[i].has_cuda_device(), cases[k].device >= 0) << "case " << k;
      if (cases[k].device >= 0) EXPECT_EQ(got[i].cuda_device(), cases[k].device) << "case " << k;
      // Format version 4: the device's PCI address, from the same CUDA library (the fake says
      // "0000:1<D>:00.0" in CUDA's uppercase; the record carries the sysfs form).
      EXPECT_EQ(
          got[i].gpu_pci_bus_id(),
          cases[k].device >= 0 ? absl::StrFormat("0000:%02x:00.0", 0x10 + cases[k].device) : "")
          << "case " << k;
    }
  }
  EXPECT_EQ(TotalRejections(), 0u) << Diagnostics();
}

TEST(NcclPluginLibraryTest, ExportsOnlyTheProfilerTables) {
  testing::RunResult nm = testing::Run({"nm", "-D", "--defined-only", NCCL_PLUGIN_PATH});
  ASSERT_EQ(nm.exit_code, 0) << nm.err;
  std::set<std::string> symbols;
  for (absl::string_view line : absl::StrSplit(nm.out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    ASSERT_EQ(f.size(), 3u) << line;
    symbols.insert(f[2]);
  }
  // Only the tables of released NCCL (profiler_v4.h in 2.27 .. profiler_v6.h in 2.29/2.30): NCCL
  // binds the newest table a plugin exports, so a v7 whose layout NCCL does not share would be
  // read with the wrong layout.
  EXPECT_EQ(symbols, (std::set<std::string>{"ncclProfiler_v4", "ncclProfiler_v5", "ncclProfiler_v6"}))
      << nm.out;
}

// v6 NCCL reports collectives it runs on the copy engines only as CeColl events (never as Coll or
// KernelCh), and only while a CE bit is in the mask: under v6 the plugin asks for them and records
// them; v5 descriptors have no CeColl member, so a v5 table ignores the type.
TEST_F(NcclPluginTest, CopyEngineCollectivesAreRecordedFromV6On) {
  StartListener();
  {
    Process p(DriverArgs(6, "ce"), tmp_.path());
    ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Stderr();
    const DriverOutput out = ParseDriver(p.Stdout());
    EXPECT_EQ(out.mask & 0x1000, 0x1000) << "CeColl (1<<12) is in the v6 mask";
    EXPECT_TRUE(absl::StrContains(p.Stdout(), "ce_handle 1")) << p.Stdout();
  }
  ASSERT_TRUE(received_.WaitForRecords(1, absl::Seconds(20))) << Diagnostics();
  {
    Process p(DriverArgs(5, "ce"), tmp_.path());
    ASSERT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Stderr();
    EXPECT_EQ(ParseDriver(p.Stdout()).mask & 0x1000, 0) << "no CE bit for a v5 table";
    EXPECT_TRUE(absl::StrContains(p.Stdout(), "ce_handle 0")) << p.Stdout();
  }
  absl::SleepFor(absl::Milliseconds(200));  // a v5 record would arrive now
  EXPECT_EQ(TotalRejections(), 0u);
  const std::vector<v1::CollectiveRecord> got = received_.records();
  ASSERT_EQ(got.size(), 1u) << Diagnostics();
  const v1::CollectiveRecord& r = got[0];
  EXPECT_EQ(r.function(), "AllGather");
  EXPECT_EQ(r.seq(), 7u);
  EXPECT_EQ(r.bytes(), 4000u);  // 1000 × ncclFloat32
  EXPECT_EQ(r.algorithm(), "CE");
  EXPECT_EQ(r.protocol(), "MC");
  EXPECT_EQ(r.channels(), 0u);
  EXPECT_EQ(r.rank(), 2u);
  EXPECT_EQ(r.nranks(), 4u);
  EXPECT_EQ(r.kernel_start_unix_nanos(), 0) << "no kernel runs for a copy-engine collective";
  EXPECT_GT(r.enqueue_unix_nanos(), 0);
}

TEST(NcclPluginLibraryTest, LinksOnlyTheCAndCxxRuntimes) {
  testing::RunResult ldd = testing::Run({"ldd", NCCL_PLUGIN_PATH});
  ASSERT_EQ(ldd.exit_code, 0) << ldd.err;
  const std::set<std::string> allowed = {"libc.so.6", "libstdc++.so.6", "libm.so.6",
                                         "libgcc_s.so.1"};
  bool has_libc = false;
  for (absl::string_view line : absl::StrSplit(ldd.out, '\n', absl::SkipEmpty())) {
    // "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)", "\tlinux-vdso.so.1 (0x...)"
    const absl::string_view stripped = absl::StripAsciiWhitespace(line);
    const std::string lib(stripped.substr(0, stripped.find(' ')));
    if (absl::StartsWith(lib, "linux-vdso") || absl::StrContains(lib, "/ld-linux")) continue;
    EXPECT_TRUE(allowed.count(lib)) << "links " << lib << ":\n" << ldd.out;
    has_libc |= lib == "libc.so.6";
  }
  EXPECT_TRUE(has_libc) << ldd.out;
}

}  // namespace
}  // namespace ringside::daemon
