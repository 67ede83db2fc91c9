// The daemons under a stand-in for systemd: the real ringside-agent and ringside-aggregator
// binaries with $NOTIFY_SOCKET on a datagram socket bound here and $WATCHDOG_USEC, and the agent
// with a listening socket passed as systemd passes it ($LISTEN_PID/$LISTEN_FDS/$LISTEN_FDNAMES, fd
// 3).
//
// The sampler hang is real: the agent loads the fake libnvidia-ml through its own dlopen path, and
// that library reads its config file on every NVML call from the sampling thread. Replacing the
// file with a FIFO nobody writes blocks the call in open(2), as a wedged driver call would.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/record_proto.h"
#include "sim/sysfs_tree.h"
#include "tests/aggregator/ingest/ingest_test_util.h"
#include "tests/testing/process.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using testing::BinaryPath;

sockaddr_un UnixAddress(const std::string& path) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), std::min(path.size(), sizeof(addr.sun_path) - 1));
  return addr;
}

// What a service manager receives on $NOTIFY_SOCKET.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr = UnixAddress(path);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ADD_FAILURE() << "bind " << path << ": " << std::strerror(errno);
    }
  }
  ~NotifySocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  const std::string& path() const { return path_; }

  // The next datagram within `timeout`.
  std::optional<std::string> Next(absl::Duration timeout) {
    pollfd p = {fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) != 1) {
      return std::nullopt;
    }
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n < 0) return std::nullopt;
    return std::string(buf, static_cast<size_t>(n));
  }
  // Waits up to `timeout` for a datagram containing `needle`; the ones before it go to `skipped`.
  std::optional<std::string> WaitFor(const std::string& needle, absl::Duration timeout,
                                     std::vector<std::string>* skipped = nullptr) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      std::optional<std::string> m = Next(deadline - absl::Now());
      if (!m.has_value()) return std::nullopt;
      if (absl::StrContains(*m, needle)) return m;
      if (skipped != nullptr) skipped->push_back(*m);
    }
    return std::nullopt;
  }
  // The arrival times of WATCHDOG=1 during `span` (other datagrams are ignored).
  std::vector<absl::Time> Pets(absl::Duration span) {
    std::vector<absl::Time> pets;
    const absl::Time end = absl::Now() + span;
    while (absl::Now() < end) {
      std::optional<std::string> m = Next(end - absl::Now());
      if (m.has_value() && *m == "WATCHDOG=1") pets.push_back(absl::Now());
    }
    return pets;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// The fake NVML's config: a file, or (Hang) a FIFO nobody writes, so that the agent's next NVML
// call blocks on the sampling thread until Release().
class NvmlConfig {
 public:
  explicit NvmlConfig(const std::string& dir)
      : path_(dir + "/fake-nvml.conf"), fifo_(dir + "/fake-nvml.fifo") {
    if (::mkfifo(fifo_.c_str(), 0600) != 0) ADD_FAILURE() << "mkfifo: " << std::strerror(errno);
    WriteFile();
  }
  const std::string& path() const { return path_; }
  static constexpr const char* kText =
      "gpu\nname NVIDIA H100 80GB HBM3\nuuid GPU-aaaa\narch 9\nlinks 4\n";

  void WriteFile() {
    const std::string tmp = path_ + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kText, f);
    std::fclose(f);
    ASSERT_EQ(::rename(tmp.c_str(), path_.c_str()), 0);
  }
  void Hang() {
    const std::string link = path_ + ".fifo-link";
    ::unlink(link.c_str());
    ASSERT_EQ(::link(fifo_.c_str(), link.c_str()), 0) << std::strerror(errno);
    ASSERT_EQ(::rename(link.c_str(), path_.c_str()), 0);
  }
  // The file again, and the blocked reader (if any) gets the text.
  void Release() {
    WriteFile();
    const int fd = ::open(fifo_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;  // nobody blocked on it
    (void)!::write(fd, kText, std::strlen(kText));
    ::close(fd);
  }

 private:
  std::string path_;
  std::string fifo_;
};

int LoggedPort(testing::Process& p, const std::string& prefix, absl::Duration timeout) {
  if (!p.WaitForStderr(prefix, timeout)) return 0;
  const std::string err = p.Stderr();
  const size_t at = err.find(prefix);
  const std::string line = err.substr(at, err.find('\n', at) - at);
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\\(port ([0-9]+)\\)"))) return 0;
  return std::stoi(m[1].str());
}

double CyclesTotal(int port) {
  testing::PromText p = testing::ParsePromText(testing::HttpGet(port, "/metrics"));
  auto v = p.Find("ringside_agent_cycles_total", {{"node", "n01"}});
  return v.empty() ? -1 : v[0].value;
}

class SystemdProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::HcaSpec ib;
    ASSERT_TRUE(w_.AddHca(ib).ok());
  }

  // The agent with `env` (NAME=value) in its environment, serving on a loopback port.
  std::unique_ptr<testing::Process> StartAgent(std::vector<std::string> env,
                                               std::vector<std::string> flags) {
    std::vector<std::string> argv = {"/usr/bin/env", "-u", "WATCHDOG_PID", "-u", "LISTEN_FDS"};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.push_back(BinaryPath("daemon/ringside-agent"));
    for (const std::string& f :
         {"--sysfs-root=" + tree_.path(), std::string("--listen=127.0.0.1:0"),
          std::string("--node-name=n01"), "--collectives-socket=" + dir_.path() + "/own.sock",
          std::string("--ethtool-source=off"), std::string("--link-events=false")}) {
      argv.push_back(f);
    }
    argv.insert(argv.end(), flags.begin(), flags.end());
    return std::make_unique<testing::Process>(argv, out_.path());
  }

  testing::TempDir tree_;
  testing::TempDir dir_;
  testing::TempDir out_;
  sim::SysfsTreeWriter w_{tree_.path()};
};

