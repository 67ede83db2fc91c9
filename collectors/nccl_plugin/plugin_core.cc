#include "collectors/nccl_plugin/plugin_core.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "collectors/common/pci_bus_id.h"
#include "collectors/nccl_plugin/cuda_device.h"
#include "collectors/nccl_plugin/event_pool.h"
#include "collectors/nccl_plugin/identity.h"
#include "collectors/nccl_plugin/plugin_state.h"
#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/sender.h"

namespace ringside::collectors {

constinit PluginShared g_shared;

namespace {

using nccl_abi::kSuccess;
using nccl_abi::Result;

// The first 8 bytes of every object the plugin hands to NCCL: what it is (the reference asks for
// this so a child can inspect its parentObj), and 0 once it went back to its pool.
constexpr uint64_t kTagContext = 0x7273'6e63'636c'0001;  // "rsnccl" + kind
constexpr uint64_t kTagGroup = 0x7273'6e63'636c'0002;
constexpr uint64_t kTagColl = 0x7273'6e63'636c'0003;
constexpr uint64_t kTagChannel = 0x7273'6e63'636c'0004;

constexpr uint64_t kNoKernelStart = ~uint64_t{0};
constexpr int64_t kFinalizeFlushTimeoutNs = 2'000'000'000;
constexpr int64_t kUnloadFlushTimeoutNs = 500'000'000;
constexpr char kDefaultSocket[] = "/run/ringside/collectives.sock";
constexpr char kCopyEngineAlgorithm[] = "CE";  // the algorithm of a v6 CeColl record

struct Context {
  uint64_t tag = kTagContext;
  // One for init..finalize, one per Coll event still in flight: freed at zero.
  std::atomic<int64_t> refs{1};
  int* mask = nullptr;
  uint64_t comm_id = 0;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  // The communicator's GPU as the process numbers it (CurrentCudaDevice at init), -1 when no CUDA
  // library answered: then the rank is what tells this process's GPUs apart. In every record
  // (format version 3; docs/collective-record.md, "GPU identity").
  int cuda_device = -1;
  FixedString<kCommNameSize> comm_name;
  FixedString<kJobIdSize> job_id;
};

struct CollEvent {
  std::atomic<uint64_t> tag{0};  // read by IsColl() while another thread may free the event
  std::atomic<int32_t> refs{0};
  std::atomic<uint32_t> channels_started{0};
  uint32_t channels_expected = 0;
  uint16_t channels = 0;
  Context* ctx = nullptr;
  uint64_t seq = 0;
  uint64_t bytes = 0;
  int64_t enqueue_ns = 0;
  std::atomic<uint64_t> kernel_start{0};
  std::atomic<uint64_t> kernel_stop{0};
  FixedString<kFunctionSize> function;
  FixedString<kAlgorithmSize> algorithm;
  FixedString<kProtocolSize> protocol;
};

struct ChannelEvent {
  std::atomic<uint64_t> tag{0};
  CollEvent* parent = nullptr;
  uint64_t start = 0;
  uint64_t stop = 0;
};

struct GroupHandle {
  uint64_t tag;
};

constinit GroupHandle g_group_handle{kTagGroup};
constinit EventPool<CollEvent, kMaxCollsInFlight> g_colls;
constinit EventPool<ChannelEvent, kMaxChannelsInFlight> g_channels;

pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
int g_active_contexts = 0;         // guarded by g_init_mu
bool g_atfork_registered = false;  // guarded by g_init_mu
// Set in a fork child whose parent had a sender thread: the next completed record starts one.
std::atomic<bool> g_restart_sender{false};

inline bool IsColl(const void* p) noexcept {
  return p != nullptr && g_colls.Owns(p) &&
         static_cast<const CollEvent*>(p)->tag.load(std::memory_order_relaxed) == kTagColl;
}
inline bool IsChannel(const void* p) noexcept {
  return p != nullptr && g_channels.Owns(p) &&
         static_cast<const ChannelEvent*>(p)->tag.load(std::memory_order_relaxed) == kTagChannel;
}

void AtomicMin(std::atomic<uint64_t>& a, uint64_t v) noexcept {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
void AtomicMax(std::atomic<uint64_t>& a, uint64_t v) noexcept {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

void ReleaseContext(Context* ctx) noexcept {
  if (ctx->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    ctx->tag = 0;
    ctx->~Context();
    std::free(ctx);
  }
}

void MaybeRestartSender() noexcept {
  if (__builtin_expect(g_restart_sender.load(std::memory_order_relaxed), false)) {
    if (pthread_mutex_trylock(&g_init_mu) == 0) {
      if (g_restart_sender.exchange(false) && g_active_contexts > 0) g_sender.Start();
      pthread_mutex_unlock(&g_init_mu);
    }
  }
}

// Encodes the record of a completed collective. Every value is kept within what the decoder
// accepts, so the agent never has to reject a record of ours.
void EncodeCompleted(const CollEvent& e, const Context& ctx, uint8_t* out) noexcept {
  CollectiveRecordFields r;
  if (g_shared.clock_synchronized.load(std::memory_order_relaxed)) {
    r.flags |= kRecordFlagClockSynchronized;
  }
  const uint64_t start = e.kernel_start.load(std::memory_order_relaxed);
  const uint64_t stop = e.kernel_stop.load(std::memory_order_relaxed);
  if (start != kNoKernelStart && start > 0 && stop >= start &&
      stop <= static_cast<uint64_t>(kMaxUnixNanos) &&
      stop - start <= static_cast<uint64_t>(kMaxKernelNanos)) {
    r.flags |= kRecordFlagKernelTimes;
    r.kernel_start_unix_nanos = static_cast<int64_t>(start);
    r.kernel_stop_unix_nanos = static_cast<int64_t>(stop);
  }
  r.rank = ctx.rank;
  r.nranks = ctx.nranks;
  r.pid = g_shared.pid.load(std::memory_order_relaxed);
  r.comm_id = ctx.comm_id;
  r.seq = e.seq;
  r.bytes = e.bytes;
  r.enqueue_unix_nanos = e.enqueue_ns;
  r.channels = e.channels;
  r.cuda_device = ctx.cuda_device;
  r.job_id = ctx.job_id;
  r.comm_name = ctx.comm_name;
  r.host = g_shared.host;
  r.function = e.function;
  r.algorithm = e.algorithm;
  r.protocol = e.protocol;
  EncodeRecord(r, out);
}

void Complete(CollEvent* e) noexcept {
  MaybeRestartSender();
  Context* ctx = e->ctx;
  const bool queued = g_shared.ring.TryPush([&](uint8_t* out) { EncodeCompleted(*e, *ctx, out); });
  if (!queued) g_shared.dropped.fetch_add(1, std::memory_order_relaxed);
  e->tag.store(0, std::memory_order_relaxed);
  g_colls.Free(e);
  ReleaseContext(ctx);
}

inline void ReleaseColl(CollEvent* e) noexcept {
  if (e->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) Complete(e);
}

Result StartColl(Context* ctx, void** handle, const nccl_abi::CollV4& c) noexcept {
  CollEvent* e = g_colls.Alloc();
  if (e == nullptr) {
    g_shared.dropped.fetch_add(1, std::memory_order_relaxed);
    return kSuccess;
  }
  ctx->refs.fetch_add(1, std::memory_order_relaxed);
  e->ctx = ctx;
  e->seq = c.seq_number;
  const uint64_t bytes = static_cast<uint64_t>(c.count) * DatatypeSize(c.datatype);
  e->bytes = bytes <= kMaxBytes && (c.count == 0 || bytes / c.count <= 8) ? bytes : 0;
  e->channels = c.n_channels;
  e->enqueue_ns = RealtimeNanos();
  if (c.func != nullptr && c.func[0] != '\0') {
    e->function.Set(c.func);
  } else {
    e->function.Set("unknown");
  }
  e->algorithm.Set(c.algo);
  e->protocol.Set(c.proto);
  // NCCL sends one KernelCh per channel only while KernelCh is in the activation mask.
  const bool kernel_ch = (__atomic_load_n(ctx->mask, __ATOMIC_RELAXED) &
                          static_cast<int>(nccl_abi::kEventKernelCh)) != 0;
  e->channels_expected = kernel_ch ? c.n_channels : 0;
  e->channels_started.store(0, std::memory_order_relaxed);
  e->kernel_start.store(kNoKernelStart, std::memory_order_relaxed);
  e->kernel_stop.store(0, std::memory_order_relaxed);
  e->refs.store(1 + static_cast<int32_t>(e->channels_expected), std::memory_order_relaxed);
  e->tag.store(kTagColl, std::memory_order_release);
  *handle = e;
  return kSuccess;
}

// A v6 copy-engine collective: no kernel runs, so no KernelCh follows; NCCL stops it once the
// copies are enqueued, which completes the record (enqueue time, bytes, no kernel times).
Result StartCeColl(Context* ctx, void** handle, const nccl_abi::CeCollV6& c) noexcept {
  CollEvent* e = g_colls.Alloc();
  if (e == nullptr) {
    g_shared.dropped.fetch_add(1, std::memory_order_relaxed);
    return kSuccess;
  }
  ctx->refs.fetch_add(1, std::memory_order_relaxed);
  e->ctx = ctx;
  e->seq = c.seq_number;
  const uint64_t bytes = static_cast<uint64_t>(c.count) * DatatypeSize(c.datatype);
  e->bytes = bytes <= kMaxBytes && (c.count == 0 || bytes / c.count <= 8) ? bytes : 0;
  e->channels = 0;
  e->enqueue_ns = RealtimeNanos();
  e->function.Set(c.func != nullptr && c.func[0] != '\0' ? c.func : "unknown");
  e->algorithm.Set(kCopyEngineAlgorithm);
  e->protocol.Set(c.sync_strategy);
  e->channels_expected = 0;
  e->channels_started.store(0, std::memory_order_relaxed);
  e->kernel_start.store(kNoKernelStart, std::memory_order_relaxed);
  e->kernel_stop.store(0, std::memory_order_relaxed);
  e->refs.store(1, std::memory_order_relaxed);
  e->tag.store(kTagColl, std::memory_order_release);
  *handle = e;
  return kSuccess;
}

Result StartKernelCh(void** handle, void* parent, const nccl_abi::KernelCh& k) noexcept {
  if (!IsColl(parent)) return kSuccess;  // a P2p or untracked parent
  CollEvent* e = static_cast<CollEvent*>(parent);
  if (e->channels_started.fetch_add(1, std::memory_order_relaxed) >= e->channels_expected) {
    return kSuccess;  // more channels than announced: they cannot be counted safely
  }
  ChannelEvent* ch = g_channels.Alloc();
  if (ch == nullptr) {
    // No room to follow this channel: take its start, and let the Coll complete without it.
    if (k.p_timer != 0) AtomicMin(e->kernel_start, k.p_timer);
    ReleaseColl(e);
    return kSuccess;
  }
  ch->parent = e;
  ch->start = k.p_timer;
  ch->stop = 0;
  ch->tag.store(kTagChannel, std::memory_order_release);
  *handle = ch;
  return kSuccess;
}

void AtforkPrepare() noexcept { pthread_mutex_lock(&g_init_mu); }
void AtforkParent() noexcept { pthread_mutex_unlock(&g_init_mu); }
void AtforkChild() noexcept {
  // Another thread of the parent may have been half-way through a push: start the ring afresh.
  // The parent's pending records and drops are the parent's to report.
  g_shared.pid.store(static_cast<uint32_t>(::getpid()), std::memory_order_relaxed);
  g_shared.ring.Reset();
  g_shared.dropped.store(0, std::memory_order_relaxed);
  const bool was_running = g_sender.ForkChild();
  g_restart_sender.store(was_running && g_active_contexts > 0, std::memory_order_relaxed);
  pthread_mutex_unlock(&g_init_mu);
}

// Runs when the library is unloaded (dlclose after the last finalize) or at process exit: a
// process that exits without destroying its communicators still sends what is queued.
__attribute__((destructor)) void PluginUnload() noexcept {
  if (pthread_mutex_trylock(&g_init_mu) != 0) return;
  if (g_sender.running()) {
    if (g_sender.connected()) g_sender.Flush(kUnloadFlushTimeoutNs);
    g_sender.Stop();
  }
  pthread_mutex_unlock(&g_init_mu);
}

}  // namespace

Result PluginInit(int abi_version, void** context, uint64_t comm_id, int* mask,
                  const char* comm_name, int n_nodes, int nranks, int rank,
                  nccl_abi::DebugLogger logfn) noexcept {
  if (context == nullptr) return kSuccess;
  *context = nullptr;
  if (mask == nullptr || nranks <= 0 || rank < 0 || rank >= nranks ||
      static_cast<uint32_t>(nranks) > kMaxRanks) {
    if (logfn != nullptr) {
      logfn(nccl_abi::kLogWarn, nccl_abi::kLogSubsysProfile, __FILE__, __LINE__,
            "ringside: profiler disabled for this communicator (rank %d of %d)", rank, nranks);
    }
    return kSuccess;  // NCCL then calls startEvent(NULL, ...) and skips finalize
  }
  void* memory = std::calloc(1, sizeof(Context));
  if (memory == nullptr) return kSuccess;
  Context* ctx = new (memory) Context();
  ctx->mask = mask;
  ctx->comm_id = comm_id;
  ctx->rank = static_cast<uint32_t>(rank);
  ctx->nranks = static_cast<uint32_t>(nranks);
  ctx->comm_name.Set(comm_name);
  ResolveJobId(comm_name, comm_id, &ctx->job_id);
  const CudaDevice device = CurrentCudaDevice();  // before any lock: it takes the loader's
  ctx->cuda_device = device.ordinal;
  // Its PCI address (format version 4), so the agent maps the rank to the GPU NVML names.
  char bus_id[64] = {};
  GpuSlot slot;
  PciAddress address;
  if (CudaPciBusId(device.ordinal, bus_id, sizeof(bus_id)) &&
      ParsePciAddress(bus_id, sizeof(bus_id), &address)) {
    slot = GpuSlot{true, address.domain, address.bus, address.device, address.function};
  }
  char bus_id_sysfs[kPciBusIdSize] = "-";
  if (slot.present) {
    FormatPciAddress(address, bus_id_sysfs, sizeof(bus_id_sysfs));
    if (device.ordinal < static_cast<int>(kMaxGpuSlots)) {
      g_shared.gpu_slots[device.ordinal].store(PackGpuSlot(slot), std::memory_order_relaxed);
    }
  }

  const char* pod_problem = nullptr;
  const char* cgroup_problem = nullptr;
  pthread_mutex_lock(&g_init_mu);
  if (!g_atfork_registered) {
    g_atfork_registered = pthread_atfork(AtforkPrepare, AtforkParent, AtforkChild) == 0;
  }
  if (!g_sender.running()) {
    // First communicator (or the first since the last finalize): process identity and where to
    // send, read here and never on the hot path.
    g_shared.pid.store(static_cast<uint32_t>(::getpid()), std::memory_order_relaxed);
    HostName(&g_shared.host);
    g_shared.clock_synchronized.store(SystemClockSynchronized(), std::memory_order_relaxed);
    if (!JobIdFromEnvironment(&g_shared.batch_job)) g_shared.batch_job = ctx->job_id;
    pod_problem = PodFromEnvironment(&g_shared.pod, &g_shared.pod_namespace);
    // $RINGSIDE_PROC_SELF_CGROUP stands for /proc/self/cgroup (the simulator gives each rank one).
    const char* cgroup_file = ::getenv("RINGSIDE_PROC_SELF_CGROUP");
    cgroup_problem = CgroupFromProc(
        &g_shared.cgroup,
        cgroup_file != nullptr && cgroup_file[0] != '\0' ? cgroup_file : "/proc/self/cgroup");
    const char* path = ::getenv("RINGSIDE_SOCKET");
    g_sender.SetSocketPath(path != nullptr && path[0] != '\0' ? path : kDefaultSocket);
  }
  ++g_active_contexts;
  g_restart_sender.store(false, std::memory_order_relaxed);
  const bool sending = g_sender.Start();
  const char* socket = g_sender.socket_path();
  FixedString<kPodNamespaceSize> pod_namespace = g_shared.pod_namespace;  // for the log line
  FixedString<kPodSize> pod = g_shared.pod;
  pthread_mutex_unlock(&g_init_mu);
  if (pod_problem != nullptr && pod_problem[0] != '\0' && logfn != nullptr) {
    // POD_* set but unusable: records go out without a pod.
    logfn(nccl_abi::kLogWarn, nccl_abi::kLogSubsysProfile, __FILE__, __LINE__, "ringside: %s",
          pod_problem);
  }
  if (cgroup_problem != nullptr && cgroup_problem[0] != '\0' && logfn != nullptr) {
    logfn(nccl_abi::kLogInfo, nccl_abi::kLogSubsysProfile, __FILE__, __LINE__, "ringside: %s",
          cgroup_problem);
  }

  __atomic_store_n(mask, abi_version >= 6 ? kActivationMaskV6 : kActivationMask,
                   __ATOMIC_RELAXED);
  if (logfn != nullptr) {
    logfn(nccl_abi::kLogInfo, nccl_abi::kLogSubsysProfile, __FILE__, __LINE__,
          "ringside: NCCL profiler v%d, comm %016llx \"%s\" rank %d/%d (%d nodes), cuda device "
          "%d (%s) pci %s, job \"%s\", pod %s%s%s, records to %s%s",
          abi_version, static_cast<unsigned long long>(comm_id), ctx->comm_name.c_str(), rank,
          nranks, n_nodes, ctx->cuda_device, CudaDeviceSourceName(device.source), bus_id_sysfs,
          ctx->job_id.c_str(), pod.empty() ? "-" : pod_namespace.c_str(), pod.empty() ? "" : "/",
          pod.c_str(), socket[0] != '\0' ? socket : "(path too long)",
          sending ? "" : " (no sender thread: records are dropped)");
  }
  *context = ctx;
  return kSuccess;
}

Result PluginStartEvent(void* context, void** handle, const EventView& ev) noexcept {
  if (handle == nullptr) return kSuccess;
  *handle = nullptr;
  if (context == nullptr) return kSuccess;
  Context* ctx = static_cast<Context*>(context);
  switch (ev.type) {
    case nccl_abi::kEventGroup:
      *handle = &g_group_handle;
      return kSuccess;
    case nccl_abi::kEventColl:
      return StartColl(ctx, handle, *ev.coll);
    case nccl_abi::kEventKernelCh:
      return StartKernelCh(handle, ev.parent_obj, *ev.kernel_ch);
    case nccl_abi::kEventCeColl:
      if (ev.ce_coll == nullptr) return kSuccess;  // not a v6+ descriptor
      return StartCeColl(ctx, handle, *ev.ce_coll);
    default:
      return kSuccess;  // P2p, proxy, API and other events: not recorded
  }
}

Result PluginStopEvent(void* handle) noexcept {
  if (handle == nullptr) return kSuccess;
  if (IsColl(handle)) {
    ReleaseColl(static_cast<CollEvent*>(handle));
  } else if (IsChannel(handle)) {
    ChannelEvent* ch = static_cast<ChannelEvent*>(handle);
    CollEvent* e = ch->parent;
    if (ch->start != 0) AtomicMin(e->kernel_start, ch->start);
    if (ch->stop != 0) AtomicMax(e->kernel_stop, ch->stop);
    ch->tag.store(0, std::memory_order_relaxed);
    g_channels.Free(ch);
    ReleaseColl(e);
  }
  return kSuccess;
}

Result PluginRecordEventState(void* handle, int state, const nccl_abi::StateArgs* args) noexcept {
  if (state == nccl_abi::kStateKernelChStop && args != nullptr && IsChannel(handle)) {
    static_cast<ChannelEvent*>(handle)->stop = args->kernel_ch_p_timer;
  }
  return kSuccess;
}

Result PluginFinalize(void* context) noexcept {
  Context* ctx = static_cast<Context*>(context);
  if (ctx == nullptr || ctx->tag != kTagContext) return kSuccess;
  pthread_mutex_lock(&g_init_mu);
  if (g_active_contexts > 0) --g_active_contexts;
  if (g_active_contexts == 0) {
    // NCCL dlcloses the library after its last communicator: send what is queued (bounded wait,
    // none when no agent answers) and join the thread before the code goes away.
    g_sender.Flush(kFinalizeFlushTimeoutNs);
    g_sender.Stop();
    g_restart_sender.store(false, std::memory_order_relaxed);
  }
  pthread_mutex_unlock(&g_init_mu);
  ReleaseContext(ctx);
  return kSuccess;
}

}  // namespace ringside::collectors
