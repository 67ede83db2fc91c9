// Our own declarations of the NCCL profiler plugin ABI, versions 4 to 6, written from
// ../shared/reference/nccl-profiler-abi.md (no NVIDIA header is used). Only what ringside reads is
// declared member by member; every layout is pinned with static_asserts on LP64 offsets and sizes,
// so a wrong declaration fails to compile instead of corrupting a training process
// (tests/collectors/nccl_profiler_abi_test.cc checks the same offsets at run time).
//
// Only versions that released NCCL ships are declared: profiler_v4.h (2.27), v5 (2.28), v6 (2.29,
// 2.30; the newest in the release tags up to v2.30.7-1). There is no v7 here on purpose: the v7
// layouts in circulation differ (NVIDIA's 2.31 source, ROCm's, an unmerged NVIDIA pull request),
// and NCCL binds the newest table a plugin exports, so a guessed v7 would be read with another
// layout. A NCCL that knows v7 binds our v6 through its adapter.
//
// What differs between the versions we export:
//   - descriptor `type`: uint8_t in v4, uint64_t from v5 on;
//   - init argument order: v4 (ctx, mask*, commName, commHash, ...) versus v5+ (ctx, commId, mask*,
//     commName, ...);
//   - v5 adds parentGroup to Coll and P2p; v6 adds the copy-engine events (CeColl, CeSync,
//     CeBatch) as new union members, every v5 offset unchanged.
// The Coll fields ringside reads (seqNumber .. proto) and the KernelCh fields sit at the same
// offsets in all three versions.
#ifndef RINGSIDE_COLLECTORS_NCCL_PLUGIN_PROFILER_ABI_H_
#define RINGSIDE_COLLECTORS_NCCL_PLUGIN_PROFILER_ABI_H_

#include <cstddef>
#include <cstdint>

namespace ringside::collectors::nccl_abi {

// ncclResult_t is an int-sized enum; 0 is success. The plugin returns nothing else.
using Result = int;
inline constexpr Result kSuccess = 0;

// ncclDebugLogger_t: (level, subsystem flags, file, line, printf format, ...).
using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line,
                             const char* fmt, ...);
inline constexpr int kLogWarn = 2;
inline constexpr int kLogInfo = 3;
inline constexpr unsigned long kLogSubsysProfile = 16384;

// Event type bits (`type` holds exactly one).
inline constexpr uint64_t kEventGroup = 1u << 0;
inline constexpr uint64_t kEventColl = 1u << 1;
inline constexpr uint64_t kEventP2p = 1u << 2;
inline constexpr uint64_t kEventProxyOp = 1u << 3;
inline constexpr uint64_t kEventProxyStep = 1u << 4;
inline constexpr uint64_t kEventProxyCtrl = 1u << 5;
inline constexpr uint64_t kEventKernelCh = 1u << 6;
inline constexpr uint64_t kEventNetPlugin = 1u << 7;
inline constexpr uint64_t kEventGroupApi = 1u << 8;
inline constexpr uint64_t kEventCollApi = 1u << 9;
inline constexpr uint64_t kEventP2pApi = 1u << 10;
inline constexpr uint64_t kEventKernelLaunch = 1u << 11;
inline constexpr uint64_t kEventCeColl = 1u << 12;   // v6+
inline constexpr uint64_t kEventCeSync = 1u << 13;   // v6+
inline constexpr uint64_t kEventCeBatch = 1u << 14;  // v6+

// ncclProfilerEventState_t is an int-sized enum; the one state ringside reads:
inline constexpr int kStateKernelChStop = 22;  // eStateArgs->pTimer = GPU stop time (ns)

// --- Union members -------------------------------------------------------------------------------
// Offsets below are from the start of the member; the member starts at descriptor offset 24.

// The Coll prefix shared by v4..v6.
struct CollV4 {
  uint64_t seq_number;    // 0  (descriptor 24)
  const char* func;       // 8  (32)
  const void* send_buff;  // 16 (40)
  void* recv_buff;        // 24 (48)
  size_t count;           // 32 (56)
  int root;               // 40 (64)
  const char* datatype;   // 48 (72)
  uint8_t n_channels;     // 56 (80)
  uint8_t n_warps;        // 57 (81)
  const char* algo;       // 64 (88)
  const char* proto;      // 72 (96)
};
struct CollV5 {
  CollV4 v4;           // 0..79
  void* parent_group;  // 80 (104)
};

