#include "bench/page_touch.h"

#include <sys/mman.h>
#include <time.h>

#include <cstddef>

namespace ringside::bench {
namespace {

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

constexpr size_t kPage = 4096;

// `bytes` (rounded up to whole pages) of anonymous memory never touched, unmapped at the end; p is
// null when it could not be mapped.
struct FreshPages {
  explicit FreshPages(size_t want) : bytes((want + kPage - 1) / kPage * kPage) {
    if (bytes == 0) return;
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) p = m;
  }
  ~FreshPages() {
    if (p != nullptr) munmap(p, bytes);
  }
  FreshPages(const FreshPages&) = delete;
  FreshPages& operator=(const FreshPages&) = delete;
  double pages() const { return static_cast<double>(bytes / kPage); }
  void WriteEachPage() {
    volatile char* c = static_cast<volatile char*>(p);
    for (size_t i = 0; i < bytes; i += kPage) c[i] = 1;
  }
  size_t bytes;
  void* p = nullptr;
};

}  // namespace

double PageTouchMicros(size_t bytes) {
  FreshPages m(bytes);
  if (m.p == nullptr) return -1;
  const double t0 = ThreadCpuSeconds();
  m.WriteEachPage();
  const double t1 = ThreadCpuSeconds();
  return (t1 - t0) * 1e6 / m.pages();
}

PopulatedTouch PopulatedTouchMicros(size_t bytes) {
  PopulatedTouch r;
#ifdef MADV_POPULATE_WRITE
  FreshPages m(bytes);
  if (m.p == nullptr) return r;
  const double t0 = ThreadCpuSeconds();
  const int rc = madvise(m.p, m.bytes, MADV_POPULATE_WRITE);
  const double t1 = ThreadCpuSeconds();
  m.WriteEachPage();
  const double t2 = ThreadCpuSeconds();
  if (rc != 0) return r;
  r.populate_us = (t1 - t0) * 1e6 / m.pages();
  r.write_us = (t2 - t1) * 1e6 / m.pages();
#else
  (void)bytes;
#endif
  return r;
}

}  // namespace ringside::bench
