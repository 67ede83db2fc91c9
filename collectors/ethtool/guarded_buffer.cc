#include "collectors/ethtool/guarded_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace ringside::collectors {

GuardedBuffer::~GuardedBuffer() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

unsigned char* GuardedBuffer::Get(size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t need = (bytes + page - 1) / page * page;
  if (map_ == nullptr || need > usable_) {
    if (map_ != nullptr) ::munmap(map_, map_size_);
    map_ = nullptr;
    usable_ = map_size_ = 0;
    const size_t size = need + page;
    void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    map_ = static_cast<unsigned char*>(m);
    if (::mprotect(map_ + need, page, PROT_NONE) != 0) {
      ::munmap(map_, size);
      map_ = nullptr;
      return nullptr;
    }
    map_size_ = size;
    usable_ = need;
  }
  unsigned char* p = map_ + usable_ - bytes;
  std::memset(p, 0, bytes);
  return p;
}

}  // namespace ringside::collectors
