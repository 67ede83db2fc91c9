// Issue #18 item 3, hostile clients, against a real ringside-aggregator and ringside-agent on
// loopback: thousands of idle TCP/HTTP2 connections, gRPC streams that never say Hello, garbage
// and oversized gRPC messages, raw HTTP/2 garbage, a WatchIncidents client that never reads, and,
// on the agent's plugin socket, garbage and floods. Each is cut off and counted while a real
// agent, fed by a well-behaved plugin connection, loses nothing: the N collective records written
// to the agent's socket are N at the aggregator, and a second agent started in the middle of it
// all connects and is served.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/record_proto.h"
#include "grpcpp/create_channel.h"
#include "ringside/v1/query.grpc.pb.h"
#include "sim/sysfs_tree.h"
#include "tests/aggregator/ingest/ingest_test_util.h"
#include "tests/testing/eventually.h"
#include "tests/testing/process.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/unix_socket.h"

namespace ringside {
namespace {

namespace rc = ::ringside::collectors;
using testing::BinaryPath;
using testing::Eventually;

int PortFromLog(testing::Process& p, const std::string& pattern) {
  std::smatch m;
  const std::string err = p.Stderr();
  if (!std::regex_search(err, m, std::regex(pattern))) return 0;
  return std::stoi(m[1].str());
}

double Metric(int http_port, const std::string& name,
              const std::map<std::string, std::string>& match = {}) {
  const testing::PromText t = testing::ParsePromText(testing::HttpGet(http_port, "/metrics"));
  double v = 0;
  for (const testing::PromSample& s : t.Find(name, match)) v += s.value;
  return v;
}

int TcpConnect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// True when the peer has closed `fd` (EOF or reset), reading and discarding what it sent
// (HTTP/2 SETTINGS, GOAWAY).
bool PeerClosed(int fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  }
}

// The HTTP/2 client connection preface and an empty SETTINGS frame: a connection gRPC accepts
// and then waits on for streams.
const std::string& Http2Preface() {
  static const std::string p = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") +
                               std::string("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);
  return p;
}

rc::CollectiveRecordFields Record(uint64_t seq, const char* job) {
  rc::CollectiveRecordFields r;
  r.rank = 1;
  r.nranks = 4;
  r.pid = 4242;
  r.comm_id = 99;
  r.seq = seq;
  r.bytes = 1 << 20;
  r.enqueue_unix_nanos = absl::ToUnixNanos(absl::Now());
  r.channels = 2;
  r.job_id.Set(job);
  r.host.Set("container-good");
  r.function.Set("AllReduce");
  return r;
}

std::string Frame(uint64_t first_seq, int n, const char* job = "job-good") {
  std::vector<rc::CollectiveRecordFields> v;
  for (int i = 0; i < n; ++i) v.push_back(Record(first_seq + i, job));
  rc::BatchHeaderFields h;
  h.job_id.Set(job);
  return *rc::EncodeFrame(h, v);
}

class HostileClientsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::HcaSpec hca;
    ASSERT_TRUE(tree_writer_.AddHca(hca).ok());
    agg_ = std::make_unique<testing::Process>(
        std::vector<std::string>{
            BinaryPath("daemon/ringside-aggregator"), "--listen=127.0.0.1:0",
            "--http-listen=127.0.0.1:0", "--state-dir=" + dir_.path() + "/state",
            "--hello-timeout=1s", "--max-message-bytes=262144", "--handshake-timeout=2s",
            "--max-connection-idle=3s", "--watch-queue-limit=3"},
        dir_.path());
    ASSERT_TRUE(agg_->WaitForStderr("HTTP (/metrics", absl::Seconds(30))) << agg_->Stderr();
    grpc_ = PortFromLog(*agg_, "ingest \\(gRPC\\) listening on \\S+ \\(port ([0-9]+)\\)");
    http_ = PortFromLog(*agg_, "HTTP \\S+ \\S+ \\S+ listening on \\S+ \\(port ([0-9]+)\\)");
    ASSERT_GT(grpc_, 0) << agg_->Stderr();
    ASSERT_GT(http_, 0) << agg_->Stderr();
    agent_ = StartAgent("good", socket_path_);
    ASSERT_TRUE(agent_->WaitForStderr("connected to", absl::Seconds(20))) << agent_->Stderr();
    ASSERT_TRUE(agent_->WaitForStderr("collective records on", absl::Seconds(20)))
        << agent_->Stderr();
    ASSERT_TRUE(agent_->WaitForStderr("serving /metrics on", absl::Seconds(20)))
        << agent_->Stderr();
    agent_http_ = PortFromLog(*agent_, "serving /metrics on \\S+ \\(port ([0-9]+)\\)");
    ASSERT_GT(agent_http_, 0) << agent_->Stderr();
  }

