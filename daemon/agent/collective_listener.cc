#include "daemon/agent/collective_listener.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/record_proto.h"
#include "daemon/common/log.h"

namespace ringside::daemon {

namespace rc = ::ringside::collectors;

namespace {

constexpr char kOtherJob[] = "_other";

absl::Status ErrnoStatus(const std::string& what) {
  const int e = errno;
  std::string msg = absl::StrCat(what, ": ", std::strerror(e));
  if (e == EACCES || e == EPERM) return absl::PermissionDeniedError(msg);
  if (e == ENOENT) return absl::NotFoundError(msg);
  if (e == EADDRINUSE) return absl::AlreadyExistsError(msg);
  return absl::InternalError(msg);
}

absl::StatusOr<gid_t> ResolveGroup(const std::string& group) {
  uint32_t number = 0;
  if (absl::SimpleAtoi(group, &number)) return static_cast<gid_t>(number);
  std::vector<char> buf(16384);
  struct group gr;
  struct group* found = nullptr;
  int rc = getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found);
  if (rc == ERANGE) {
    buf.resize(1 << 20);
    rc = getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found);
  }
  if (rc != 0 || found == nullptr) {
    return absl::NotFoundError(absl::StrCat("collectives socket group \"", group, "\" not found"));
  }
  return found->gr_gid;
}

// A stale socket file (no one listening) is removed; a live one is an error.
absl::Status ClearStaleSocket(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a socket: refusing to replace it"));
  }
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe >= 0) {
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    const bool live = ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(probe);
    if (live) {
      return absl::AlreadyExistsError(
          absl::StrCat("another process listens on ", path, " (a second agent?)"));
    }
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(absl::StrCat("remove stale socket ", path));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& CollectiveRejectionReasons() {
  static const std::vector<std::string>* reasons = [] {
    auto* v = new std::vector<std::string>();
    for (int e = 1; e < rc::kDecodeErrorCount; ++e) {
      v->push_back(rc::DecodeErrorName(static_cast<rc::DecodeError>(e)));
    }
    v->push_back("too_many_connections");
    return v;
  }();
  return *reasons;
}

struct CollectiveListener::Connection {
  int fd = -1;
  pid_t pid = 0;
  uid_t uid = 0;
  std::vector<uint8_t> buf;
  size_t filled = 0;
  absl::Time partial_since = absl::InfiniteFuture();  // first byte of the incomplete frame
  double tokens = 0;
  absl::Time refilled;
  bool done = false;
  uint16_t acked = 0;  // the version acknowledged on this connection (2 or 3), 0 none yet

  ~Connection() {
    if (fd >= 0) ::close(fd);
  }
  std::string Who() const { return absl::StrCat("pid ", pid, " uid ", uid); }
};

absl::StatusOr<std::unique_ptr<CollectiveListener>> CollectiveListener::Start(
    CollectiveListenerOptions options, CollectiveSink sink, std::function<absl::Time()> clock,
    std::function<void(const std::string&)> log) {
  if (options.inherited_fd >= 0)
    return Adopt(std::move(options), std::move(sink), std::move(clock), std::move(log));
  const std::string& path = options.socket_path;
  if (path.empty() || path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("collectives socket path must be 1 to ",
                                                   sizeof(sockaddr_un{}.sun_path) - 1, " bytes: \"",
                                                   path, "\""));
  }
  if (options.records_per_second <= 0 || options.burst_records < 1 || options.max_connections < 1 ||
      options.max_jobs < 1 || options.frame_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "collectives listener: rate, burst, max connections, max jobs and frame timeout must be "
        "positive");
  }
  gid_t gid = static_cast<gid_t>(-1);
  if (!options.socket_group.empty()) {
    absl::StatusOr<gid_t> g = ResolveGroup(options.socket_group);
    if (!g.ok()) return g.status();
    gid = *g;
  }
  if (absl::Status s = ClearStaleSocket(path); !s.ok()) return s;
  // The folder (/run/ringside) is usually made by systemd's RuntimeDirectory; make the last level
  // if it is missing.
  if (const size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0) {
    const std::string dir = path.substr(0, slash);
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 && ::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus(absl::StrCat("create ", dir));
    }
  }

  // Bound under a temporary name, given its group and mode, listening, and only then renamed
  // into place: a plugin that sees the path can connect at once, and never finds it with the
  // wrong permissions.
  std::string bind_path = absl::StrCat(path, ".", ::getpid(), ".tmp");
  if (bind_path.size() >= sizeof(sockaddr_un{}.sun_path)) bind_path = path;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoStatus("socket(AF_UNIX)");
  ::unlink(bind_path.c_str());
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, bind_path.data(), bind_path.size());
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    absl::Status s = ErrnoStatus(absl::StrCat("bind ", bind_path));
    ::close(fd);
    return s;
  }
  auto fail = [&](const std::string& what) {
    absl::Status s = ErrnoStatus(what);
    ::close(fd);
    ::unlink(bind_path.c_str());
    return s;
  };
  if (gid != static_cast<gid_t>(-1) &&
      ::chown(bind_path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    return fail(absl::StrCat("chown ", bind_path, " to group ", options.socket_group));
  }
  if (::chmod(bind_path.c_str(), 0660) != 0) return fail(absl::StrCat("chmod 0660 ", bind_path));
  if (::listen(fd, 128) != 0) return fail(absl::StrCat("listen ", bind_path));
  if (bind_path != path && ::rename(bind_path.c_str(), path.c_str()) != 0) {
    return fail(absl::StrCat("rename ", bind_path, " to ", path));
  }
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    bind_path = path;
    return fail("eventfd");
  }

  if (!log) log = [](const std::string& m) { LogLine(m); };
  std::unique_ptr<CollectiveListener> l(new CollectiveListener(std::move(options), std::move(sink),
                                                               std::move(clock), std::move(log)));
  l->listen_fd_ = fd;
  l->wake_fd_ = wake;
  {
    absl::MutexLock lock(&l->mu_);
    for (const std::string& r : CollectiveRejectionReasons()) l->stats_.rejections[r] = 0;
  }
  l->thread_ = std::thread([p = l.get()] { p->Loop(); });
  return l;
}

