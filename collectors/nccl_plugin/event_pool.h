// A fixed-capacity, lock-free pool of plugin event objects, preallocated in static storage: the
// hot path takes and returns objects with one compare-and-swap each, and never calls malloc.
//
// Free objects form a Treiber stack whose head packs (ABA tag << 32 | index + 1). Objects never
// used yet are handed out by a bump counter, so pages of an unused pool are never touched.
// Alloc() returns nullptr when every object is in use; the caller counts that as a drop.
#ifndef RINGSIDE_COLLECTORS_NCCL_PLUGIN_EVENT_POOL_H_
#define RINGSIDE_COLLECTORS_NCCL_PLUGIN_EVENT_POOL_H_

#include <atomic>
#include <cstdint>

namespace ringside::collectors {

template <typename T, uint32_t N>
class EventPool {
 public:
  constexpr EventPool() = default;
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  T* Alloc() noexcept {
    uint64_t head = head_.load(std::memory_order_acquire);
    for (;;) {
      const uint32_t top = static_cast<uint32_t>(head);
      if (top == 0) break;
      const uint32_t next = next_[top - 1].load(std::memory_order_relaxed);
      const uint64_t replacement = ((head >> 32) + 1) << 32 | next;
      if (head_.compare_exchange_weak(head, replacement, std::memory_order_acquire,
                                      std::memory_order_acquire)) {
        in_use_.fetch_add(1, std::memory_order_relaxed);
        return &items_[top - 1];
      }
    }
    uint32_t fresh = bump_.load(std::memory_order_relaxed);
    while (fresh < N) {
      if (bump_.compare_exchange_weak(fresh, fresh + 1, std::memory_order_relaxed)) {
        in_use_.fetch_add(1, std::memory_order_relaxed);
        return &items_[fresh];
      }
    }
    return nullptr;
  }

  void Free(T* item) noexcept {
    const uint32_t index = static_cast<uint32_t>(item - items_);
    uint64_t head = head_.load(std::memory_order_relaxed);
    uint64_t replacement;
    do {
      next_[index].store(static_cast<uint32_t>(head), std::memory_order_relaxed);
      replacement = ((head >> 32) + 1) << 32 | (index + 1);
    } while (!head_.compare_exchange_weak(head, replacement, std::memory_order_release,
                                          std::memory_order_relaxed));
    in_use_.fetch_sub(1, std::memory_order_relaxed);
  }

  bool Owns(const void* p) const noexcept {
    const T* t = static_cast<const T*>(p);
    return t >= items_ && t < items_ + N;
  }

  uint32_t in_use() const noexcept { return in_use_.load(std::memory_order_relaxed); }
  static constexpr uint32_t capacity() noexcept { return N; }

 private:
  std::atomic<uint64_t> head_{0};
  std::atomic<uint32_t> bump_{0};
  std::atomic<uint32_t> in_use_{0};
  std::atomic<uint32_t> next_[N] = {};
  T items_[N] = {};
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NCCL_PLUGIN_EVENT_POOL_H_
