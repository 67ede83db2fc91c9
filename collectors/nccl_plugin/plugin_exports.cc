// The three function tables NCCL looks up with dlsym (newest first: NCCL 2.29/2.30 try "_v6",
// 2.28 "_v5", 2.27 "_v4", then the older ones we do not export): global data objects with C
// linkage, default visibility and static initialisation. They are the only symbols
// libringside_nccl.so exports (exports.map). Each version's functions adapt its descriptor (type
// width, the v6 copy-engine member) and init argument order to plugin_core.h. Only versions of
// released NCCL are exported (profiler_abi.h says why there is no v7).
#include "collectors/nccl_plugin/plugin_core.h"
#include "collectors/nccl_plugin/profiler_abi.h"

namespace ringside::collectors {
namespace {

namespace abi = nccl_abi;

constexpr char kPluginName[] = "ringside";

abi::Result InitV4(void** context, int* mask, const char* comm_name, uint64_t comm_hash,
                   int n_nodes, int nranks, int rank, abi::DebugLogger logfn) noexcept {
  return PluginInit(4, context, comm_hash, mask, comm_name, n_nodes, nranks, rank, logfn);
}

template <int kVersion>
abi::Result InitV5Plus(void** context, uint64_t comm_id, int* mask, const char* comm_name,
                       int n_nodes, int nranks, int rank, abi::DebugLogger logfn) noexcept {
  return PluginInit(kVersion, context, comm_id, mask, comm_name, n_nodes, nranks, rank, logfn);
}

// The copy-engine member exists from v6 on.
inline const abi::CeCollV6* CeColl(const abi::EventDescrV4&) { return nullptr; }
inline const abi::CeCollV6* CeColl(const abi::EventDescrV5&) { return nullptr; }
inline const abi::CeCollV6* CeColl(const abi::EventDescrV6& d) { return &d.ce_coll; }

template <typename Descr>
abi::Result StartEvent(void* context, void** handle, Descr* descr) noexcept {
  if (descr == nullptr) {
    if (handle != nullptr) *handle = nullptr;
    return abi::kSuccess;
  }
  // v4 has a uint8_t type, v5+ a uint64_t: the member's own type reads the right width.
  EventView view{static_cast<uint64_t>(descr->type), descr->parent_obj,
                 &abi::CollPrefix(descr->coll), &descr->kernel_ch, CeColl(*descr)};
  return PluginStartEvent(context, handle, view);
}

abi::Result StopEvent(void* handle) noexcept { return PluginStopEvent(handle); }

abi::Result RecordEventState(void* handle, int state, abi::StateArgs* args) noexcept {
  return PluginRecordEventState(handle, state, args);
}

abi::Result Finalize(void* context) noexcept { return PluginFinalize(context); }

}  // namespace
}  // namespace ringside::collectors

namespace rc = ringside::collectors;

extern "C" {

__attribute__((visibility("default"))) rc::nccl_abi::ProfilerV4 ncclProfiler_v4 = {
    rc::kPluginName, &rc::InitV4,           &rc::StartEvent<rc::nccl_abi::EventDescrV4>,
    &rc::StopEvent,  &rc::RecordEventState, &rc::Finalize,
};

__attribute__((visibility("default"))) rc::nccl_abi::ProfilerV5 ncclProfiler_v5 = {
    rc::kPluginName, &rc::InitV5Plus<5>,    &rc::StartEvent<rc::nccl_abi::EventDescrV5>,
    &rc::StopEvent,  &rc::RecordEventState, &rc::Finalize,
};

__attribute__((visibility("default"))) rc::nccl_abi::ProfilerV6 ncclProfiler_v6 = {
    rc::kPluginName, &rc::InitV5Plus<6>,    &rc::StartEvent<rc::nccl_abi::EventDescrV6>,
    &rc::StopEvent,  &rc::RecordEventState, &rc::Finalize,
};

}  // extern "C"
