// A buffer whose last byte sits right before an inaccessible (PROT_NONE) page. Given to the kernel
// as an ioctl's user buffer, a write past its end fails with EFAULT instead of overwriting the heap:
// kernels before "ethtool: Avoid overflowing userspace buffer on stats query" (7b07be1ff1cb) write
// as many ETHTOOL_GSTATS / ETHTOOL_GSTRINGS entries as the driver has *now*, whatever count the
// caller sized its buffer for (the set grows when `ethtool -L combined 8→64` adds ring stats).
#ifndef RINGSIDE_COLLECTORS_ETHTOOL_GUARDED_BUFFER_H_
#define RINGSIDE_COLLECTORS_ETHTOOL_GUARDED_BUFFER_H_

#include <cstddef>

namespace ringside::collectors {

class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer();

  // `bytes` zeroed, writable bytes followed by a PROT_NONE page; valid until the next call. The
  // mapping is reused while large enough. Null when mmap fails.
  unsigned char* Get(size_t bytes);

 private:
  unsigned char* map_ = nullptr;
  size_t map_size_ = 0;  // including the guard page
  size_t usable_ = 0;    // bytes before the guard page
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_ETHTOOL_GUARDED_BUFFER_H_
