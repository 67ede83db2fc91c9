// FuzzInput: takes little-endian integers and byte runs off the front of a fuzz input; past its
// end every read gives zeros (so a short input is still a complete, if dull, script).
#ifndef RINGSIDE_TESTS_FUZZ_FUZZ_INPUT_H_
#define RINGSIDE_TESTS_FUZZ_FUZZ_INPUT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ringside::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t remaining() const { return size_ - pos_; }
  bool empty() const { return pos_ >= size_; }

  uint64_t Uint(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) {
      if (pos_ < size_) v |= static_cast<uint64_t>(data_[pos_++]) << (8 * i);
    }
    return v;
  }
  uint8_t U8() { return static_cast<uint8_t>(Uint(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Uint(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Uint(4)); }
  uint64_t U64() { return Uint(8); }

  // Copies up to n bytes into out and zero-fills the rest of the n.
  void Fill(void* out, size_t n) {
    const size_t k = std::min(n, remaining());
    if (k > 0) std::memcpy(out, data_ + pos_, k);
    if (k < n) std::memset(static_cast<uint8_t*>(out) + k, 0, n - k);
    pos_ += k;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace ringside::fuzz

#endif  // RINGSIDE_TESTS_FUZZ_FUZZ_INPUT_H_