absl::StatusOr<std::unique_ptr<CollectiveListener>> CollectiveListener::Adopt(
    CollectiveListenerOptions options, CollectiveSink sink, std::function<absl::Time()> clock,
    std::function<void(const std::string&)> log) {
  const int fd = options.inherited_fd;
  int type = 0;
  socklen_t len = sizeof(type);
  int listening = 0;
  socklen_t len_listening = sizeof(listening);
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
      ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len_listening) != 0 ||
      listening == 0) {
    return absl::InvalidArgumentError(absl::StrCat("inherited collectives socket (fd ", fd,
                                                   ") is not a listening stream socket"));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
      ::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    return ErrnoStatus("fcntl(inherited collectives socket)");
  }
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) return ErrnoStatus("eventfd");
  if (!log) log = [](const std::string& m) { LogLine(m); };
  std::unique_ptr<CollectiveListener> l(new CollectiveListener(std::move(options), std::move(sink),
                                                               std::move(clock), std::move(log)));
  l->listen_fd_ = fd;
  l->unlink_on_stop_ = false;
  l->wake_fd_ = wake;
  {
    absl::MutexLock lock(&l->mu_);
    for (const std::string& r : CollectiveRejectionReasons()) l->stats_.rejections[r] = 0;
  }
  l->thread_ = std::thread([p = l.get()] { p->Loop(); });
  return l;
}

CollectiveListener::CollectiveListener(CollectiveListenerOptions options, CollectiveSink sink,
                                       std::function<absl::Time()> clock,
                                       std::function<void(const std::string&)> log)
    : options_(std::move(options)),
      sink_(std::move(sink)),
      clock_(std::move(clock)),
      log_(std::move(log)) {}

CollectiveListener::~CollectiveListener() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  connections_.clear();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    if (unlink_on_stop_) ::unlink(options_.socket_path.c_str());
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void CollectiveListener::NoteCgroup(const std::string& cgroup) {
  const absl::Time now = clock_();
  absl::MutexLock lock(&mu_);
  auto it = cgroups_.find(cgroup);
  if (it != cgroups_.end()) {
    it->second = now;
    return;
  }
  constexpr size_t kMaxCgroups = 1024;
  if (cgroups_.size() >= kMaxCgroups) {  // forget the oldest
    auto oldest = cgroups_.begin();
    for (auto i = cgroups_.begin(); i != cgroups_.end(); ++i) {
      if (i->second < oldest->second) oldest = i;
    }
    cgroups_.erase(oldest);
  }
  cgroups_.emplace(cgroup, now);
}

