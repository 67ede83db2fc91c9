// The version-independent event handling of libringside_nccl.so. plugin_exports.cc adapts each
// exported ABI version (descriptor type width, init argument order) to these functions.
//
// Per communicator, init() creates a Context. Per collective:
//   Group start/stop          nothing to record (a static handle is returned)
//   Coll start                an event from a preallocated pool: seq, function, algorithm,
//                             protocol, channels, bytes (count × element size) and the host enqueue
//                             time; its reference count is 1 + the KernelCh children to expect
//   Coll stop                 drops the Coll's own reference ("enqueued", not "done")
//   KernelCh start            a channel event with the GPU start time (pTimer)
//   KernelCh state 22         the GPU stop time
//   KernelCh stop             folds start/stop into the Coll (earliest start, latest stop) and
//                             drops a reference
//   CeColl start (v6+)        like a Coll without channels: algorithm "CE", protocol the sync
//                             strategy ("MC"/"UC"), no kernel times; its stop completes it
// The thread that drops the last reference (whichever it is) encodes the record into the ring.
// Nothing here blocks, allocates, throws or makes a system call; a full ring or an empty pool
// drops the record and counts it.
#ifndef RINGSIDE_COLLECTORS_NCCL_PLUGIN_PLUGIN_CORE_H_
#define RINGSIDE_COLLECTORS_NCCL_PLUGIN_PLUGIN_CORE_H_

#include <cstdint>

#include "collectors/nccl_plugin/profiler_abi.h"

namespace ringside::collectors {

// What the version adapters pass in; the Coll fields are the v4 prefix shared by every version.
struct EventView {
  uint64_t type;
  void* parent_obj;
  const nccl_abi::CollV4* coll;         // valid when type == kEventColl
  const nccl_abi::KernelCh* kernel_ch;  // valid when type == kEventKernelCh
  const nccl_abi::CeCollV6* ce_coll;    // v6+, valid when type == kEventCeColl; else NULL
};

nccl_abi::Result PluginInit(int abi_version, void** context, uint64_t comm_id, int* mask,
                            const char* comm_name, int n_nodes, int nranks, int rank,
                            nccl_abi::DebugLogger logfn) noexcept;
nccl_abi::Result PluginStartEvent(void* context, void** handle, const EventView& event) noexcept;
nccl_abi::Result PluginStopEvent(void* handle) noexcept;
nccl_abi::Result PluginRecordEventState(void* handle, int state,
                                        const nccl_abi::StateArgs* args) noexcept;
nccl_abi::Result PluginFinalize(void* context) noexcept;

// The activation mask the plugin asks for: Coll and KernelCh (NCCL adds their Group parents).
inline constexpr int kActivationMask =
    static_cast<int>(nccl_abi::kEventColl | nccl_abi::kEventKernelCh);
// From v6 on, also CeColl: NCCL runs some collectives on the copy engines instead of a kernel and
// reports them only as CeColl, only while a CE bit is in the mask (never as Coll/KernelCh).
inline constexpr int kActivationMaskV6 =
    kActivationMask | static_cast<int>(nccl_abi::kEventCeColl);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NCCL_PLUGIN_PLUGIN_CORE_H_
