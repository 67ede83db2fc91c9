#include "sim/job_runner.h"

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "sim/job_model.h"
#include "sim/nccl_driver.h"

namespace ringside::sim {
namespace {

int64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void SleepUntil(int64_t unix_ns, volatile std::sig_atomic_t* stop) {
  while (!*stop) {
    const int64_t left = unix_ns - NowNs();
    if (left <= 0) return;
    const int64_t chunk = std::min<int64_t>(left, 200'000'000);
    struct timespec ts = {static_cast<time_t>(chunk / 1000000000),
                          static_cast<long>(chunk % 1000000000)};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace

int RunRankJob(const Scenario& s, int rank, const std::string& plugin, const std::string& socket,
               int64_t t0_ns, volatile std::sig_atomic_t* stop) {
  setenv("RINGSIDE_SOCKET", socket.c_str(), 1);
  setenv("RINGSIDE_JOB_ID", s.job_id.c_str(), 1);
  absl::StatusOr<std::unique_ptr<NcclDriver>> driver = NcclDriver::Load(plugin);
  if (!driver.ok()) {
    std::fprintf(stderr, "ringside-sim rank %d: %s\n", rank, driver.status().ToString().c_str());
    return 1;
  }
  constexpr uint64_t kCommId = 0x51a1c0ffee000001ull;
  void* ctx = (*driver)->Init(kCommId, "world", s.ranks(), rank, s.nodes);
  JobModel model(s, t0_ns);
  const int64_t end_ns = t0_ns + absl::ToInt64Nanoseconds(s.duration);
  SimCollective c;
  c.function = "AllReduce";
  c.count = 64 << 20;  // 128 MiB of bf16 gradients per bucket
  c.datatype = "ncclBfloat16";
  c.channels = 4;
  while (!*stop) {
    const Iteration& it = model.Next();
    if (it.end_ns > end_ns) break;
    // Reported once the collective is over, as NCCL's proxy thread sees the kernels end.
    SleepUntil(it.end_ns + 1'000'000, stop);
    if (*stop) break;
    c.seq = it.index;
    c.kernel_start_ns = static_cast<uint64_t>(it.arrive_ns[rank]);
    c.kernel_stop_ns = static_cast<uint64_t>(it.stop_ns[rank]);
    (*driver)->Collective(ctx, rank, c);
  }
  (*driver)->Finalize(ctx);
  return 0;
}

}  // namespace ringside::sim