// READY=1 comes only once a cycle is done and /metrics answers; WATCHDOG=1 arrives about every
// quarter of WATCHDOG_USEC while the sampler runs; SIGTERM gives STOPPING=1 and exit 0.
TEST_F(SystemdProcessTest, AgentReadyAfterFirstCycleThenWatchdogThenStopping) {
  NotifySocket notify(dir_.path() + "/notify");
  NvmlConfig nvml(dir_.path());
  nvml.Hang();  // the agent's first NVML call blocks
  auto agent = StartAgent({"NOTIFY_SOCKET=" + notify.path(), "WATCHDOG_USEC=400000",
                           "RINGSIDE_FAKE_NVML_CONFIG=" + nvml.path()},
                          {"--interval=20ms", "--nvml-library=" + std::string(FAKE_NVML_COMPLETE)});
  EXPECT_EQ(notify.WaitFor("READY=1", absl::Milliseconds(1500)), std::nullopt)
      << "READY before the first cycle could complete";
  EXPECT_FALSE(absl::StrContains(agent->Stderr(), "serving /metrics")) << agent->Stderr();
  nvml.Release();

  std::vector<std::string> before;
  std::optional<std::string> ready = notify.WaitFor("READY=1", absl::Seconds(20), &before);
  ASSERT_TRUE(ready.has_value()) << agent->Stderr();
  // The first pet comes from the first completed cycle: it precedes READY.
  ASSERT_FALSE(before.empty()) << "READY=1 before any cycle had completed";
  for (const std::string& m : before) EXPECT_EQ(m, "WATCHDOG=1") << "sent before READY: " << m;
  EXPECT_TRUE(absl::StrContains(*ready, "STATUS=sampling every 20ms")) << *ready;
  // At READY the first cycle is published and the HTTP port answers.
  const int port = LoggedPort(*agent, "serving /metrics", absl::Seconds(1));
  ASSERT_GT(port, 0) << agent->Stderr();
  EXPECT_GE(CyclesTotal(port), 1);
  int status = 0;
  EXPECT_EQ(testing::HttpGet(port, "/healthz", &status), "ok\n");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(testing::HttpGet(port, "/readyz", &status), "ok\n");
  EXPECT_EQ(status, 200);

  // 400ms watchdog: a pet at most every 100ms (so at most 17 in 1.6s), and never a gap as long
  // as the period, which is what systemd enforces (slack for a loaded test machine).
  std::vector<absl::Time> pets = notify.Pets(absl::Milliseconds(1600));
  EXPECT_GE(pets.size(), 6u);
  EXPECT_LE(pets.size(), 17u);
  for (size_t i = 1; i < pets.size(); ++i) {
    EXPECT_LT(pets[i] - pets[i - 1], absl::Milliseconds(400)) << "gap before pet " << i;
  }

  const absl::Time term = absl::Now();
  agent->Signal(SIGTERM);
  std::optional<std::string> stopping = notify.WaitFor("STOPPING=1", absl::Seconds(5));
  ASSERT_TRUE(stopping.has_value());
  EXPECT_TRUE(absl::StrContains(*stopping, "STATUS=stopping")) << *stopping;
  EXPECT_EQ(agent->Wait(absl::Seconds(5)), 0) << agent->Stderr();
  EXPECT_LT(absl::Now() - term, absl::Seconds(3));
}

