#include "collectors/nccl_plugin/identity.h"

#include <fcntl.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ringside::collectors {

bool JobIdFromEnvironment(FixedString<kJobIdSize>* job_id) noexcept {
  static constexpr const char* kNames[] = {"RINGSIDE_JOB_ID", "SLURM_JOB_ID",
                                           "TORCHELASTIC_RUN_ID"};
  for (const char* name : kNames) {
    const char* value = ::getenv(name);
    if (value != nullptr && value[0] != '\0') {
      job_id->Set(value);
      if (!job_id->empty()) return true;
    }
  }
  return false;
}

void ResolveJobId(const char* comm_name, uint64_t comm_id,
                  FixedString<kJobIdSize>* job_id) noexcept {
  if (JobIdFromEnvironment(job_id)) return;
  if (comm_name != nullptr && comm_name[0] != '\0') {
    job_id->Set(comm_name);
    if (!job_id->empty()) return;
  }
  char buf[32] = "comm-";
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) buf[5 + i] = kHex[(comm_id >> (60 - 4 * i)) & 0xf];
  buf[21] = '\0';
  job_id->Set(buf);
}

const char* PodFromEnvironment(FixedString<kPodSize>* pod,
                               FixedString<kPodNamespaceSize>* pod_namespace) noexcept {
  pod->Clear();
  pod_namespace->Clear();
  const char* name = ::getenv("POD_NAME");
  const char* ns = ::getenv("POD_NAMESPACE");
  if (name == nullptr || name[0] == '\0') return nullptr;
  if (ns == nullptr || ns[0] == '\0') return "POD_NAME without POD_NAMESPACE: ignored";
  // Bounded scans: a name longer than Kubernetes allows is rejected, not truncated.
  const size_t name_len = ::strnlen(name, kMaxPodLength + 1);
  const size_t ns_len = ::strnlen(ns, kMaxPodNamespaceLength + 1);
  if (!ValidPodName(name, name_len)) {
    return "POD_NAME is not a Kubernetes pod name (1-253 of a-z 0-9 - .): ignored";
  }
  if (!ValidPodNamespace(ns, ns_len)) {
    return "POD_NAMESPACE is not a Kubernetes namespace (1-63 of a-z 0-9 -): ignored";
  }
  pod->Set(name, name_len);
  pod_namespace->Set(ns, ns_len);
  return "";
}

const char* CgroupFromProc(FixedString<kCgroupSize>* cgroup, const char* path) noexcept {
  cgroup->Clear();
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "no /proc/self/cgroup";
  char buf[8192];
  size_t have = 0;
  for (;;) {
    const ssize_t r = ::read(fd, buf + have, sizeof(buf) - 1 - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += static_cast<size_t>(r);
    if (have == sizeof(buf) - 1) break;
  }
  ::close(fd);
  buf[have] = '\0';
  // Lines "hierarchy-id:controllers:path"; cgroup v2 is "0::/path".
  for (char* line = buf; line != nullptr && *line != '\0';) {
    char* next = std::strchr(line, '\n');
    const size_t len = next != nullptr ? static_cast<size_t>(next - line) : std::strlen(line);
    if (len >= 3 && std::strncmp(line, "0::", 3) == 0) {
      const char* p = line + 3;
      const size_t plen = len - 3;
      if (plen == 1 && p[0] == '/') {
        return "cgroup \"/\" (a private cgroup namespace hides the path): no CPU throttling "
               "from the agent";
      }
      if (!ValidCgroupPath(p, plen)) return "cgroup path too long or not plain";
      cgroup->Set(p, plen);
      return "";
    }
    line = next != nullptr ? next + 1 : nullptr;
  }
  return "no cgroup v2 line in /proc/self/cgroup";
}

void HostName(FixedString<kHostSize>* host) noexcept {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') {
    host->Set("localhost");
    return;
  }
  host->Set(buf);
  if (host->empty()) host->Set("localhost");
}

bool SystemClockSynchronized() noexcept {
  struct timex tx = {};
  const int state = ::adjtimex(&tx);
  return state >= 0 && state != TIME_ERROR && (tx.status & STA_UNSYNC) == 0;
}

uint32_t DatatypeSize(const char* t) noexcept {
  if (t == nullptr) return 0;
  if (t[0] == 'n' && t[1] == 'c' && t[2] == 'c' && t[3] == 'l') t += 4;
  const char* p = t;
  while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) ++p;
  if (*p >= '0' && *p <= '9') {
    uint32_t bits = 0;
    for (int i = 0; i < 3 && *p >= '0' && *p <= '9'; ++i, ++p) bits = bits * 10 + (*p - '0');
    switch (bits) {
      case 8:
        return 1;
      case 16:
        return 2;
      case 32:
        return 4;
      case 64:
        return 8;
      default:
        return 0;
    }
  }
  if (*p != '\0') return 0;
  const auto is = [&](const char* name) {
    const char* a = t;
    const char* b = name;
    while (*a != '\0' && *a == *b) ++a, ++b;
    return *a == '\0' && *b == '\0';
  };
  if (is("Char")) return 1;
  if (is("Half")) return 2;
  if (is("Int") || is("Float")) return 4;
  if (is("Double")) return 8;
  return 0;
}

int64_t RealtimeNanos() noexcept {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t MonotonicNanos() noexcept {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace ringside::collectors
