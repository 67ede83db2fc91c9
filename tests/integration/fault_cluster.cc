#include "tests/integration/fault_cluster.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/record_proto.h"
#include "daemon/aggregator/journal/journal.h"
#include "grpcpp/create_channel.h"
#include "ringside/v1/query.grpc.pb.h"
#include "sim/sysfs_tree.h"
#include "tests/testing/eventually.h"
#include "tests/testing/prom_text.h"

namespace ringside::testing {
namespace {

int ConnectUnix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (fd < 0 || path.size() >= sizeof(addr.sun_path)) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::send(fd, data + done, size - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

std::unique_ptr<Process> StartAggregator(
    const std::string& state_dir, const std::string& out_dir,
    const std::vector<std::string>& extra, AggregatorPorts* ports,
    const std::function<std::vector<std::string>(std::vector<std::string>)>& wrap) {
  std::vector<std::string> argv = {BinaryPath("daemon/ringside-aggregator"),
                                   "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
                                   "--state-dir=" + state_dir};
  argv.insert(argv.end(), extra.begin(), extra.end());
  if (wrap) argv = wrap(std::move(argv));
  auto p = std::make_unique<Process>(argv, out_dir);
  *ports = AggregatorPorts{};
  if (!p->WaitForStderr("HTTP (/metrics", absl::Seconds(20))) {
    ADD_FAILURE() << "aggregator did not start: " << p->Stderr();
    return nullptr;
  }
  const std::string err = p->Stderr();
  std::smatch m;
  if (std::regex_search(err, m,
                        std::regex("ingest \\(gRPC\\) listening on \\S+ \\(port ([0-9]+)\\)"))) {
    ports->grpc = std::stoi(m[1].str());
  }
  if (std::regex_search(err, m,
                        std::regex("HTTP \\S+ \\S+ \\S+ listening on \\S+ \\(port ([0-9]+)\\)"))) {
    ports->http = std::stoi(m[1].str());
  }
  if (ports->grpc == 0 || ports->http == 0) {
    ADD_FAILURE() << "no ports in the aggregator's log: " << err;
    return nullptr;
  }
  return p;
}

int QueryNodeCount(int grpc_port) {
  auto stub = v1::Query::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_port),
                                                     grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::ClusterStatus status;
  if (!stub->GetStatus(&ctx, v1::GetStatusRequest(), &status).ok()) return -1;
  return static_cast<int>(status.nodes());
}

// --- FaultAgent ----------------------------------------------------------------------------------

FaultAgent::FaultAgent(std::string node, std::string dir)
    : node_(std::move(node)), dir_(std::move(dir)) {
  socket_ = absl::StrCat(dir_, "/", node_, ".sock");
  tree_dir_ = absl::StrCat(dir_, "/sys-", node_);
}

FaultAgent::~FaultAgent() {
  if (process_) {
    process_->Signal(SIGKILL);
    process_->Wait(absl::Seconds(5));
  }
}

bool FaultAgent::Start(const std::string& aggregator, const std::vector<std::string>& extra) {
  std::filesystem::create_directories(tree_dir_);
  sim::SysfsTreeWriter tree(tree_dir_);
  if (!std::filesystem::exists(tree_dir_ + "/class/infiniband/mlx5_0")) {
    if (absl::Status s = tree.AddHca(sim::HcaSpec{}); !s.ok()) {
      ADD_FAILURE() << s;
      return false;
    }
  }
  std::vector<std::string> argv = {
      BinaryPath("daemon/ringside-agent"), "--sysfs-root=" + tree_dir_, "--node-name=" + node_,
      "--aggregator=" + aggregator, "--allow-insecure", "--interval=100ms",
      "--listen=127.0.0.1:0", "--nvml-library=", "--ethtool-source=off", "--link-events=false",
      "--lldp=false", "--upload-backoff-max=300ms", "--collectives-socket=" + socket_,
      "--collectives-rate=10000000", "--collectives-burst=10000000"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  process_ = std::make_unique<Process>(argv, dir_);
  if (!process_->WaitForStderr("serving /metrics", absl::Seconds(20)) ||
      !process_->WaitForStderr("collective records on", absl::Seconds(20))) {
    ADD_FAILURE() << node_ << " did not start: " << process_->Stderr();
    return false;
  }
  std::smatch m;
  const std::string err = process_->Stderr();
  if (!std::regex_search(err, m, std::regex("serving /metrics on \\S+ \\(port ([0-9]+)\\)"))) {
    ADD_FAILURE() << "no metrics port in " << err;
    return false;
  }
  metrics_port_ = std::stoi(m[1].str());
  return true;
}

bool FaultAgent::SetPortState(int state, int phys_state) {
  sim::SysfsTreeWriter tree(tree_dir_);
  absl::Status s = tree.SetPortState("mlx5_0", 1, state, phys_state);
  if (!s.ok()) ADD_FAILURE() << s;
  return s.ok();
}

bool FaultAgent::Feed(const std::string& job, uint64_t first_seq, uint64_t count) {
  const int fd = ConnectUnix(socket_);
  if (fd < 0) return false;
  bool ok = true;
  for (uint64_t done = 0; ok && done < count;) {
    const uint64_t n = std::min<uint64_t>(256, count - done);
    std::vector<collectors::CollectiveRecordFields> records;
    records.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      collectors::CollectiveRecordFields r;
      r.rank = 1;
      r.nranks = 4;
      r.pid = static_cast<uint32_t>(::getpid());
      r.comm_id = 0x5eed;
      r.seq = first_seq + done + i;
      r.bytes = 1 << 20;
      r.enqueue_unix_nanos = absl::ToUnixNanos(absl::Now());
      r.channels = 2;
      r.job_id.Set(job.data(), job.size());
      r.host.Set(node_.data(), node_.size());
      r.function.Set("AllReduce", 9);
      records.push_back(r);
    }
    collectors::BatchHeaderFields header;
    header.job_id.Set(job.data(), job.size());
    absl::StatusOr<std::string> frame = collectors::EncodeFrame(header, records);
    ok = frame.ok() && SendAll(fd, frame->data(), frame->size());
    done += n;
  }
  ::close(fd);
  return ok;
}

double FaultAgent::RecordsIn(const std::string& job) {
  std::vector<PromSample> s = ParsePromText(HttpGet(metrics_port_, "/metrics"))
                                  .Find("ringside_agent_collective_records_total",
                                        {{"node", node_}, {"job", job}});
  return s.size() == 1 ? s[0].value : 0;
}

double FaultAgent::Upload(const std::string& family,
                          const std::map<std::string, std::string>& labels) {
  std::map<std::string, std::string> want = labels;
  want["node"] = node_;
  std::vector<PromSample> s = ParsePromText(HttpGet(metrics_port_, "/metrics")).Find(family, want);
  return s.size() == 1 ? s[0].value : -1;
}

std::vector<double> FaultAgent::UploadSnapshot(
    const std::vector<std::pair<std::string, std::map<std::string, std::string>>>& wanted) {
  const auto scrape = ParsePromText(HttpGet(metrics_port_, "/metrics"));
  std::vector<double> out;
  for (const auto& [family, labels] : wanted) {
    std::map<std::string, std::string> want = labels;
    want["node"] = node_;
    std::vector<PromSample> s = scrape.Find(family, want);
    out.push_back(s.size() == 1 ? s[0].value : -1);
  }
  return out;
}

bool FaultAgent::WaitAllAcked(absl::Duration timeout,
                              const std::map<std::string, std::string>& labels) {
  // Sample batches follow every 100 ms: once one sent after now is acked, so is all before it.
  const double sent_now = Upload("ringside_agent_upload_sent_seq", labels);
  return Eventually(
      [&] {
        const double sent = Upload("ringside_agent_upload_sent_seq", labels);
        const double acked = Upload("ringside_agent_upload_acked_seq", labels);
        return sent > sent_now && acked >= sent_now + 1 && acked > 0;
      },
      timeout, absl::Milliseconds(50));
}

uint64_t FaultAgent::RssBytes() {
  std::ifstream in(absl::StrCat("/proc/", process_->pid(), "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      uint64_t kb = 0;
      std::string digits;
      for (char c : line) {
        if (c >= '0' && c <= '9') digits += c;
      }
      if (absl::SimpleAtoi(digits, &kb)) return kb * 1024;
    }
  }
  return 0;
}

// --- Journal -------------------------------------------------------------------------------------

std::string RecordKey(const std::string& node, const std::string& job, uint64_t seq) {
  return absl::StrCat(node, "/", job, "/", seq);
}

void ExpectAllOnce(const JournalContents& j, const std::string& node, const std::string& job,
                   uint64_t count) {
  uint64_t missing = 0, repeated = 0;
  std::string first_bad;
  for (uint64_t seq = 0; seq < count; ++seq) {
    auto it = j.records.find(RecordKey(node, job, seq));
    const int n = it == j.records.end() ? 0 : it->second;
    if (n == 0) ++missing;
    if (n > 1) ++repeated;
    if (n != 1 && first_bad.empty()) first_bad = absl::StrCat(RecordKey(node, job, seq), " x", n);
  }
  EXPECT_EQ(missing, 0u) << node << " " << job << ": first bad " << first_bad;
  EXPECT_EQ(repeated, 0u) << node << " " << job << ": first bad " << first_bad;
}

void ExpectNoneTwice(const JournalContents& j) {
  for (const auto& [key, n] : j.records) EXPECT_EQ(n, 1) << key << " stored " << n << " times";
}

std::string Loopback(int port) { return absl::StrCat("127.0.0.1:", port); }

int ReadyStatus(int http_port) {
  int status = 0;
  HttpGet(http_port, "/readyz", &status, absl::Seconds(2));
  return status;
}

void Stop(Process* p) {
  if (p == nullptr) return;
  p->Signal(SIGTERM);
  EXPECT_EQ(p->Wait(absl::Seconds(20)), 0) << p->Stderr();
}

JournalContents ReadJournalRecords(const std::string& state_dir) {
  JournalContents out;
  daemon::JournalReadStats stats;
  absl::Status s = daemon::ReadJournal(
      state_dir + "/journal", nullptr,
      [&](const daemon::JournalEntry& e) {
        if (!e.message.has_collectives()) return;
        for (const v1::CollectiveRecord& r : e.message.collectives().records()) {
          ++out.records[RecordKey(e.node, r.job_id(), r.seq())];
        }
      },
      nullptr, &stats);
  if (!s.ok()) out.error = s.ToString();
  out.corrupt_segments = stats.corrupt_segments;
  return out;
}

// --- PartitionRelay ------------------------------------------------------------------------------

PartitionRelay::PartitionRelay(int target_port) : target_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 16) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ADD_FAILURE() << "relay: " << std::strerror(errno);
    return;
  }
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

