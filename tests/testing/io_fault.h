// Drives tests/testing/io_fault_shim.c (an LD_PRELOAD library) from a test: the processes started
// through Wrap() fail their writes, syncs or reads of the files whose path contains `match` with
// the errno set here, from the moment it is set until it is set back to 0.
#ifndef RINGSIDE_TESTS_TESTING_IO_FAULT_H_
#define RINGSIDE_TESTS_TESTING_IO_FAULT_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ringside::testing {

class IoFault {
 public:
  enum Kind { kWrite = 0, kSync = 1, kRead = 2 };

  // `path`: the control file (created, no fault). `shim`: the built shim library. `match`: part
  // of the paths of the files to fail.
  IoFault(std::string path, std::string shim, std::string match)
      : path_(std::move(path)), shim_(std::move(shim)), match_(std::move(match)) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    if (::ftruncate(fd, 4 * sizeof(int32_t)) == 0) {
      void* p = ::mmap(nullptr, 4 * sizeof(int32_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) control_ = static_cast<int32_t*>(p);
    }
    ::close(fd);
  }
  ~IoFault() {
    if (control_ != nullptr) ::munmap(control_, 4 * sizeof(int32_t));
  }
  IoFault(const IoFault&) = delete;
  IoFault& operator=(const IoFault&) = delete;

  bool ok() const { return control_ != nullptr; }
  // From now on calls of `kind` on matching files fail with `err` (0: succeed again).
  void Set(Kind kind, int err) { __atomic_store_n(&control_[kind], err, __ATOMIC_RELAXED); }
  // Calls failed so far (all kinds, all processes under this control file).
  int32_t hits() const { return __atomic_load_n(&control_[3], __ATOMIC_RELAXED); }
  // `argv` run under the shim (through env(1), so the pid is the program's).
  std::vector<std::string> Wrap(std::vector<std::string> argv) const {
    std::vector<std::string> out = {"/usr/bin/env", "LD_PRELOAD=" + shim_,
                                    "RINGSIDE_IO_FAULT_FILE=" + path_,
                                    "RINGSIDE_IO_FAULT_MATCH=" + match_};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

 private:
  std::string path_;
  std::string shim_;
  std::string match_;
  int32_t* control_ = nullptr;
};

}  // namespace ringside::testing

#endif  // RINGSIDE_TESTS_TESTING_IO_FAULT_H_