std::vector<std::string> CollectiveListener::RecentCgroups(absl::Duration max_age) const {
  const absl::Time now = clock_();
  std::vector<std::string> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [cgroup, last] : cgroups_) {
    if (now - last <= max_age) out.push_back(cgroup);
  }
  return out;
}

CollectiveListenerStats CollectiveListener::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void CollectiveListener::Loop() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    absl::Time next_deadline = absl::InfiniteFuture();
    for (const auto& c : connections_) {
      fds.push_back({c->fd, POLLIN, 0});
      if (c->filled > 0)
        next_deadline = std::min(next_deadline, c->partial_since + options_.frame_timeout);
    }
    const size_t polled = connections_.size();
    int timeout_ms = 1000;
    if (next_deadline != absl::InfiniteFuture()) {
      const int64_t left = absl::ToInt64Milliseconds(next_deadline - clock_()) + 1;
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 1000));
    }
    const int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) break;
    if (fds[1].revents & POLLIN) Accept();
    for (size_t i = 0; i < polled; ++i) {
      Connection& c = *connections_[i];
      if (fds[2 + i].revents != 0 && !Read(c)) c.done = true;
    }
    const absl::Time now = clock_();
    for (auto& c : connections_) {
      if (!c->done && c->filled > 0 && now - c->partial_since > options_.frame_timeout) {
        Reject(c.get(), "truncated",
               absl::StrCat("frame incomplete after ", absl::FormatDuration(options_.frame_timeout),
                            " (", c->filled, " bytes)"));
        c->done = true;
      }
    }
    const size_t before = connections_.size();
    connections_.erase(std::remove_if(connections_.begin(), connections_.end(),
                                      [](const auto& c) { return c->done; }),
                       connections_.end());
    if (connections_.size() != before || polled != before) {
      absl::MutexLock lock(&mu_);
      stats_.connections_open = connections_.size();
    }
  }
}

void CollectiveListener::Accept() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN, or a connection that went away before accept
    if (static_cast<int>(connections_.size()) >= options_.max_connections) {
      Reject(nullptr, "too_many_connections",
             absl::StrCat("refused a connection: ", options_.max_connections, " already open"));
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    struct ucred cred = {};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      c->pid = cred.pid;
      c->uid = cred.uid;
    }
    c->buf.resize(rc::kMaxFrameSize);
    c->tokens = options_.burst_records;
    c->refilled = clock_();
    connections_.push_back(std::move(c));
    absl::MutexLock lock(&mu_);
    ++stats_.connections_accepted;
    stats_.connections_open = connections_.size();
  }
}

