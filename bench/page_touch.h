// What this machine charges a process for memory it touches for the first time: a page fault, and
// on a virtual machine often the hypervisor's work to back the page too. The shard-capacity bench
// multiplies the aggregator's minor faults (ProcMinorFaults, aggregator_process.h) by it to say
// how much of its CPU went to growing its memory, a part that depends on the machine more than on
// the aggregator: on the 2-core VM of docs/benchmarks.md a fresh 4 KiB page costs 14-25 us of
// CPU, some 3.7-6.5 s a GiB.
#ifndef RINGSIDE_BENCH_PAGE_TOUCH_H_
#define RINGSIDE_BENCH_PAGE_TOUCH_H_

#include <cstddef>

namespace ringside::bench {

// CPU microseconds (this thread's) a first write to a fresh anonymous 4 KiB page costs, measured
// on `bytes` of memory mapped for it and unmapped after; -1 if the memory cannot be mapped.
double PageTouchMicros(size_t bytes = size_t{128} << 20);

// The same memory populated first, in one madvise(MADV_POPULATE_WRITE) call (as the aggregator
// does for a new node's tables, analysis/populate.h), then written: the CPU microseconds a page
// of each. On a host that backs a page when the process maps it, the write after the call is
// cheap; on one that backs it on the first access through the process's mapping (a shadow page
// table, as on the VM of docs/benchmarks.md), the write still pays most of the price.
// {-1, -1} when the memory cannot be mapped or the call is not supported.
struct PopulatedTouch {
  double populate_us = -1;  // a page, in the madvise call
  double write_us = -1;     // a page, its first write after the call
};
PopulatedTouch PopulatedTouchMicros(size_t bytes = size_t{64} << 20);

}  // namespace ringside::bench

#endif  // RINGSIDE_BENCH_PAGE_TOUCH_H_
