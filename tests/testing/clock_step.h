// Steps the wall clock of real processes started under tests/testing/clock_step_shim.c (an
// LD_PRELOAD library): each process reads its offset from a file of its own, which this class
// creates and rewrites in place.
#ifndef RINGSIDE_TESTS_TESTING_CLOCK_STEP_H_
#define RINGSIDE_TESTS_TESTING_CLOCK_STEP_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ringside::testing {

class ClockOffset {
 public:
  // `path`: the offset file (created, zero offset). `shim`: the built shim library.
  ClockOffset(std::string path, std::string shim) : path_(std::move(path)), shim_(std::move(shim)) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    if (::ftruncate(fd, sizeof(int64_t)) == 0) {
      void* p = ::mmap(nullptr, sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) offset_ = static_cast<int64_t*>(p);
    }
    ::close(fd);
  }
  ~ClockOffset() {
    if (offset_ != nullptr) ::munmap(offset_, sizeof(int64_t));
  }
  ClockOffset(const ClockOffset&) = delete;
  ClockOffset& operator=(const ClockOffset&) = delete;

  bool ok() const { return offset_ != nullptr; }
  // The processes' wall clock is now the machine's plus `d` (a step of the difference).
  void Set(absl::Duration d) {
    __atomic_store_n(offset_, absl::ToInt64Nanoseconds(d), __ATOMIC_RELAXED);
  }
  // `argv` run under the shim with this offset file (through env(1), so the pid is the
  // program's).
  std::vector<std::string> Wrap(std::vector<std::string> argv) const {
    std::vector<std::string> out = {"/usr/bin/env", "LD_PRELOAD=" + shim_,
                                    "RINGSIDE_CLOCK_OFFSET_FILE=" + path_};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

 private:
  std::string path_;
  std::string shim_;
  int64_t* offset_ = nullptr;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_CLOCK_STEP_H_