  void TearDown() override {
    for (auto* p : {&agent2_, &agent_}) {
      if (*p) {
        (*p)->Signal(SIGTERM);
        EXPECT_EQ((*p)->Wait(absl::Seconds(20)), 0) << (*p)->Stderr();
      }
    }
    if (agg_) {
      agg_->Signal(SIGTERM);
      EXPECT_EQ(agg_->Wait(absl::Seconds(20)), 0) << agg_->Stderr();
    }
  }

  std::unique_ptr<testing::Process> StartAgent(const std::string& node, const std::string& sock) {
    return std::make_unique<testing::Process>(
        std::vector<std::string>{
            BinaryPath("daemon/ringside-agent"), "--sysfs-root=" + tree_.path(),
            "--node-name=" + node, absl::StrCat("--aggregator=127.0.0.1:", grpc_),
            "--interval=100ms", "--listen=127.0.0.1:0", "--nvml-library=",
            "--ethtool-source=off", "--link-events=false", "--collectives-socket=" + sock,
            "--collectives-rate=2000", "--collectives-burst=2000", "--upload-backoff-max=500ms"},
        dir_.path());
  }

  // The well-behaved plugin: `frames` frames of `per_frame` records, seqs from `first`, on one
  // connection, paced like a training job. Returns the records written.
  int GoodPlugin(uint64_t first, int frames, int per_frame) {
    const int fd = testing::ConnectUnix(socket_path_);
    if (fd < 0) return 0;
    int sent = 0;
    for (int i = 0; i < frames; ++i) {
      if (!testing::SendAll(fd, Frame(first + static_cast<uint64_t>(sent), per_frame))) break;
      sent += per_frame;
      absl::SleepFor(absl::Milliseconds(20));
    }
    ::close(fd);
    return sent;
  }

  testing::TempDir dir_;
  testing::TempDir tree_;
  sim::SysfsTreeWriter tree_writer_{tree_.path()};
  std::string socket_path_ = dir_.path() + "/collectives.sock";
  std::unique_ptr<testing::Process> agg_;
  std::unique_ptr<testing::Process> agent_;
  std::unique_ptr<testing::Process> agent2_;
  int grpc_ = 0;
  int http_ = 0;
  int agent_http_ = 0;
};

