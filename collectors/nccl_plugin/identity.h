// What the plugin adds to NCCL's events: job id, host, clock state, element sizes. Plain C++ (no
// allocation, no exceptions); the environment is read at communicator init, never on the hot path.
#ifndef RINGSIDE_COLLECTORS_NCCL_PLUGIN_IDENTITY_H_
#define RINGSIDE_COLLECTORS_NCCL_PLUGIN_IDENTITY_H_

#include <cstdint>

#include "collectors/nccl_plugin/record_format.h"

namespace ringside::collectors {

// The job id from the environment: RINGSIDE_JOB_ID, else SLURM_JOB_ID, else TORCHELASTIC_RUN_ID
// (the first that is set and non-empty). False when none is.
bool JobIdFromEnvironment(FixedString<kJobIdSize>* job_id) noexcept;

// The job id of a communicator: the environment's, else the communicator's name, else
// "comm-<16 hex digits of comm_id>" (NCCL often passes no name).
void ResolveJobId(const char* comm_name, uint64_t comm_id,
                  FixedString<kJobIdSize>* job_id) noexcept;

// The process's Kubernetes pod from the downward API: POD_NAME and POD_NAMESPACE (read once, at
// the first communicator init). Returns "" with both fields set when both variables hold valid
// names (ValidPodName / ValidPodNamespace). Otherwise both stay empty, and it returns nullptr when
// POD_NAME is not set (not in Kubernetes, or the manifest sets none), or what is wrong with them
// (for a warning in NCCL's log).
const char* PodFromEnvironment(FixedString<kPodSize>* pod,
                               FixedString<kPodNamespaceSize>* pod_namespace) noexcept;

// The process's cgroup v2 path: the "0::<path>" line of `proc_self_cgroup` (/proc/self/cgroup),
// read with one fixed buffer. Returns "" with `cgroup` set; otherwise `cgroup` stays empty and it
// returns why (no cgroup v2 line, a path too long or not a plain path, or "/": the root of a
// private cgroup namespace, which is what a container usually sees and names nothing the agent
// can read). Read at the first communicator init, never on the hot path.
const char* CgroupFromProc(FixedString<kCgroupSize>* cgroup,
                           const char* proc_self_cgroup = "/proc/self/cgroup") noexcept;

// gethostname(), or "localhost".
void HostName(FixedString<kHostSize>* host) noexcept;

// True when the kernel says the system clock is synchronised (adjtimex: not TIME_ERROR, no
// STA_UNSYNC). One system call: never on the hot path.
bool SystemClockSynchronized() noexcept;

// Bytes per element of an NCCL datatype name ("ncclFloat32" → 4, "ncclBfloat16" → 2,
// "ncclFloat8e4m3" → 1, legacy "ncclDouble" → 8); 0 when unknown or null.
uint32_t DatatypeSize(const char* datatype) noexcept;

// CLOCK_REALTIME in ns (the vDSO: no system call on Linux with a TSC or arch-timer clocksource).
int64_t RealtimeNanos() noexcept;
// CLOCK_MONOTONIC in ns.
int64_t MonotonicNanos() noexcept;

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NCCL_PLUGIN_IDENTITY_H_
