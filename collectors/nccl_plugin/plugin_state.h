// Process-wide state of libringside_nccl.so, shared by the event handlers (plugin_core.cc) and the
// sender thread (sender.cc). Everything lives in static storage, zero-initialised, so loading the
// library allocates nothing and untouched pools cost no memory.
#ifndef RINGSIDE_COLLECTORS_NCCL_PLUGIN_PLUGIN_STATE_H_
#define RINGSIDE_COLLECTORS_NCCL_PLUGIN_PLUGIN_STATE_H_

#include <atomic>
#include <cstdint>

#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/record_ring.h"

namespace ringside::collectors {

// Records waiting for the sender. 4096 × 384 bytes; a full ring drops (and counts) new records.
inline constexpr uint32_t kRingRecords = 4096;
// Collectives in flight (started, not yet completed by their last KernelCh stop).
inline constexpr uint32_t kMaxCollsInFlight = 16384;
// KernelCh events in flight.
inline constexpr uint32_t kMaxChannelsInFlight = 65536;

struct PluginShared {
  RecordRing<kRingRecords> ring;
  // Records lost since the sender's last successful batch: ring full, pools empty, or a batch that
  // could not be written. Travels in the next batch header and is reset there.
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint32_t> pid{0};
  std::atomic<bool> clock_synchronized{false};
  // Set at the first communicator init (before the sender thread starts), read by the sender.
  FixedString<kHostSize> host;
  FixedString<kJobIdSize> batch_job;  // the job drops are reported under
  // The Kubernetes pod (downward API), empty outside Kubernetes: with it the sender speaks format
  // version 2, which carries it in every batch header.
  FixedString<kPodSize> pod;
  FixedString<kPodNamespaceSize> pod_namespace;
  // Format version 4: the process's cgroup v2 path (read at the first communicator init, before the
  // sender starts) and its CUDA devices' PCI addresses by ordinal (PackGpuSlot; set at each
  // communicator init, read by the sender for every header).
  FixedString<kCgroupSize> cgroup;
  std::atomic<uint64_t> gpu_slots[kMaxGpuSlots] = {};
};

// A GpuSlot in one word, so that the init thread and the sender share it without a lock:
// bit 63 present, bits 16-47 domain, 8-15 bus, 3-7 device, 0-2 function.
constexpr uint64_t PackGpuSlot(const GpuSlot& g) noexcept {
  if (!g.present) return 0;
  return (uint64_t{1} << 63) | (uint64_t{g.domain} << 16) | (uint64_t{g.bus} << 8) |
         (uint64_t{static_cast<uint8_t>(g.device & 0x1f)} << 3) | (g.function & 7u);
}
constexpr GpuSlot UnpackGpuSlot(uint64_t v) noexcept {
  GpuSlot g;
  if ((v >> 63) == 0) return g;
  g.present = true;
  g.domain = static_cast<uint32_t>(v >> 16);
  g.bus = static_cast<uint8_t>(v >> 8);
  g.device = static_cast<uint8_t>((v >> 3) & 0x1f);
  g.function = static_cast<uint8_t>(v & 7);
  return g;
}

extern PluginShared g_shared;

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NCCL_PLUGIN_PLUGIN_STATE_H_
