// Plays NCCL for the real profiler plugin (libringside_nccl.so) inside the simulator: dlopen,
// dlsym("ncclProfiler_v5"), init per communicator and rank, and per collective the calls NCCL
// makes — Group start, Coll start, Coll stop, Group stop, then per channel KernelCh start (GPU
// start time), state 22 (GPU stop time) and stop — with the kernel times the simulation chose.
// Descriptors are laid out from the offsets in ../shared/reference/nccl-profiler-abi.md (as
// tests/collectors/nccl_plugin_driver.cc does), not from the plugin's own headers.
#ifndef RINGSIDE_SIM_NCCL_DRIVER_H_
#define RINGSIDE_SIM_NCCL_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ringside::sim {

struct SimCollective {
  const char* function = "AllReduce";
  uint64_t seq = 0;  // per communicator per function
  size_t count = 0;
  const char* datatype = "ncclBfloat16";
  const char* algo = "RING";
  const char* proto = "SIMPLE";
  int channels = 4;
  uint64_t kernel_start_ns = 0;  // unix ns, earliest channel start
  uint64_t kernel_stop_ns = 0;   // unix ns, latest channel stop
};

class NcclDriver {
 public:
  // Loads the plugin; the plugin reads $RINGSIDE_SOCKET and $RINGSIDE_JOB_ID at its first init.
  static absl::StatusOr<std::unique_ptr<NcclDriver>> Load(const std::string& plugin_path);
  ~NcclDriver();

  // One communicator as one rank sees it; returns the plugin's context (null if it declined).
  void* Init(uint64_t comm_id, const char* comm_name, int nranks, int rank, int n_nodes);
  void Collective(void* ctx, int rank, const SimCollective& c);
  void Finalize(void* ctx);

 private:
  NcclDriver() = default;
  void* lib_ = nullptr;
  int mask_ = 0;  // NCCL's activation mask (the plugin holds a pointer to it)
  struct Table;
  std::unique_ptr<Table> table_;
};

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_NCCL_DRIVER_H_