// The important one: a sampler stuck in a collector stops the pets (so systemd's watchdog fires)
// while the HTTP threads still serve; released, it pets again.
TEST_F(SystemdProcessTest, AgentWatchdogPetsStopWhileTheSamplerHangs) {
  NotifySocket notify(dir_.path() + "/notify");
  NvmlConfig nvml(dir_.path());
  auto agent = StartAgent({"NOTIFY_SOCKET=" + notify.path(), "WATCHDOG_USEC=400000",
                           "RINGSIDE_FAKE_NVML_CONFIG=" + nvml.path()},
                          {"--interval=20ms", "--nvml-library=" + std::string(FAKE_NVML_COMPLETE)});
  ASSERT_TRUE(notify.WaitFor("READY=1", absl::Seconds(20)).has_value()) << agent->Stderr();
  const int port = LoggedPort(*agent, "serving /metrics", absl::Seconds(1));
  ASSERT_GT(port, 0);
  ASSERT_GE(notify.Pets(absl::Milliseconds(500)).size(), 3u);

  nvml.Hang();
  // The cycle under way may still finish and pet once; then nothing for 4 watchdog periods.
  notify.Pets(absl::Milliseconds(200));
  const double cycles = CyclesTotal(port);
  std::vector<absl::Time> pets = notify.Pets(absl::Milliseconds(1600));
  EXPECT_TRUE(pets.empty()) << pets.size() << " pets while the sampler hung";
  EXPECT_EQ(CyclesTotal(port), cycles) << "the sampler did not hang";
  int status = 0;
  testing::HttpGet(port, "/metrics", &status);
  EXPECT_EQ(status, 200) << "HTTP should still serve";

  nvml.Release();
  EXPECT_TRUE(notify.WaitFor("WATCHDOG=1", absl::Seconds(5)).has_value())
      << "no pet after the sampler resumed";
  EXPECT_GT(CyclesTotal(port), cycles);
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(5)), 0) << agent->Stderr();
}

