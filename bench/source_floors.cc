#include "bench/source_floors.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringside::bench {

namespace nvml = collectors::nvml;

absl::StatusOr<std::unique_ptr<NvmlCallLoop>> NvmlCallLoop::Open(const std::string& library,
                                                                 unsigned int links) {
  absl::StatusOr<std::unique_ptr<nvml::NvmlLibrary>> lib = nvml::NvmlLibrary::Open(library);
  if (!lib.ok()) return lib.status();
  auto loop = std::unique_ptr<NvmlCallLoop>(new NvmlCallLoop(*std::move(lib), links));
  const nvml::Functions& fn = loop->lib_->fn();
  unsigned int count = 0;
  if (nvml::Return r = fn.device_get_count(&count); r != nvml::kSuccess) {
    return loop->lib_->ToStatus(r, nvml::kDeviceGetCountSymbol);
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvml::Device d = nullptr;
    if (nvml::Return r = fn.device_get_handle_by_index(i, &d); r != nvml::kSuccess) {
      return loop->lib_->ToStatus(r, absl::StrCat(nvml::kDeviceGetHandleByIndexSymbol, " ", i));
    }
    loop->gpus_.push_back(d);
  }
  return loop;
}

size_t NvmlCallLoop::Cycle() {
  const nvml::Functions& fn = lib_->fn();
  size_t ok = 0;
  unsigned int count = 0;
  ok += fn.device_get_count(&count) == nvml::kSuccess;
  for (nvml::Device d : gpus_) {
    for (unsigned int link = 0; link < links_; ++link) {
      nvml::EnableState state = 0;
      ok += fn.device_get_nvlink_state(d, link, &state) == nvml::kSuccess;
      sink_ += static_cast<uint64_t>(state);
      for (nvml::NvLinkErrorCounter c :
           {nvml::kDlReplay, nvml::kDlRecovery, nvml::kDlCrcFlit, nvml::kDlCrcData}) {
        unsigned long long v = 0;
        ok += fn.device_get_nvlink_error_counter(d, link, c, &v) == nvml::kSuccess;
        sink_ += v;
      }
    }
  }
  return ok;
}

size_t DumpReadLoop::Cycle() {
  size_t bytes = 0;
  DIR* dir = ::opendir(dir_.c_str());
  if (dir == nullptr) return 0;
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string path = absl::StrCat(dir_, "/", e->d_name);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    ssize_t n = ::pread(fd, buf_.data(), buf_.size(), 0);
    if (n > 0) bytes += static_cast<size_t>(n);
    ::close(fd);
  }
  ::closedir(dir);
  return bytes;
}

double SyscallNanos(int n) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0 || n <= 0) return 0;
  timespec a{}, b{};
  int pending = 0;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
  for (int i = 0; i < n; ++i) ::ioctl(p[0], FIONREAD, &pending);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
  ::close(p[0]);
  ::close(p[1]);
  const double ns = (b.tv_sec - a.tv_sec) * 1e9 + static_cast<double>(b.tv_nsec - a.tv_nsec);
  return ns / n;
}

}  // namespace ringside::bench
