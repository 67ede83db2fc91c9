// One rank's view of one collective or point-to-point operation, as the detectors see it
// (converted from ringside.v1 CollectiveRecord by the aggregator or the trace importer).
#ifndef RINGSIDE_ANALYSIS_COLLECTIVE_OBSERVATION_H_
#define RINGSIDE_ANALYSIS_COLLECTIVE_OBSERVATION_H_

#include <cstdint>
#include <string>

namespace ringside::analysis {

struct CollectiveObservation {
  std::string job;
  uint64_t comm_id = 0;
  std::string comm_name;
  uint32_t rank = 0;    // in the communicator
  uint32_t nranks = 0;
  int64_t global_rank = -1;  // in the job, when known
  std::string function;
  uint64_t seq = 0;
  uint64_t bytes = 0;
  int64_t start_ns = 0;  // GPU kernel start (earliest over channels), the rank's own clock
  int64_t stop_ns = 0;   // GPU kernel stop (latest over channels)
  std::string host;      // the node
  uint32_t pid = 0;
  std::string pod;            // the Kubernetes pod, when the plugin knew it
  std::string pod_namespace;  // ... and its namespace
  // The rank's GPU: its CUDA ordinal in process `pid`, -1 when unknown. One process may drive
  // several GPUs; (host, pid, cuda_device) is one worker.
  int32_t cuda_device = -1;
  bool clock_synchronized = false;
  int64_t enqueue_ns = 0;  // host enqueue time, the rank's own clock; 0 when unknown
  // The node's clock error bound when the record was forwarded (the agent's adjtimex maxerror);
  // -1 when unknown (an older agent, or a clock the kernel marks unsynchronised).
  int64_t clock_error_ns = -1;
  // The rank's GPU as a PCI bus id, sysfs form ("0000:19:00.0"; analysis/pci_bus_id.h): the NVML
  // device the agent reads (its gpu info record's pci_bus_id). "" unknown. Ranks on one node with
  // one bus id share a GPU.
  std::string gpu_pci_bus_id;
  // The rank's cgroup (v2 path, as in /proc/self/cgroup), whose cpu.stat the agent reads. "" unknown.
  std::string cgroup;
  int32_t peer = -1;     // point-to-point: the peer rank; -1 for a collective

  bool is_p2p() const { return peer >= 0; }
  int64_t duration_ns() const { return stop_ns > start_ns ? stop_ns - start_ns : 0; }
};

}  // namespace ringside::analysis

#endif  // RINGSIDE_ANALYSIS_COLLECTIVE_OBSERVATION_H_