bool CollectiveListener::Read(Connection& c) {
  const ssize_t n = ::recv(c.fd, c.buf.data() + c.filled, c.buf.size() - c.filled, MSG_DONTWAIT);
  if (n > 0) {
    if (c.filled == 0) c.partial_since = clock_();
    c.filled += static_cast<size_t>(n);
    return ProcessFrames(c);
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
  if (c.filled > 0) {
    Reject(&c, "truncated",
           absl::StrCat("connection closed in the middle of a frame (", c.filled, " bytes)"));
  }
  return false;
}

bool CollectiveListener::ProcessFrames(Connection& c) {
  size_t off = 0;
  while (off < c.filled) {
    const uint8_t* p = c.buf.data() + off;
    const size_t avail = c.filled - off;
    rc::BatchHeaderFields header;
    size_t frame_size = 0;
    rc::DecodeStatus s = rc::DecodeBatchHeader(p, avail, &header, &frame_size);
    // Truncated means only "the header is not all here yet" (96 or 416 bytes by version).
    if (s.error == rc::DecodeError::kTruncated) break;
    if (!s.ok()) {
      Reject(&c, rc::DecodeErrorName(s.error), s.detail);
      return false;
    }
    if (header.version >= rc::kFormatVersion2 && c.acked == 0) {
      // Tell a plugin of version 2 or 3 it may keep speaking that version (it falls back to an
      // older one when an agent cuts it off before this byte; sender.h): one byte, the version.
      // One byte into an empty socket buffer: it does not block, and a plugin that went away is
      // noticed at its next frame.
      c.acked = header.version;
      const uint8_t ack = static_cast<uint8_t>(header.version);
      (void)!::send(c.fd, &ack, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    if (avail < frame_size) break;
    records_.resize(rc::kMaxRecordsPerBatch);
    for (uint32_t i = 0; i < header.record_count; ++i) {
      s = rc::DecodeRecord(p + header.header_size() + i * rc::kRecordSize, rc::kRecordSize,
                           &records_[i], header.version);
      if (!s.ok()) {
        Reject(&c, rc::DecodeErrorName(s.error), absl::StrCat("record ", i, ": ", s.detail));
        return false;
      }
    }
    Deliver(c, header);
    off += frame_size;
  }
  if (off > 0) {
    std::memmove(c.buf.data(), c.buf.data() + off, c.filled - off);
    c.filled -= off;
    if (c.filled > 0) c.partial_since = clock_();
  }
  if (c.filled == 0) c.partial_since = absl::InfiniteFuture();
  return true;
}

void CollectiveListener::Deliver(Connection& c, const rc::BatchHeaderFields& header) {
  const uint32_t count = header.record_count;
  const std::string header_job = header.job_id.c_str();
  const uint64_t dropped = header.dropped;
  const absl::Time now = clock_();
  const double elapsed = std::max(0.0, absl::ToDoubleSeconds(now - c.refilled));
  c.tokens = std::min(options_.burst_records, c.tokens + elapsed * options_.records_per_second);
  c.refilled = now;
  const uint32_t allowed =
      static_cast<uint32_t>(std::min<double>(count, std::floor(std::max(0.0, c.tokens))));
  c.tokens -= allowed;

  v1::CollectiveBatch batch;
  std::map<std::string, uint64_t> accepted, limited;
  for (uint32_t i = 0; i < count; ++i) {
    const std::string job = records_[i].job_id.c_str();
    if (i < allowed) {
      v1::CollectiveRecord* r = batch.add_records();
      rc::RecordToProto(records_[i], r);
      // The kernel's word over the sender's: pid as this node sees it, host as ringside names it.
      if (c.pid > 0) r->set_pid(static_cast<uint32_t>(c.pid));
      if (!options_.node.empty()) r->set_host(options_.node);
      // Format version 2 on: the sender's pod; 4 on: its cgroup and the GPU's PCI address.
      rc::SetSenderIdentity(header, records_[i], r);
      ++accepted[job];
    } else {
      ++limited[job];
      ++(*batch.mutable_dropped_by_job())[job];
    }
  }
  if (dropped > 0) (*batch.mutable_dropped_by_job())[header_job] += dropped;
  if (allowed > 0 && !header.cgroup.empty()) NoteCgroup(header.cgroup.c_str());
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [job, n] : accepted) JobLocked(job).records += n;
    for (const auto& [job, n] : limited) JobLocked(job).rate_limited += n;
    if (dropped > 0) JobLocked(header_job).drops += dropped;
  }
  if (count > allowed) {
    Log("rate_limited",
        absl::StrCat("collectives: ", c.Who(), " sends more than ", options_.records_per_second,
                     " records/s (burst ", options_.burst_records, "): dropped ", count - allowed));
  }
  if (sink_ && (batch.records_size() > 0 || !batch.dropped_by_job().empty())) {
    sink_(std::move(batch));
  }
}

CollectiveListenerStats::Job& CollectiveListener::JobLocked(const std::string& job) {
  auto it = stats_.jobs.find(job);
  if (it != stats_.jobs.end()) return it->second;
  // Cardinality cap: "_other" does not count against it.
  size_t named = stats_.jobs.size() - (stats_.jobs.count(kOtherJob) ? 1 : 0);
  if (named >= static_cast<size_t>(options_.max_jobs)) return stats_.jobs[kOtherJob];
  return stats_.jobs[job];
}

void CollectiveListener::Reject(const Connection* c, const std::string& reason,
                                const std::string& detail) {
  {
    absl::MutexLock lock(&mu_);
    ++stats_.rejections[reason];
  }
  Log(reason, c == nullptr
                  ? absl::StrCat("collectives: ", reason, ": ", detail)
                  : absl::StrCat("collectives: cut off ", c->Who(), ": ", reason, ": ", detail));
}

void CollectiveListener::Log(const std::string& reason, const std::string& message) {
  LogGate& gate = log_gates_[reason];
  const absl::Time now = clock_();
  if (gate.last != absl::InfinitePast() && now - gate.last < options_.log_interval) {
    ++gate.held_back;
    return;
  }
  std::string line = message;
  if (gate.held_back > 0) absl::StrAppend(&line, " (", gate.held_back, " more not logged)");
  gate.last = now;
  gate.held_back = 0;
  log_(line);
}

}  // namespace ringside::daemon
