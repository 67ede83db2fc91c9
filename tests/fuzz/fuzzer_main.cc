// One libFuzzer target: RINGSIDE_FUZZ_ENTRY names the entry of fuzz_entries.h it drives.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)ringside::fuzz::RINGSIDE_FUZZ_ENTRY(data, size);
  return 0;
}
