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
};

extern PluginShared g_shared;

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NCCL_PLUGIN_PLUGIN_STATE_H_
