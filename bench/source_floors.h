// Floors for the agent bench's NVLink and ethtool phase (issue #3): what the sources alone cost,
// with no collector around them, so that a collector's own share can be told from its source's.
//   NvmlCallLoop  the NVML calls the NVML collector makes in a steady cycle (the GPU count, then
//                 per GPU and link the state and the four DL counters), straight into the library;
//   DumpReadLoop  the `ethtool -S` dump folder listed and each file opened, read whole and closed,
//                 with no parsing;
//   SyscallNanos  one trivial ioctl (FIONREAD on a pipe): the least a real driver call costs, since
//                 every real NVML call is at least one ioctl on /dev/nvidiactl.
#ifndef RINGSIDE_BENCH_SOURCE_FLOORS_H_
#define RINGSIDE_BENCH_SOURCE_FLOORS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "collectors/nvml/nvml_api.h"

namespace ringside::bench {

class NvmlCallLoop {
 public:
  // Loads `library` through the collector's own loader (NvmlLibrary::Open) and takes a handle for
  // every GPU; `links` per GPU.
  static absl::StatusOr<std::unique_ptr<NvmlCallLoop>> Open(const std::string& library,
                                                            unsigned int links);
  // One cycle's calls. Returns how many answered NVML_SUCCESS.
  size_t Cycle();
  size_t calls_per_cycle() const { return 1 + gpus_.size() * links_ * 5; }

 private:
  NvmlCallLoop(std::unique_ptr<collectors::nvml::NvmlLibrary> lib, unsigned int links)
      : lib_(std::move(lib)), links_(links) {}

  std::unique_ptr<collectors::nvml::NvmlLibrary> lib_;
  std::vector<collectors::nvml::Device> gpus_;
  unsigned int links_;
  uint64_t sink_ = 0;  // keeps the values observable
};

class DumpReadLoop {
 public:
  explicit DumpReadLoop(std::string dir) : dir_(std::move(dir)), buf_(1 << 20) {}
  // One cycle: list, then open, read whole and close each file. Returns the bytes read.
  size_t Cycle();

 private:
  std::string dir_;
  std::vector<char> buf_;
};

// CPU per trivial ioctl, from `n` back to back; 0 if it cannot be measured.
double SyscallNanos(int n);

}  // namespace ringside::bench

#endif  // RINGSIDE_BENCH_SOURCE_FLOORS_H_