// Socket activation: a listening socket made here (standing in for ringside-collectives.socket)
// is passed as fd 3 named "collectives"; the agent serves plugins on it, makes no socket of its
// own, and leaves the file in place on exit.
TEST_F(SystemdProcessTest, AgentAdoptsTheCollectivesSocketSystemdPasses) {
  const std::string activated = dir_.path() + "/collectives.sock";
  const int lfd = ::socket(AF_UNIX, SOCK_STREAM, 0);  // inherited: no CLOEXEC
  ASSERT_GE(lfd, 0);
  sockaddr_un addr = UnixAddress(activated);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(lfd, 16), 0);
  ASSERT_EQ(::chmod(activated.c_str(), 0660), 0);

  // LISTEN_PID must be the agent's pid: sh exports its own and execs the agent in its place.
  const std::string move_fd = lfd == 3 ? "" : absl::StrCat(" 3<&", lfd, " ", lfd, "<&-");
  std::vector<std::string> argv = {
      "/bin/sh",
      "-c",
      "export LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=collectives; exec \"$@\"" + move_fd,
      "sh",
      BinaryPath("daemon/ringside-agent"),
      "--sysfs-root=" + tree_.path(),
      "--listen=127.0.0.1:0",
      "--node-name=n01",
      "--interval=20ms",
      "--nvml-library=",
      "--ethtool-source=off",
      "--link-events=false",
      "--collectives-socket=" + dir_.path() + "/own.sock"};
  testing::Process agent(argv, out_.path());
  ::close(lfd);  // only the agent holds it now
  const int port = LoggedPort(agent, "serving /metrics", absl::Seconds(20));
  ASSERT_GT(port, 0) << agent.Stderr();
  EXPECT_TRUE(absl::StrContains(
      agent.Stderr(), "collective records on " + activated + " (socket from systemd, fd 3)"))
      << agent.Stderr();
  EXPECT_TRUE(absl::StrContains(agent.Stderr(),
                                "--collectives-socket=" + dir_.path() + "/own.sock ignored"))
      << agent.Stderr();
  struct stat st;
  EXPECT_NE(::stat((dir_.path() + "/own.sock").c_str(), &st), 0) << "agent made its own socket";

  // A plugin's batch of three records through the passed socket.
  const int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::vector<collectors::CollectiveRecordFields> records(3);
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].rank = 0;
    records[i].nranks = 2;
    records[i].comm_id = 7;
    records[i].seq = i;
    records[i].bytes = 4096;
    records[i].enqueue_unix_nanos = 1'700'000'000'000'000'000;
    records[i].channels = 1;
    records[i].pid = 4242;
    records[i].host.Set("container-1");
    records[i].job_id.Set("job-act");
    records[i].function.Set("AllReduce");
  }
  collectors::BatchHeaderFields header;
  header.job_id.Set("job-act");
  absl::StatusOr<std::string> frame = collectors::EncodeFrame(header, records);
  ASSERT_TRUE(frame.ok());
  ASSERT_EQ(::send(c, frame->data(), frame->size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(frame->size()));
  double received = 0;
  for (int i = 0; i < 100 && received < 3; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    testing::PromText p = testing::ParsePromText(testing::HttpGet(port, "/metrics"));
    auto v = p.Find("ringside_agent_collective_records_total", {{"job", "job-act"}});
    if (!v.empty()) received = v[0].value;
  }
  EXPECT_EQ(received, 3) << [&] {
    std::string out;
    for (absl::string_view line : absl::StrSplit(testing::HttpGet(port, "/metrics"), '\n')) {
      if (absl::StrContains(line, "collective")) absl::StrAppend(&out, line, "\n");
    }
    return out + agent.Stderr();
  }();
  ::close(c);

  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(absl::Seconds(5)), 0) << agent.Stderr();
  EXPECT_EQ(::stat(activated.c_str(), &st), 0) << "the agent removed systemd's socket";
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
}

// /healthz and /readyz with the aggregator down: ready while the upload buffer holds what the
// aggregator has not taken, not ready once it is full and dropping; alive throughout.
TEST_F(SystemdProcessTest, AgentReadyzWhileBufferingNotWhileDropping) {
  int closed_port = 0;
  {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
    closed_port = ntohs(a.sin_port);
    ::close(s);  // nothing listens there now
  }
  auto agent = StartAgent({}, {"--interval=1ms", "--nvml-library=", "--upload-buffer=1048576",
                               absl::StrCat("--aggregator=127.0.0.1:", closed_port)});
  const int port = LoggedPort(*agent, "serving /metrics", absl::Seconds(20));
  ASSERT_GT(port, 0) << agent->Stderr();
  int status = 0;
  std::string body = testing::HttpGet(port, "/readyz", &status);
  EXPECT_EQ(status, 200) << body;
  EXPECT_TRUE(absl::StartsWith(body, "ok: aggregator not connected, buffering (")) << body;

  bool dropping = false;
  for (int i = 0; i < 300 && !dropping; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    body = testing::HttpGet(port, "/readyz", &status);
    dropping = status == 503;
  }
  ASSERT_TRUE(dropping) << "the 1 MiB buffer never filled";
  EXPECT_TRUE(absl::StartsWith(
      body, "aggregator not connected and the upload buffer is full: dropping messages ("))
      << body;
  EXPECT_EQ(testing::HttpGet(port, "/healthz", &status), "ok\n");
  EXPECT_EQ(status, 200);
  testing::HttpGet(port, "/nothing", &status);
  EXPECT_EQ(status, 404);
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(absl::Seconds(10)), 0) << agent->Stderr();
}

