// The deterministic workload of nccl_plugin_driver, shared with nccl_plugin_test so the test can
// compute every expected record on its own: per world rank, two communicators ("world" over all
// ranks, and an unnamed pair communicator), and per collective its function, NCCL sequence number,
// count, datatype, algorithm, protocol, channels and each channel's GPU start/stop times.
#ifndef RINGSIDE_TESTS_COLLECTORS_NCCL_DRIVER_PLAN_H_
#define RINGSIDE_TESTS_COLLECTORS_NCCL_DRIVER_PLAN_H_

#include <cstddef>
#include <cstdint>

namespace ringside::testing::nccl_plan {

inline constexpr int kComms = 2;
inline constexpr int kMaxChannels = 32;

struct CommSpec {
  uint64_t comm_id;
  const char* name;  // nullptr: NCCL passes no name (the common case before ncclConfig_t.commName)
  int nranks;
  int rank;
};

inline CommSpec Comm(int comm, int world_rank, int world_size) {
  if (comm == 0) return {0x5151000000000001ull, "world", world_size, world_rank};
  return {0x5252000000000000ull + static_cast<uint64_t>(world_rank / 2), nullptr, 2,
          world_rank % 2};
}

struct CollSpec {
  const char* func;
  uint64_t seq;  // per communicator per function, 0-based
  size_t count;
  const char* datatype;
  uint64_t element_size;
  const char* algo;
  const char* proto;
  int channels;
  uint64_t start[kMaxChannels];
  uint64_t stop[kMaxChannels];
};

inline constexpr const char* kFuncs[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast"};
inline constexpr const char* kTypes[] = {"ncclFloat32", "ncclBfloat16", "ncclInt8", "ncclFloat64"};
inline constexpr uint64_t kTypeSizes[] = {4, 2, 1, 8};
inline constexpr const char* kAlgos[] = {"RING", "TREE"};
inline constexpr const char* kProtos[] = {"SIMPLE", "LL", "LL128"};

inline int FuncIndex(int comm, int i) { return (i + comm) % 4; }

inline CollSpec Coll(int comm, int i, int world_rank) {
  CollSpec c{};
  const int f = FuncIndex(comm, i);
  c.func = kFuncs[f];
  for (int j = 0; j < i; ++j) c.seq += FuncIndex(comm, j) == f ? 1 : 0;
  c.count = 1024 * static_cast<size_t>(i + 1) + static_cast<size_t>(comm);
  c.datatype = kTypes[i % 4];
  c.element_size = kTypeSizes[i % 4];
  c.algo = kAlgos[i % 2];
  c.proto = kProtos[i % 3];
  // 0 channels now and then (NCCL then sends no KernelCh), up to 32.
  c.channels = i % 7 == 6 ? 0 : 1 + (i * 5 + world_rank) % kMaxChannels;
  const uint64_t base = 1'700'000'000'000'000'000ull +
                        static_cast<uint64_t>(comm) * 1'000'000'000'000ull +
                        static_cast<uint64_t>(i) * 1'000'000'000ull;
  for (int ch = 0; ch < c.channels; ++ch) {
    // GPU globaltimer values are multiples of 32 ns or more; channel order is not time order.
    c.start[ch] = base + static_cast<uint64_t>(world_rank) * 1000 +
                  static_cast<uint64_t>((ch * 7) % c.channels) * 96;
    c.stop[ch] = c.start[ch] + 50'000 + static_cast<uint64_t>((ch * 13) % c.channels) * 64;
  }
  return c;
}

}  // namespace ringside::testing::nccl_plan

#endif  // RINGSIDE_TESTS_COLLECTORS_NCCL_DRIVER_PLAN_H_