// The v4 prefix of any version's Coll member.
inline const CollV4& CollPrefix(const CollV4& c) { return c; }
inline const CollV4& CollPrefix(const CollV5& c) { return c.v4; }

struct P2pV4 {
  const char* func;      // 0 (24)
  void* buff;            // 8 (32)
  const char* datatype;  // 16 (40)
  size_t count;          // 24 (48)
  int peer;              // 32 (56)
  uint8_t n_channels;    // 36 (60)
};
struct P2pV5 {
  P2pV4 v4;            // 0..39
  void* parent_group;  // 40 (64)
};

// v6 copy-engine collective (ncclProfileCeColl): no kernel, so no KernelCh children. The fields up
// to datatype sit where Coll has them; ceSeqNum is the communicator's copy-engine counter, which is
// not the kernel path's Coll seqNumber counter.
struct CeCollV6 {
  uint64_t seq_number;        // 0  (24)
  const char* func;           // 8  (32)
  const void* send_buff;      // 16 (40)
  void* recv_buff;            // 24 (48)
  size_t count;               // 32 (56)
  int root;                   // 40 (64)
  const char* datatype;       // 48 (72)
  const char* sync_strategy;  // 56 (80): "MC" (multicast) or "UC"
  bool intra_batch_sync;      // 64 (88)
  uint32_t batch_size;        // 68 (92)
  uint32_t num_batches;       // 72 (96)
  uint32_t ce_seq_num;        // 76 (100)
  void* stream;               // 80 (104)
};

struct KernelCh {
  uint8_t channel_id;  // 0 (24)
  uint64_t p_timer;    // 8 (32): GPU %globaltimer at channel start, ns (v4+)
};

// --- Descriptors ---------------------------------------------------------------------------------

struct EventDescrV4 {
  uint8_t type;      // 0
  void* parent_obj;  // 8: the plugin's own handle of the parent, or NULL
  int rank;          // 16
  union {
    CollV4 coll;
    P2pV4 p2p;
    KernelCh kernel_ch;
  };  // 24
};

struct EventDescrV5 {
  uint64_t type;     // 0
  void* parent_obj;  // 8
  int rank;          // 16
  union {
    CollV5 coll;
    P2pV5 p2p;
    KernelCh kernel_ch;
  };  // 24
};

struct EventDescrV6 {
  uint64_t type;     // 0
  void* parent_obj;  // 8
  int rank;          // 16
  union {
    CollV5 coll;  // unchanged from v5
    P2pV5 p2p;
    KernelCh kernel_ch;
    CeCollV6 ce_coll;
  };  // 24
};

// The state-argument union (v4..v6): 8 bytes, every member at offset 0.
union StateArgs {
  size_t trans_size;           // ProxyStep
  int appended_proxy_ops;      // ProxyCtrl
  void* net_plugin_data;       // NetPlugin
  uint64_t kernel_ch_p_timer;  // KernelCh stop (state 22)
};

// --- Function tables (6 pointers, 48 bytes) ------------------------------------------------------

struct ProfilerV4 {
  const char* name;
  Result (*init)(void** context, int* e_activation_mask, const char* comm_name, uint64_t comm_hash,
                 int n_nodes, int nranks, int rank, DebugLogger logfn);
  Result (*start_event)(void* context, void** e_handle, EventDescrV4* e_descr);
  Result (*stop_event)(void* e_handle);
  Result (*record_event_state)(void* e_handle, int e_state, StateArgs* e_state_args);
  Result (*finalize)(void* context);
};