// The aggregator: READY=1 once it serves (then /readyz is 200), WATCHDOG=1 from housekeeping,
// /readyz 503 once the journal cannot be written (full with --journal-when-full=stop), STOPPING=1
// and exit 0 on SIGTERM.
TEST_F(SystemdProcessTest, AggregatorReadyWatchdogReadyzAndStopping) {
  NotifySocket notify(dir_.path() + "/notify");
  testing::TempDir state;
  testing::Process agg(
      {"/usr/bin/env", "-u", "WATCHDOG_PID", "NOTIFY_SOCKET=" + notify.path(),
       "WATCHDOG_USEC=1000000", BinaryPath("daemon/ringside-aggregator"), "--listen=127.0.0.1:0",
       "--http-listen=127.0.0.1:0", "--state-dir=" + state.path(), "--journal-when-full=stop",
       "--journal-max-bytes=4096", "--journal-retry-interval=50ms"},
      out_.path());
  std::optional<std::string> ready = notify.WaitFor("READY=1", absl::Seconds(20));
  ASSERT_TRUE(ready.has_value()) << agg.Stderr();
  EXPECT_TRUE(absl::StrContains(*ready, "STATUS=ingest on 127.0.0.1:0")) << *ready;
  const int http = LoggedPort(agg, "HTTP (/metrics", absl::Seconds(1));
  const int grpc = LoggedPort(agg, "ingest (gRPC) listening", absl::Seconds(1));
  ASSERT_GT(http, 0);
  ASSERT_GT(grpc, 0);
  int status = 0;
  EXPECT_EQ(testing::HttpGet(http, "/readyz", &status), "ok\n");
  EXPECT_EQ(status, 200);

  // Housekeeping runs every 500ms; the 1s watchdog is pet at most every 250ms, so once per pass.
  std::vector<absl::Time> pets = notify.Pets(absl::Milliseconds(2200));
  EXPECT_GE(pets.size(), 3u);
  EXPECT_LE(pets.size(), 6u);

  // Fill the 4 KiB journal.
  std::string body;
  {
    testing::RawAgent agent(grpc);
    ASSERT_TRUE(agent.Send(testing::HelloMsg("gpu-1", 5)));
    ASSERT_TRUE(agent.Read().has_value());
    for (uint64_t seq = 1; seq <= 100 && status != 503; ++seq) {
      ASSERT_TRUE(agent.Send(testing::CollectivesMsg(seq, seq * 100, 10)));
      absl::SleepFor(absl::Milliseconds(20));
      body = testing::HttpGet(http, "/readyz", &status);
    }
  }
  EXPECT_EQ(status, 503);
  EXPECT_TRUE(absl::StartsWith(body, "journal cannot be written")) << body;
  EXPECT_TRUE(absl::StrContains(body, "journal full")) << body;
  EXPECT_EQ(testing::HttpGet(http, "/healthz", &status), "ok\n");

  agg.Signal(SIGTERM);
  ASSERT_TRUE(notify.WaitFor("STOPPING=1", absl::Seconds(5)).has_value());
  EXPECT_EQ(agg.Wait(absl::Seconds(20)), 0) << agg.Stderr();
}

}  // namespace
}  // namespace ringside
