// Writing a fresh table at once: its pages populated in one call instead of a page fault each.
//
// A table allocated for a new node (its series, 88 KiB at 1,500; the aggregator's hints for them,
// 36 KiB) is written whole as soon as it is allocated, on memory the process never touched: one
// page fault per 4 KiB. On the 2-core VM the shard benches run on, a fault costs 15-25 us and a
// page populated in bulk 9-12 us (docs/benchmarks.md), most of a node's admission either way.
#ifndef RINGSIDE_ANALYSIS_POPULATE_H_
#define RINGSIDE_ANALYSIS_POPULATE_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace ringside::analysis {

// Populates the whole pages of [p, p + bytes) for writing (Linux 5.14+; a hint: where it is not
// supported, or the range is under `min_pages` pages, the writes fault as before). Pages already
// present are left as they are.
inline void PopulateForWrite(const void* p, size_t bytes, size_t min_pages = 4) {
#ifdef MADV_POPULATE_WRITE
  constexpr uintptr_t kPage = 4096;
  if (bytes < min_pages * kPage) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kPage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)bytes;
  (void)min_pages;
#endif
}

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_POPULATE_H_