template <typename Descr>
struct ProfilerV5Plus {
  const char* name;
  // v5+: commId moves before the mask pointer, and commHash is gone from the tail.
  Result (*init)(void** context, uint64_t comm_id, int* e_activation_mask, const char* comm_name,
                 int n_nodes, int nranks, int rank, DebugLogger logfn);
  Result (*start_event)(void* context, void** e_handle, Descr* e_descr);
  Result (*stop_event)(void* e_handle);
  Result (*record_event_state)(void* e_handle, int e_state, StateArgs* e_state_args);
  Result (*finalize)(void* context);
};
using ProfilerV5 = ProfilerV5Plus<EventDescrV5>;
using ProfilerV6 = ProfilerV5Plus<EventDescrV6>;

// --- Layout checks (LP64: x86-64 and aarch64 Linux) ----------------------------------------------

static_assert(sizeof(void*) == 8, "the NCCL profiler ABI is declared for LP64 only");
static_assert(sizeof(CollV4) == 80 && sizeof(CollV5) == 88);
static_assert(sizeof(P2pV4) == 40 && sizeof(P2pV5) == 48);
static_assert(sizeof(CeCollV6) == 88 && sizeof(KernelCh) == 16);
static_assert(offsetof(EventDescrV4, type) == 0);
static_assert(offsetof(EventDescrV4, parent_obj) == 8);
static_assert(offsetof(EventDescrV4, rank) == 16);
static_assert(offsetof(EventDescrV4, coll) == 24);
static_assert(offsetof(CollV4, seq_number) == 0);
static_assert(offsetof(CollV4, func) == 8);
static_assert(offsetof(CollV4, send_buff) == 16);
static_assert(offsetof(CollV4, recv_buff) == 24);
static_assert(offsetof(CollV4, count) == 32);
static_assert(offsetof(CollV4, root) == 40);
static_assert(offsetof(CollV4, datatype) == 48);
static_assert(offsetof(CollV4, n_channels) == 56);
static_assert(offsetof(CollV4, n_warps) == 57);
static_assert(offsetof(CollV4, algo) == 64);
static_assert(offsetof(CollV4, proto) == 72);
static_assert(offsetof(CollV5, parent_group) == 80);
static_assert(offsetof(P2pV4, func) == 0);
static_assert(offsetof(P2pV4, buff) == 8);
static_assert(offsetof(P2pV4, datatype) == 16);
static_assert(offsetof(P2pV4, count) == 24);
static_assert(offsetof(P2pV4, peer) == 32);
static_assert(offsetof(P2pV4, n_channels) == 36);
static_assert(offsetof(P2pV5, parent_group) == 40);
static_assert(offsetof(KernelCh, channel_id) == 0);
static_assert(offsetof(KernelCh, p_timer) == 8);
static_assert(offsetof(CeCollV6, seq_number) == 0);
static_assert(offsetof(CeCollV6, datatype) == 48);
static_assert(offsetof(CeCollV6, sync_strategy) == 56);
static_assert(offsetof(CeCollV6, intra_batch_sync) == 64);
static_assert(offsetof(CeCollV6, batch_size) == 68);
static_assert(offsetof(CeCollV6, num_batches) == 72);
static_assert(offsetof(CeCollV6, ce_seq_num) == 76);
static_assert(offsetof(CeCollV6, stream) == 80);
static_assert(sizeof(EventDescrV4) == 104);
static_assert(offsetof(EventDescrV5, type) == 0 && offsetof(EventDescrV5, parent_obj) == 8 &&
              offsetof(EventDescrV5, rank) == 16 && offsetof(EventDescrV5, coll) == 24);
static_assert(sizeof(EventDescrV5) == 112);
static_assert(offsetof(EventDescrV6, coll) == 24 && offsetof(EventDescrV6, ce_coll) == 24);
static_assert(sizeof(EventDescrV6) == 112);
static_assert(sizeof(StateArgs) == 8);
static_assert(sizeof(ProfilerV4) == 48 && alignof(ProfilerV4) == 8);
static_assert(sizeof(ProfilerV5) == 48 && offsetof(ProfilerV5, finalize) == 40);
static_assert(sizeof(ProfilerV6) == 48 && offsetof(ProfilerV6, finalize) == 40);

}  // namespace ringside::collectors::nccl_abi

#endif  // RINGSIDE_COLLECTORS_NCCL_PLUGIN_PROFILER_ABI_H_
