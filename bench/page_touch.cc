#include "bench/page_touch.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringside::bench {
namespace {

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

double PageTouchMicros(size_t bytes) {
  constexpr size_t kPage = 4096;
  bytes = (bytes + kPage - 1) / kPage * kPage;
  if (bytes == 0) return -1;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -1;
  volatile char* c = static_cast<volatile char*>(p);
  const double t0 = ThreadCpuSeconds();
  for (size_t i = 0; i < bytes; i += kPage) c[i] = 1;
  const double t1 = ThreadCpuSeconds();
  munmap(p, bytes);
  return (t1 - t0) * 1e6 / static_cast<double>(bytes / kPage);
}

long long ProcMinorFaults(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = s.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos || close + 2 > s.size()) return -1;
  std::istringstream rest(s.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 10 && rest >> field; ++i) {
    long long v = 0;
    if (i == 10) return absl::SimpleAtoi(field, &v) ? v : -1;
  }
  return -1;
}

}  // namespace ringside::bench
