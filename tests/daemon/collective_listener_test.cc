// The agent's collective-record socket: permissions, peer credentials, the rate limit, the caps,
// and rogue senders (garbage, truncated, oversized and invalid records) cut off and counted while
// genuine senders on the same socket are not disturbed.
#include "daemon/agent/collective_listener.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/record_proto.h"
#include "daemon/agent/collective_metrics.h"
#include "prometheus/text_serializer.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/unix_socket.h"

namespace ringside::daemon {
namespace {

namespace rc = ::ringside::collectors;

rc::CollectiveRecordFields Record(uint64_t seq, const char* job = "job-1") {
  rc::CollectiveRecordFields r;
  r.rank = 1;
  r.nranks = 4;
  r.pid = 4242;  // what the sender claims; the agent uses the kernel's word
  r.comm_id = 99;
  r.seq = seq;
  r.bytes = 1024;
  r.enqueue_unix_nanos = 1'700'000'000'000'000'000;
  r.channels = 2;
  r.job_id.Set(job);
  r.host.Set("container-7f3a");
  r.function.Set("AllReduce");
  return r;
}

std::string Frame(const std::vector<rc::CollectiveRecordFields>& records, uint64_t dropped = 0,
                  const char* job = "job-1") {
  rc::BatchHeaderFields h;
  h.dropped = dropped;
  h.job_id.Set(job);
  return *rc::EncodeFrame(h, records);
}

std::string Records(uint64_t first, int n, const char* job = "job-1") {
  std::vector<rc::CollectiveRecordFields> v;
  for (int i = 0; i < n; ++i) v.push_back(Record(first + i, job));
  return Frame(v);
}

// True when the agent closed the connection within `timeout` (EOF or reset on read).
bool ClosedByAgent(int fd, absl::Duration timeout) {
  struct pollfd p = {fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) return false;
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

class CollectiveListenerTest : public ::testing::Test {
 protected:
  std::string Path() const { return tmp_.path() + "/collectives.sock"; }

  void Start(CollectiveListenerOptions o = {}, std::function<absl::Time()> clock = absl::Now) {
    o.socket_path = Path();
    auto l = CollectiveListener::Start(
        o,
        [this](v1::CollectiveBatch b) {
          absl::MutexLock lock(&mu_);
          for (const auto& [job, n] : b.dropped_by_job()) dropped_[job] += n;
          for (auto& r : *b.mutable_records()) records_.push_back(r);
        },
        std::move(clock),
        [this](const std::string& line) {
          absl::MutexLock lock(&mu_);
          log_.push_back(line);
        });
    ASSERT_TRUE(l.ok()) << l.status();
    listener_ = std::move(*l);
  }

  bool WaitFor(std::function<bool()> done, absl::Duration timeout = absl::Seconds(10)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (done()) return true;
      absl::SleepFor(absl::Milliseconds(2));
    }
    return done();
  }
  size_t RecordCount() {
    absl::MutexLock lock(&mu_);
    return records_.size();
  }
  std::vector<v1::CollectiveRecord> records() {
    absl::MutexLock lock(&mu_);
    return records_;
  }
  std::vector<std::string> log() {
    absl::MutexLock lock(&mu_);
    return log_;
  }
  uint64_t Rejected(const std::string& reason) { return listener_->Stats().rejections.at(reason); }

  testing::TempDir tmp_;
  absl::Mutex mu_;
  std::vector<v1::CollectiveRecord> records_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> dropped_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
  // A test's injected clock: declared before listener_, so that it outlives the listener's
  // threads (the listener is destroyed after the test body, and may read the clock until then).
  absl::Mutex clock_mu_;
  absl::Time now_ ABSL_GUARDED_BY(clock_mu_) = absl::FromUnixSeconds(1'700'000'000);
  std::unique_ptr<CollectiveListener> listener_;
};

TEST_F(CollectiveListenerTest, SocketIsMode0660AndOwnedByTheConfiguredGroup) {
  struct group* daemon_group = getgrnam("daemon");
  ASSERT_NE(daemon_group, nullptr);
  CollectiveListenerOptions o;
  o.socket_group = "daemon";
  Start(o);
  struct stat st;
  ASSERT_EQ(::stat(Path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(st.st_gid, daemon_group->gr_gid);
  // The socket is removed with the listener.
  listener_.reset();
  EXPECT_NE(::stat(Path().c_str(), &st), 0);
}

TEST_F(CollectiveListenerTest, BadOptionsAndOccupiedPathsAreClearErrors) {
  CollectiveListenerOptions o;
  o.socket_path = Path();
  o.socket_group = "no-such-group-ringside";
  EXPECT_EQ(CollectiveListener::Start(o, nullptr).status().code(), absl::StatusCode::kNotFound);
  o.socket_group = "";
  o.socket_path = std::string(200, 'x');
  EXPECT_EQ(CollectiveListener::Start(o, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A regular file is never replaced.
  o.socket_path = tmp_.path() + "/file";
  std::ofstream(o.socket_path) << "keep me";
  EXPECT_EQ(CollectiveListener::Start(o, nullptr).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A stale socket (nobody listening) is replaced; a live one is not taken over.
  {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, Path().data(), Path().size());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);
  }
  Start();
  o.socket_path = Path();
  auto second = CollectiveListener::Start(o, nullptr);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists) << second.status();
  const int fd = testing::ConnectUnix(Path());
  ASSERT_GE(fd, 0) << "the first listener still serves";
  ::close(fd);
}

TEST_F(CollectiveListenerTest, PeerCredentialsGiveThePidAndTheNodeNameTheHost) {
  CollectiveListenerOptions o;
  o.node = "gpu-node-17";
  Start(o);
  const int fd = testing::ConnectUnix(Path());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(testing::SendAll(fd, Records(0, 3)));
  ASSERT_TRUE(WaitFor([&] { return RecordCount() == 3; }));
  for (const auto& r : records()) {
    EXPECT_EQ(r.pid(), static_cast<uint32_t>(::getpid())) << "SO_PEERCRED, not the claimed 4242";
    EXPECT_EQ(r.host(), "gpu-node-17");
    EXPECT_EQ(r.job_id(), "job-1");
    EXPECT_EQ(r.nranks(), 4u);
  }
  ::close(fd);
}

std::string PodFrame(const std::vector<rc::CollectiveRecordFields>& records, const char* pod,
                     const char* pod_namespace, uint64_t dropped = 0) {
  rc::BatchHeaderFields h;
  h.version = rc::kFormatVersion2;
  h.dropped = dropped;
  h.job_id.Set("job-1");
  h.pod.Set(pod);
  h.pod_namespace.Set(pod_namespace);
  return *rc::EncodeFrame(h, records);
}

// One byte the agent sent back within `timeout`, or -1.
int ReadByte(int fd, absl::Duration timeout) {
  struct pollfd p = {fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) return -1;
  uint8_t c = 0;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) == 1 ? c : -1;
}

TEST_F(CollectiveListenerTest, VersionTwoFramesGiveEveryRecordThePodAndAreAcknowledgedOnce) {
  CollectiveListenerOptions o;
  o.node = "gpu-node-17";
  Start(o);
  const int v2 = testing::ConnectUnix(Path());
  const int v1 = testing::ConnectUnix(Path());
  ASSERT_GE(v2, 0);
  ASSERT_GE(v1, 0);
  // The header arrives in two pieces (the pod straddles them): the agent waits for the rest.
  const std::string first = PodFrame({Record(0), Record(1)}, "trainer-3", "ml-team", 5);
  ASSERT_TRUE(testing::SendAll(v2, first.substr(0, 200)));
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(testing::SendAll(v2, first.substr(200)));
  ASSERT_TRUE(testing::SendAll(v2, PodFrame({Record(2)}, "trainer-3", "ml-team")));
  ASSERT_TRUE(testing::SendAll(v1, Records(10, 2)));  // an older plugin on the same socket
  ASSERT_TRUE(WaitFor([&] { return RecordCount() == 5; }));
  EXPECT_EQ(ReadByte(v2, absl::Seconds(5)), rc::kVersion2Ack);
  EXPECT_EQ(ReadByte(v2, absl::Milliseconds(100)), -1) << "one acknowledgement per connection";
  EXPECT_EQ(ReadByte(v1, absl::Milliseconds(100)), -1) << "a version-1 plugin is never written to";
  for (const auto& r : records()) {
    EXPECT_EQ(r.host(), "gpu-node-17");
    if (r.seq() < 10) {
      EXPECT_EQ(r.pod(), "trainer-3") << r.ShortDebugString();
      EXPECT_EQ(r.pod_namespace(), "ml-team");
    } else {
      EXPECT_EQ(r.pod(), "") << "version 1: no pod";
      EXPECT_EQ(r.pod_namespace(), "");
    }
  }
  {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(dropped_["job-1"], 5u);
  }
  EXPECT_EQ(listener_->Stats().jobs.at("job-1").records, 5u);
  ::close(v2);
  ::close(v1);
}

// Format version 3: each record's CUDA device, next to version-2 and version-1 plugins on the same
// socket; a version-2 frame whose record has a device in its reserved bytes is cut off.
TEST_F(CollectiveListenerTest, VersionThreeRecordsCarryTheirCudaDeviceAndAreAcknowledgedAsThree) {
  Start();
  const int v3 = testing::ConnectUnix(Path());
  const int v2 = testing::ConnectUnix(Path());
  const int v1 = testing::ConnectUnix(Path());
  ASSERT_GE(v3, 0);
  ASSERT_GE(v2, 0);
  ASSERT_GE(v1, 0);
  std::vector<rc::CollectiveRecordFields> gpus = {Record(0), Record(1), Record(2)};
  gpus[0].cuda_device = 0;  // one process, two GPUs: same pid, two devices
  gpus[1].cuda_device = 1;
  gpus[0].rank = 0;
  gpus[2].cuda_device = -1;  // no CUDA library answered in that process
  rc::BatchHeaderFields h;
  h.version = rc::kFormatVersion3;
  h.job_id.Set("job-1");
  ASSERT_TRUE(testing::SendAll(v3, *rc::EncodeFrame(h, gpus)));
  rc::CollectiveRecordFields old = Record(10);
  old.cuda_device = 5;  // a version-2 or -1 frame cannot carry it: encoded without
  ASSERT_TRUE(testing::SendAll(v2, PodFrame({old}, "trainer-3", "ml-team")));
  ASSERT_TRUE(testing::SendAll(v1, Frame({Record(20)})));
  ASSERT_TRUE(WaitFor([&] { return RecordCount() == 5; }));
  EXPECT_EQ(ReadByte(v3, absl::Seconds(5)), rc::kVersion3Ack);
  EXPECT_EQ(ReadByte(v2, absl::Seconds(5)), rc::kVersion2Ack);
  EXPECT_EQ(ReadByte(v1, absl::Milliseconds(100)), -1);
  std::map<uint64_t, v1::CollectiveRecord> by_seq;
  for (const auto& r : records()) by_seq[r.seq()] = r;
  ASSERT_TRUE(by_seq[0].has_cuda_device());
  EXPECT_EQ(by_seq[0].cuda_device(), 0);
  ASSERT_TRUE(by_seq[1].has_cuda_device());
  EXPECT_EQ(by_seq[1].cuda_device(), 1);
  EXPECT_EQ(by_seq[0].pid(), by_seq[1].pid());
  EXPECT_FALSE(by_seq[2].has_cuda_device());
  EXPECT_FALSE(by_seq[10].has_cuda_device());
  EXPECT_EQ(by_seq[10].pod(), "trainer-3");
  EXPECT_FALSE(by_seq[20].has_cuda_device());

  // A device smuggled into a version-2 record's reserved bytes: bad_value, cut off.
  std::string bad = PodFrame({Record(30)}, "trainer-3", "ml-team");
  bad[rc::kBatchHeaderSizeV2 + 76] = 2;
  const int rogue = testing::ConnectUnix(Path());
  ASSERT_GE(rogue, 0);
  ASSERT_TRUE(testing::SendAll(rogue, bad));
  EXPECT_EQ(ReadByte(rogue, absl::Seconds(5)), rc::kVersion2Ack) << "the header itself is valid";
  EXPECT_TRUE(ClosedByAgent(rogue, absl::Seconds(5)));
  ASSERT_TRUE(WaitFor([&] { return Rejected("bad_value") == 1; }));
  EXPECT_EQ(RecordCount(), 5u);
  for (int fd : {v3, v2, v1, rogue}) ::close(fd);
}

// Format version 4: each record gets the sender's cgroup and its own GPU's PCI address (sysfs
// form), the frame is acknowledged with 4, and the cgroup is among the recent ones the host
// collector reads, until it is older than the asked age.
TEST_F(CollectiveListenerTest, VersionFourRecordsCarryCgroupAndGpuPciAddress) {
  Start({}, [this] {
    absl::MutexLock lock(&clock_mu_);
    return now_;
  });
  const int v4 = testing::ConnectUnix(Path());
  ASSERT_GE(v4, 0);
  std::vector<rc::CollectiveRecordFields> recs = {Record(0), Record(1)};
  recs[0].cuda_device = 0;
  recs[1].cuda_device = 1;
  recs[1].rank = 2;
  rc::BatchHeaderFields h;
  h.version = rc::kFormatVersion4;
  h.job_id.Set("job-1");
  h.cgroup.Set("/kubepods.slice/pod-17.slice/cri-containerd-1.scope");
  h.gpus[0] = rc::GpuSlot{true, 0, 0x19, 0, 0};
  h.gpus[1] = rc::GpuSlot{true, 0, 0x3b, 0, 0};
  ASSERT_TRUE(testing::SendAll(v4, *rc::EncodeFrame(h, recs)));
  ASSERT_TRUE(WaitFor([&] { return RecordCount() == 2; }));
  EXPECT_EQ(ReadByte(v4, absl::Seconds(5)), rc::kVersion4Ack);
  std::map<uint64_t, v1::CollectiveRecord> by_seq;
  for (const auto& r : records()) by_seq[r.seq()] = r;
  EXPECT_EQ(by_seq[0].gpu_pci_bus_id(), "0000:19:00.0");
  EXPECT_EQ(by_seq[1].gpu_pci_bus_id(), "0000:3b:00.0");
  EXPECT_EQ(by_seq[0].cgroup(), "/kubepods.slice/pod-17.slice/cri-containerd-1.scope");
  EXPECT_EQ(listener_->RecentCgroups(absl::Minutes(2)),
            std::vector<std::string>{"/kubepods.slice/pod-17.slice/cri-containerd-1.scope"});
  {
    absl::MutexLock lock(&clock_mu_);
    now_ += absl::Minutes(3);
  }
  EXPECT_TRUE(listener_->RecentCgroups(absl::Minutes(2)).empty());
  EXPECT_EQ(Rejected("bad_version"), 0u);
}

TEST_F(CollectiveListenerTest, AGarbagePodIdentityIsCutOffAndCountedAsBadString) {
  Start();
  const int genuine = testing::ConnectUnix(Path());
  ASSERT_GE(genuine, 0);
  const std::vector<std::pair<std::string, size_t>> rogue = {
      {std::string(254, 'a'), 96},   // pod longer than Kubernetes allows
      {"Trainer_0!", 96},            // not a pod name
      {"trainer-0\x01", 96},        // a control character
      {std::string(64, 'n'), 352},   // namespace not terminated
  };
  for (const auto& [garbage, offset] : rogue) {
    std::string f = PodFrame({Record(0)}, "trainer-0", "ml-team");
    std::memset(f.data() + offset, 0, offset == 96 ? 256 : 64);
    std::memcpy(f.data() + offset, garbage.data(), garbage.size());
    const int fd = testing::ConnectUnix(Path());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(testing::SendAll(fd, f));
    EXPECT_TRUE(ClosedByAgent(fd, absl::Seconds(5))) << garbage;
    ::close(fd);
  }
  ASSERT_TRUE(WaitFor([&] { return Rejected("bad_string") == rogue.size(); }))
      << Rejected("bad_string");
  ASSERT_TRUE(testing::SendAll(genuine, PodFrame({Record(7)}, "trainer-0", "ml-team")));
  ASSERT_TRUE(WaitFor([&] { return RecordCount() == 1; }));
  EXPECT_EQ(records()[0].pod(), "trainer-0");
  EXPECT_EQ(records()[0].seq(), 7u);
  bool logged = false;
  for (const std::string& l : log()) logged |= absl::StrContains(l, "bad_string: batch pod");
  EXPECT_TRUE(logged);
  ::close(genuine);
}

TEST_F(CollectiveListenerTest, RogueSendersAreCutOffAndCountedWhileGenuineSendersAreNot) {
  CollectiveListenerOptions o;
  o.frame_timeout = absl::Milliseconds(300);
  o.log_interval = absl::Hours(1);
  Start(o);

  // A genuine sender keeps one connection and sends a frame every 2 ms throughout.
  std::atomic<bool> stop{false};
  std::atomic<int> genuine_sent{0};
  std::atomic<bool> genuine_ok{true};
  std::thread genuine([&] {
    const int fd = testing::ConnectUnix(Path());
    if (fd < 0) {
      genuine_ok = false;
      return;
    }
    for (int i = 0; !stop && i < 5000; ++i) {
      if (!testing::SendAll(fd, Records(genuine_sent, 4, "genuine"))) {
        genuine_ok = false;
        break;
      }
      genuine_sent += 4;
      absl::SleepFor(absl::Milliseconds(2));
    }
    ::close(fd);
  });

  std::string bad_record = Records(0, 2, "rogue");
  bad_record[rc::kBatchHeaderSize + rc::kRecordSize + 12] = 9;  // record 1: rank 9 of 4
  std::string bad_string = Records(0, 1, "rogue");
  bad_string[rc::kBatchHeaderSize + 272 + 2] = '\x01';  // a control character in the function
  std::string bad_version = Records(0, 1, "rogue");
  bad_version[4] = 9;
  std::string bad_length = Records(0, 1, "rogue");
  bad_length[16] = 1;  // record_length 0x0101 = 257
  std::string oversized = Records(0, 1, "rogue");
  oversized[13] = 0x10;  // record_count 4097
  const std::string one_good = Records(1000, 1, "rogue");
  struct Rogue {
    std::string name;
    std::string bytes;
    bool close_after;  // close our end right after sending (EOF mid-frame)
    std::string reason;
  };
  const std::vector<Rogue> rogues = {
      {"http request", "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", false, "bad_magic"},
      {"random bytes", std::string(4096, '\xa5'), false, "bad_magic"},
      {"valid frame then garbage", one_good + "garbage!", false, "bad_magic"},
      {"half a header", Records(0, 1, "rogue").substr(0, 50), true, "truncated"},
      {"header promising 3, then EOF", Records(0, 3, "rogue").substr(0, 96 + 352), true,
       "truncated"},
      {"header promising 3, then silence", Records(0, 3, "rogue").substr(0, 96 + 100), false,
       "truncated"},
      {"oversized count", oversized, false, "oversized"},
      {"wrong record length", bad_length, false, "bad_length"},
      {"wrong version", bad_version, false, "bad_version"},
      {"rank beyond nranks", bad_record, false, "bad_value"},
      {"control character", bad_string, false, "bad_string"},
  };
  std::map<std::string, uint64_t> want;
  for (const Rogue& r : rogues) {
    const int fd = testing::ConnectUnix(Path());
    ASSERT_GE(fd, 0) << r.name;
    ASSERT_TRUE(testing::SendAll(fd, r.bytes)) << r.name;
    if (r.close_after) {
      ::shutdown(fd, SHUT_WR);
    }
    EXPECT_TRUE(ClosedByAgent(fd, absl::Seconds(5))) << r.name << ": the agent kept the connection";
    ::close(fd);
    ++want[r.reason];
    ASSERT_TRUE(WaitFor([&] { return Rejected(r.reason) == want[r.reason]; })) << r.name;
  }
  stop = true;
  genuine.join();
  ASSERT_TRUE(genuine_ok) << "the genuine sender's connection failed";

  // Every rejection counted under its reason; nothing else.
  const CollectiveListenerStats st = listener_->Stats();
  for (const auto& [reason, n] : st.rejections) {
    EXPECT_EQ(n, want.count(reason) ? want[reason] : 0u) << reason;
  }
  // The genuine sender lost nothing; of the rogues, only the valid frame before the garbage got in.
  ASSERT_TRUE(WaitFor([&] { return RecordCount() == static_cast<size_t>(genuine_sent) + 1; }))
      << RecordCount() << " of " << genuine_sent + 1;
  std::vector<uint64_t> genuine_seqs;
  int rogue_records = 0;
  for (const auto& r : records()) {
    if (r.job_id() == "genuine") {
      genuine_seqs.push_back(r.seq());
    } else {
      ++rogue_records;
      EXPECT_EQ(r.seq(), 1000u);
    }
  }
  EXPECT_EQ(rogue_records, 1);
  for (size_t i = 0; i < genuine_seqs.size(); ++i) ASSERT_EQ(genuine_seqs[i], i);
  EXPECT_EQ(st.jobs.at("genuine").records, static_cast<uint64_t>(genuine_sent));
  // One log line per reason (the interval is an hour), naming the sender.
  int bad_magic_lines = 0;
  for (const std::string& line : log()) {
    EXPECT_TRUE(absl::StrContains(line, absl::StrCat("pid ", ::getpid()))) << line;
    bad_magic_lines += absl::StrContains(line, "bad_magic") ? 1 : 0;
  }
  EXPECT_EQ(bad_magic_lines, 1);
  EXPECT_EQ(st.connections_accepted, rogues.size() + 1);
  EXPECT_TRUE(WaitFor([&] { return listener_->Stats().connections_open == 0; }));
}

TEST_F(CollectiveListenerTest, RateLimitIsPerConnectionAndCounted) {
  CollectiveListenerOptions o;
  o.records_per_second = 5;
  o.burst_records = 10;
  Start(o, [this] {
    absl::MutexLock lock(&clock_mu_);
    return now_;
  });
  const int a = testing::ConnectUnix(Path());
  const int b = testing::ConnectUnix(Path());
  ASSERT_TRUE(testing::SendAll(a, Records(0, 25)));
  ASSERT_TRUE(WaitFor([&] { return RecordCount() == 10; }));
  ASSERT_TRUE(testing::SendAll(b, Records(100, 25)));  // its own bucket
  ASSERT_TRUE(WaitFor([&] { return RecordCount() == 20; }));
  {
    absl::MutexLock lock(&clock_mu_);
    now_ += absl::Seconds(1);  // 5 more records for each connection
  }
  ASSERT_TRUE(testing::SendAll(a, Records(200, 25)));
  ASSERT_TRUE(
      WaitFor([&] { return listener_->Stats().jobs["job-1"].rate_limited == 15 + 15 + 20; }));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(RecordCount(), 25u);
  const CollectiveListenerStats st = listener_->Stats();
  EXPECT_EQ(st.jobs.at("job-1").records, 25u);
  EXPECT_EQ(st.jobs.at("job-1").rate_limited, 50u);
  {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(dropped_["job-1"], 50u) << "rate-limited records travel upstream as drops";
  }
  // A rate limit drops records, it does not cut the connection.
  EXPECT_EQ(st.connections_open, 2u);
  ::close(a);
  ::close(b);
}

TEST_F(CollectiveListenerTest, ConnectionsAndJobLabelsAreCapped) {
  CollectiveListenerOptions o;
  o.max_connections = 2;
  o.max_jobs = 3;
  Start(o);
  const int a = testing::ConnectUnix(Path());
  const int b = testing::ConnectUnix(Path());
  ASSERT_TRUE(WaitFor([&] { return listener_->Stats().connections_open == 2; }));
  const int c = testing::ConnectUnix(Path());  // accepted by the kernel, closed by the agent
  EXPECT_TRUE(ClosedByAgent(c, absl::Seconds(5)));
  EXPECT_EQ(Rejected("too_many_connections"), 1u);
  for (const char* job : {"j1", "j2", "j3", "j4", "j5"}) ASSERT_TRUE(testing::SendAll(a, Records(0, 2, job)));
  ASSERT_TRUE(WaitFor([&] { return RecordCount() == 10; }));
  const CollectiveListenerStats st = listener_->Stats();
  EXPECT_EQ(st.jobs.size(), 4u);
  EXPECT_EQ(st.jobs.at("j1").records, 2u);
  EXPECT_EQ(st.jobs.at("j3").records, 2u);
  EXPECT_EQ(st.jobs.at("_other").records, 4u);
  // The records themselves keep their job.
  EXPECT_EQ(records().back().job_id(), "j5");
  for (int fd : {a, b, c}) ::close(fd);
}

TEST_F(CollectiveListenerTest, ExportsRecordsDropsConnectionsAndRejections) {
  Start();
  const int fd = testing::ConnectUnix(Path());
  std::vector<rc::CollectiveRecordFields> v = {Record(1, "train-7"), Record(2, "train-7")};
  ASSERT_TRUE(testing::SendAll(fd, Frame(v, 1234, "train-7")));
  ASSERT_TRUE(WaitFor([&] { return RecordCount() == 2; }));
  const int bad = testing::ConnectUnix(Path());
  ASSERT_TRUE(testing::SendAll(bad, "nonsense"));
  ASSERT_TRUE(WaitFor([&] { return Rejected("bad_magic") == 1; }));
  ::close(bad);
  ASSERT_TRUE(WaitFor([&] { return listener_->Stats().connections_open == 1; }));

  CollectiveListenerCollectable collectable(listener_.get(), "gpu-node-3");
  const std::string text = prometheus::TextSerializer().Serialize(collectable.Collect());
  testing::PromText p = testing::ParsePromText(text);
  auto one = [&](const std::string& name, std::map<std::string, std::string> labels) {
    auto s = p.Find(name, labels);
    EXPECT_EQ(s.size(), 1u) << name << "\n" << text;
    return s.empty() ? -1.0 : s[0].value;
  };
  EXPECT_EQ(
      one("ringside_agent_collective_records_total", {{"node", "gpu-node-3"}, {"job", "train-7"}}),
      2);
  EXPECT_EQ(one("ringside_agent_collective_drops_total", {{"job", "train-7"}}), 1234);
  EXPECT_EQ(one("ringside_agent_collective_rate_limited_records_total", {{"job", "train-7"}}), 0);
  EXPECT_EQ(one("ringside_agent_collective_connections_total", {{"node", "gpu-node-3"}}), 2);
  EXPECT_EQ(one("ringside_agent_collective_connections", {{"node", "gpu-node-3"}}), 1);
  EXPECT_EQ(one("ringside_agent_collective_rejections_total", {{"reason", "bad_magic"}}), 1);
  // Every reason is exported from the start, so rate() and alerts work before the first one.
  for (const std::string& reason : CollectiveRejectionReasons()) {
    EXPECT_EQ(p.Find("ringside_agent_collective_rejections_total", {{"reason", reason}}).size(), 1u)
        << reason;
  }
  EXPECT_EQ(p.types["ringside_agent_collective_records_total"], "counter");
  EXPECT_EQ(p.types["ringside_agent_collective_connections"], "gauge");
  ::close(fd);
}

}  // namespace
}  // namespace ringside::daemon
