#include "bench/page_touch.h"

#include <sys/mman.h>
#include <time.h>

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

PopulatedTouch PopulatedTouchMicros(size_t bytes) {
  PopulatedTouch r;
#ifdef MADV_POPULATE_WRITE
  constexpr size_t kPage = 4096;
  bytes = (bytes + kPage - 1) / kPage * kPage;
  if (bytes == 0) return r;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return r;
  volatile char* c = static_cast<volatile char*>(p);
  const double pages = static_cast<double>(bytes / kPage);
  const double t0 = ThreadCpuSeconds();
  const int rc = madvise(p, bytes, MADV_POPULATE_WRITE);
  const double t1 = ThreadCpuSeconds();
  for (size_t i = 0; i < bytes; i += kPage) c[i] = 1;
  const double t2 = ThreadCpuSeconds();
  munmap(p, bytes);
  if (rc != 0) return r;
  r.populate_us = (t1 - t0) * 1e6 / pages;
  r.write_us = (t2 - t1) * 1e6 / pages;
#else
  (void)bytes;
#endif
  return r;
}

}  // namespace ringside::bench
