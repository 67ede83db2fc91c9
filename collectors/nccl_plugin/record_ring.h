// The plugin's lock-free ring of encoded records: many producers (whichever NCCL thread completes a
// collective) and one consumer (the sender thread). A bounded queue in D. Vyukov's style: each slot
// carries a sequence number; a producer claims a position with one compare-and-swap, writes the
// record in place and publishes it with a release store. A full ring refuses the record at once
// (the caller counts the drop); nothing waits, allocates or calls the kernel.
//
// Slot sequence numbers are stored relative to the slot's index, so zero-filled static storage is
// the empty ring and untouched slots cost no memory.
#ifndef RINGSIDE_COLLECTORS_NCCL_PLUGIN_RECORD_RING_H_
#define RINGSIDE_COLLECTORS_NCCL_PLUGIN_RECORD_RING_H_

#include <atomic>
#include <cstdint>
#include <cstring>

#include "collectors/nccl_plugin/record_format.h"

namespace ringside::collectors {

template <uint32_t N>
class RecordRing {
  static_assert(N > 0 && (N & (N - 1)) == 0, "capacity must be a power of two");

 public:
  constexpr RecordRing() = default;
  RecordRing(const RecordRing&) = delete;
  RecordRing& operator=(const RecordRing&) = delete;

  // Claims a slot and calls fill(uint8_t* slot_bytes) to write kRecordSize bytes into it. Returns
  // false, without calling fill, when the ring is full.
  template <typename Fill>
  bool TryPush(Fill&& fill) noexcept {
    uint64_t pos = enqueue_.load(std::memory_order_relaxed);
    Slot* slot;
    for (;;) {
      slot = &slots_[pos & (N - 1)];
      const uint64_t seq = SeqOf(*slot, pos);
      const int64_t diff = static_cast<int64_t>(seq - pos);
      if (diff == 0) {
        if (enqueue_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (diff < 0) {
        return false;  // the consumer has not freed this slot yet: full
      } else {
        pos = enqueue_.load(std::memory_order_relaxed);
      }
    }
    fill(slot->bytes);
    SetSeq(*slot, pos, pos + 1);
    return true;
  }

  // Consumer only: copies the oldest published record to `out` and frees its slot. False when
  // the ring is empty (or the oldest claimed slot is still being written).
  bool TryPop(uint8_t* out) noexcept {
    Slot& slot = slots_[dequeue_ & (N - 1)];
    if (SeqOf(slot, dequeue_) != dequeue_ + 1) return false;
    std::memcpy(out, slot.bytes, kRecordSize);
    SetSeq(slot, dequeue_, dequeue_ + N);
    ++dequeue_;
    dequeue_shadow_.store(dequeue_, std::memory_order_release);
    return true;
  }

  // Records waiting (claimed or published), from any thread; approximate while producers run.
  uint64_t Size() const noexcept {
    const uint64_t e = enqueue_.load(std::memory_order_acquire);
    const uint64_t d = dequeue_shadow_.load(std::memory_order_acquire);
    return e >= d ? e - d : 0;
  }

  // Forgets everything. Only when no other thread touches the ring (a fork child).
  void Reset() noexcept {
    for (uint32_t i = 0; i < N; ++i) slots_[i].seq_rel.store(0, std::memory_order_relaxed);
    enqueue_.store(0, std::memory_order_relaxed);
    dequeue_ = 0;
    dequeue_shadow_.store(0, std::memory_order_relaxed);
  }

  static constexpr uint32_t capacity() noexcept { return N; }

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> seq_rel{0};  // sequence − (position's slot index)
    uint8_t bytes[kRecordSize] = {};
  };
  // A slot at index i starts with sequence i. Positions that map to the same slot differ by
  // multiples of N, so the slot index is (pos & (N − 1)).
  static uint64_t SeqOf(const Slot& s, uint64_t pos) noexcept {
    return s.seq_rel.load(std::memory_order_acquire) + (pos & (N - 1));
  }
  static void SetSeq(Slot& s, uint64_t pos, uint64_t seq) noexcept {
    s.seq_rel.store(seq - (pos & (N - 1)), std::memory_order_release);
  }

  alignas(64) std::atomic<uint64_t> enqueue_{0};
  alignas(64) uint64_t dequeue_ = 0;
  std::atomic<uint64_t> dequeue_shadow_{0};
  Slot slots_[N];
};

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NCCL_PLUGIN_RECORD_RING_H_