PartitionRelay::~PartitionRelay() {
  stop_ = true;
  Uncut();
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    absl::MutexLock l(&mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
  absl::MutexLock l(&mu_);
  for (int fd : fds_) ::close(fd);
  ::close(listen_fd_);
}

void PartitionRelay::Cut() {
  absl::MutexLock l(&mu_);
  cut_ = true;
}

void PartitionRelay::Uncut() {
  absl::MutexLock l(&mu_);
  cut_ = false;
}

void PartitionRelay::AcceptLoop() {
  while (!stop_) {
    pollfd p = {listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const int server = ConnectLoopback(target_);
    if (server < 0) {
      ::close(client);
      continue;
    }
    absl::MutexLock l(&mu_);
    fds_.push_back(client);
    fds_.push_back(server);
    threads_.emplace_back([this, client, server] { Pump(client, server); });
    threads_.emplace_back([this, client, server] { Pump(server, client); });
  }
}

void PartitionRelay::Pump(int from, int to) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(from, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    {
      // Hold what was read while cut.
      absl::MutexLock l(&mu_);
      if (cut_) held_reads_ += static_cast<uint64_t>(n);
      auto uncut = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !cut_; };
      mu_.Await(absl::Condition(&uncut));
    }
    if (!SendAll(to, buf, static_cast<size_t>(n))) break;
  }
  ::shutdown(to, SHUT_WR);
}

}  // namespace ringside::testing