// Thousands of idle connections, streams without a Hello, garbage and oversized messages and
// raw HTTP/2 garbage on the aggregator's gRPC port, all at once, while the real agent streams and
// its plugin writes N records.
TEST_F(HostileClientsTest, AggregatorCutsOffHostileGrpcClientsAndLosesNoRecord) {
  rlimit lim = {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
  const int idle_count = static_cast<int>(std::min<rlim_t>(2000, lim.rlim_cur / 2 - 100));
  ASSERT_GE(idle_count, 400) << "ulimit -n too low for this test: " << lim.rlim_cur;

  // The well-behaved plugin writes all through the storm.
  const int kFrames = 100, kPerFrame = 40;
  int good_sent = 0;
  std::thread plugin([&] { good_sent = GoodPlugin(1, kFrames, kPerFrame); });

  // 1. Idle connections: half say nothing, half open HTTP/2 and then nothing.
  std::vector<int> idle;
  for (int i = 0; i < idle_count; ++i) {
    const int fd = TcpConnect(grpc_);
    ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
    if (i % 2 == 1) ASSERT_TRUE(testing::SendAll(fd, Http2Preface()));
    idle.push_back(fd);
  }
  // Accepted (gRPC accepts from the kernel's queue as it goes).
  double fds_with_idle = 0;
  EXPECT_TRUE(Eventually(
      [&] { return (fds_with_idle = Metric(http_, "ringside_aggregator_open_fds")) >= idle_count; },
      absl::Seconds(10)))
      << fds_with_idle << " fds with " << idle_count << " idle connections";

  // 2. Streams that never send a Hello: refused after --hello-timeout.
  std::vector<std::unique_ptr<testing::RawAgent>> mute;
  for (int i = 0; i < 20; ++i) mute.push_back(std::make_unique<testing::RawAgent>(grpc_));
  // 3. Garbage messages, and messages over --max-message-bytes.
  int garbage_refused = 0, oversized_refused = 0;
  for (int i = 0; i < 10; ++i) {
    std::string junk(200 + i * 37, '\0');
    for (size_t k = 0; k < junk.size(); ++k) junk[k] = static_cast<char>((k * 131 + i) & 0xff);
    const grpc::Status g = testing::SendRawFrames(grpc_, {junk});
    garbage_refused += g.error_code() == grpc::StatusCode::INVALID_ARGUMENT;
    const grpc::Status o = testing::SendRawFrames(grpc_, {std::string(300000 + i, 'x')});
    oversized_refused += o.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  EXPECT_EQ(garbage_refused, 10);
  EXPECT_EQ(oversized_refused, 10);
  // Far over the limit (over twice it): gRPC refuses it before the service sees it.
  EXPECT_EQ(testing::SendRawFrames(grpc_, {std::string(700000, 'y')}).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  // 4. Raw garbage where HTTP/2 frames should be (after a valid preface, and instead of one).
  std::vector<int> raw;
  for (int i = 0; i < 20; ++i) {
    const int fd = TcpConnect(grpc_);
    ASSERT_GE(fd, 0);
    std::string junk = i % 2 ? Http2Preface() : std::string();
    junk += std::string("\xff\xff\xff\x09\xff\x7f\xff\xff\xff", 9) + std::string(64, '\xa5');
    testing::SendAll(fd, junk);
    raw.push_back(fd);
  }

  // Meanwhile a second agent starts and is served.
  agent2_ = StartAgent("late", dir_.path() + "/late.sock");
  EXPECT_TRUE(agent2_->WaitForStderr("connected to", absl::Seconds(20))) << agent2_->Stderr();

  // Every hostile connection is cut off by the aggregator: the raw garbage at once, the idle ones
  // after --handshake-timeout or --max-connection-idle.
  EXPECT_TRUE(Eventually(
      [&] {
        for (int fd : raw) {
          if (!PeerClosed(fd)) return false;
        }
        return true;
      },
      absl::Seconds(10)));
  int still_open = 0;
  Eventually(
      [&] {
        still_open = 0;
        for (int fd : idle) still_open += !PeerClosed(fd);
        return still_open == 0;
      },
      absl::Seconds(20), absl::Milliseconds(200));
  EXPECT_EQ(still_open, 0) << "of " << idle_count << " idle connections";
  for (int fd : idle) ::close(fd);
  for (int fd : raw) ::close(fd);
  for (auto& m : mute) {
    EXPECT_EQ(m->AwaitEnd().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  mute.clear();
  EXPECT_TRUE(Eventually(
      [&] { return Metric(http_, "ringside_aggregator_open_fds") < fds_with_idle - idle_count / 2; },
      absl::Seconds(10)))
      << Metric(http_, "ringside_aggregator_open_fds") << " fds; " << fds_with_idle
      << " with the idle connections";

  plugin.join();
  ASSERT_EQ(good_sent, kFrames * kPerFrame);
  // Counted: refusals by reason, on the aggregator.
  EXPECT_GE(Metric(http_, "ringside_aggregator_sessions_refused_total", {{"reason", "hello_timeout"}}),
            20);
  EXPECT_GE(Metric(http_, "ringside_aggregator_unparsable_messages_total"), 10);
  EXPECT_EQ(Metric(http_, "ringside_aggregator_limit_rejections_total",
                   {{"reason", "max_message_bytes"}}),
            10)
      << testing::HttpGet(http_, "/metrics");

  // No loss and no duplicate: every record the plugin wrote reached the aggregator once, through
  // one session of the agent that was never cut off.
  EXPECT_TRUE(Eventually(
      [&] {
        return Metric(http_, "ringside_aggregator_collective_records_received_total") >=
               good_sent;
      },
      absl::Seconds(20)));
  EXPECT_EQ(Metric(http_, "ringside_aggregator_collective_records_received_total"), good_sent);
  EXPECT_EQ(Metric(agent_http_, "ringside_agent_collective_records_total"), good_sent);
  EXPECT_EQ(Metric(http_, "ringside_aggregator_sequence_gap_messages_total"), 0);
  EXPECT_EQ(Metric(agent_http_, "ringside_agent_upload_sessions_total"), 1) << agent_->Stderr();
  EXPECT_EQ(Metric(http_, "ringside_aggregator_sessions_active"), 2);
}

}  // namespace
}  // namespace ringside

namespace ringside {
namespace {

// On the agent's plugin socket, next to a well-behaved plugin: connections that send garbage, a
// flood of connections past the agent's limit, and a plugin that sends as fast as it can. The
// garbage and the surplus connections are cut off and counted by reason, the flood is
// rate-limited and counted per job; the well-behaved plugin's N records all reach the aggregator,
// and everything the agent accepted arrives there exactly once.
TEST_F(HostileClientsTest, PluginSocketCutsOffGarbageAndFloodsAndLosesNoRecord) {
  const int kFrames = 100, kPerFrame = 30;
  int good_sent = 0;
  std::thread plugin([&] { good_sent = GoodPlugin(1, kFrames, kPerFrame); });

  // Garbage: bytes that are no frame, a frame with a wrong version, a frame cut short and closed.
  std::vector<int> garbage;
  for (int i = 0; i < 30; ++i) {
    const int fd = testing::ConnectUnix(socket_path_);
    ASSERT_GE(fd, 0);
    std::string bytes;
    if (i % 3 == 0) {
      bytes = std::string(700, static_cast<char>(0x41 + i % 26));
    } else if (i % 3 == 1) {
      bytes = Frame(1000000 + i, 2, "job-bad");
      bytes[4] = '\x7f';  // the header's version field
    } else {
      bytes = Frame(2000000 + i, 3, "job-bad");
      bytes[bytes.size() - 1] ^= 0x55;  // inside the last record: a padding or string byte
    }
    testing::SendAll(fd, bytes);
    garbage.push_back(fd);
  }
  // A flooding plugin (connected before the crowd below): full frames as fast as the socket
  // takes them, for 2 s.
  uint64_t flood_sent = 0;
  const int flood_fd = testing::ConnectUnix(socket_path_);
  ASSERT_GE(flood_fd, 0);
  std::thread flood([&, fd = flood_fd] {
    const std::string frame = Frame(5000000, 256, "job-flood");
    const absl::Time end = absl::Now() + absl::Seconds(2);
    while (absl::Now() < end && testing::SendAll(fd, frame)) flood_sent += 256;
    ::close(fd);
  });
  // A flood of connections: 300 open at once (the agent takes 256).
  std::vector<int> crowd;
  for (int i = 0; i < 300; ++i) {
    const int fd = testing::ConnectUnix(socket_path_);
    if (fd >= 0) crowd.push_back(fd);
  }

  flood.join();
  plugin.join();
  ASSERT_EQ(good_sent, kFrames * kPerFrame);
  EXPECT_GT(flood_sent, 10000u);

  // Cut off: every garbage connection is closed by the agent; each is counted by reason.
  EXPECT_TRUE(Eventually(
      [&] {
        for (int fd : garbage) {
          if (!PeerClosed(fd)) return false;
        }
        return true;
      },
      absl::Seconds(10)));
  int refused = 0;
  for (int fd : crowd) refused += PeerClosed(fd);
  for (int fd : garbage) ::close(fd);
  for (int fd : crowd) ::close(fd);
  // The agent has read all the well-behaved plugin wrote (it reads asynchronously).
  Eventually(
      [&] {
        return Metric(agent_http_, "ringside_agent_collective_records_total",
                      {{"job", "job-good"}}) >= good_sent;
      },
      absl::Seconds(10));
  const testing::PromText a = testing::ParsePromText(testing::HttpGet(agent_http_, "/metrics"));
  auto agent_metric = [&](const std::string& name, const std::map<std::string, std::string>& m) {
    double v = 0;
    for (const testing::PromSample& s : a.Find(name, m)) v += s.value;
    return v;
  };
  const double rejected = agent_metric("ringside_agent_collective_rejections_total", {});
  EXPECT_GE(agent_metric("ringside_agent_collective_rejections_total", {{"reason", "bad_magic"}}),
            10);
  EXPECT_GE(agent_metric("ringside_agent_collective_rejections_total", {{"reason", "bad_version"}}),
            10);
  EXPECT_GE(agent_metric("ringside_agent_collective_rejections_total",
                         {{"reason", "too_many_connections"}}),
            refused);
  EXPECT_GE(refused, 300 + 2 - 256 - 30) << "connections past the agent's 256";
  EXPECT_GE(rejected, 30 + refused) << testing::HttpGet(agent_http_, "/metrics");
  const double flood_accepted =
      agent_metric("ringside_agent_collective_records_total", {{"job", "job-flood"}});
  EXPECT_GT(agent_metric("ringside_agent_collective_rate_limited_records_total",
                         {{"job", "job-flood"}}),
            0);
  EXPECT_LT(flood_accepted, static_cast<double>(flood_sent));

  // No loss: the good plugin's records all accepted; everything accepted reaches the aggregator
  // once (the garbage frames' jobs were never accepted).
  EXPECT_EQ(agent_metric("ringside_agent_collective_records_total", {{"job", "job-good"}}),
            good_sent)
      << agent_->Stderr();
  EXPECT_EQ(agent_metric("ringside_agent_collective_rate_limited_records_total",
                         {{"job", "job-good"}}),
            0);
  EXPECT_EQ(agent_metric("ringside_agent_collective_records_total", {{"job", "job-bad"}}), 0);
  const double accepted = good_sent + flood_accepted;
  EXPECT_TRUE(Eventually(
      [&] {
        return Metric(http_, "ringside_aggregator_collective_records_received_total") >= accepted;
      },
      absl::Seconds(20)));
  EXPECT_EQ(Metric(http_, "ringside_aggregator_collective_records_received_total"), accepted);
  EXPECT_EQ(Metric(http_, "ringside_aggregator_sequence_gap_messages_total"), 0);
  EXPECT_EQ(Metric(agent_http_, "ringside_agent_upload_sessions_total"), 1) << agent_->Stderr();
}

}  // namespace
}  // namespace ringside

namespace ringside {
namespace {

// One HTTP/2 frame.
std::string H2Frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload) {
  std::string f;
  const uint32_t n = static_cast<uint32_t>(payload.size());
  f += static_cast<char>(n >> 16);
  f += static_cast<char>(n >> 8);
  f += static_cast<char>(n);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  for (int shift = 24; shift >= 0; shift -= 8) f += static_cast<char>((stream >> shift) & 0x7f);
  return f + payload;
}

// HPACK "literal header field without indexing, new name" (names and values under 127 bytes).
std::string Hpack(const std::string& name, const std::string& value) {
  return std::string(1, '\0') + static_cast<char>(name.size()) + name +
         static_cast<char>(value.size()) + value;
}

// A WatchIncidents call from a client that never reads: raw HTTP/2 whose SETTINGS give every
// stream a receive window of 0, so the aggregator cannot send it a byte of any change.
int NeverReadingWatcher(int port) {
  const int fd = TcpConnect(port);
  if (fd < 0) return -1;
  std::string out = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  out += H2Frame(4, 0, 0, std::string("\x00\x04\x00\x00\x00\x00", 6));  // INITIAL_WINDOW_SIZE 0
  out += H2Frame(4, 1, 0, "");                                            // ack the server's
  const std::string headers = Hpack(":method", "POST") + Hpack(":scheme", "http") +
                              Hpack(":path", "/ringside.v1.Query/WatchIncidents") +
                              Hpack(":authority", "127.0.0.1") +
                              Hpack("content-type", "application/grpc") + Hpack("te", "trailers");
  out += H2Frame(1, 4, 1, headers);                              // HEADERS, END_HEADERS
  out += H2Frame(0, 1, 1, std::string("\x00\x00\x00\x00\x00", 5));  // an empty request, END_STREAM
  if (!testing::SendAll(fd, out)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A WatchIncidents client that never reads, next to one that does, while a port flaps: the
// aggregator queues at most --watch-queue-limit changes for the first and then cuts it off
// (counted); the second sees every change, and ingest and detection go on.
TEST_F(HostileClientsTest, WatcherThatNeverReadsIsCutOffAndOthersSeeEveryChange) {
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_),
                                     grpc::InsecureChannelCredentials());
  std::unique_ptr<v1::Query::Stub> stub = v1::Query::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  std::unique_ptr<grpc::ClientReader<v1::IncidentChange>> reader =
      stub->WatchIncidents(&ctx, v1::WatchIncidentsRequest());
  std::atomic<int> seen{0};
  std::thread good([&] {
    v1::IncidentChange c;
    while (reader->Read(&c)) seen += c.initial() ? 0 : 1;
  });
  std::vector<int> slow;
  for (int i = 0; i < 5; ++i) {
    const int fd = NeverReadingWatcher(grpc_);
    ASSERT_GE(fd, 0);
    slow.push_back(fd);
  }
  ASSERT_TRUE(Eventually([&] { return Metric(http_, "ringside_aggregator_query_watchers") == 6; },
                         absl::Seconds(10)))
      << Metric(http_, "ringside_aggregator_query_watchers");

  // The port flaps: link_down opened and resolved twice, then link_flapping.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(tree_writer_.SetPortState("mlx5_0", 1, 1, 2).ok());
    absl::SleepFor(absl::Milliseconds(500));
    ASSERT_TRUE(tree_writer_.SetPortState("mlx5_0", 1, 4, 5).ok());
    absl::SleepFor(absl::Milliseconds(500));
  }
  ASSERT_TRUE(agg_->WaitForStderr("opened: link_flapping", absl::Seconds(20))) << agg_->Stderr();

  // Cut off and counted: each never-reading watcher, once past its queue.
  EXPECT_TRUE(Eventually(
      [&] { return Metric(http_, "ringside_aggregator_query_watchers_cut_off_total") == 5; },
      absl::Seconds(10)))
      << Metric(http_, "ringside_aggregator_query_watchers_cut_off_total");
  // They do not keep their slots: past the 5 s grace for the write in flight, the next watcher
  // to start (or the next change) cancels them.
  absl::SleepFor(absl::Seconds(5));
  grpc::ClientContext ctx2;
  ctx2.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  std::unique_ptr<grpc::ClientReader<v1::IncidentChange>> reader2 =
      stub->WatchIncidents(&ctx2, v1::WatchIncidentsRequest());
  EXPECT_TRUE(Eventually([&] { return Metric(http_, "ringside_aggregator_query_watchers") == 2; },
                         absl::Seconds(10)))
      << Metric(http_, "ringside_aggregator_query_watchers");
  int closed = 0;
  for (int fd : slow) closed += PeerClosed(fd);
  EXPECT_EQ(closed, 0) << "the connections stay; only their watch streams are reset";
  ctx2.TryCancel();
  (void)reader2->Finish();
  // The reading watcher saw every change the analysis made.
  double changes = 0;
  EXPECT_TRUE(Eventually(
      [&] {
        changes = Metric(http_, "ringside_incident_changes_total");
        return changes >= 4 && seen.load() == changes;
      },
      absl::Seconds(10)))
      << seen.load() << " changes watched of " << changes;
  ctx.TryCancel();
  good.join();
  (void)reader->Finish();
  for (int fd : slow) ::close(fd);
  EXPECT_EQ(Metric(agent_http_, "ringside_agent_upload_sessions_total"), 1) << agent_->Stderr();
}

}  // namespace
}  // namespace ringside
