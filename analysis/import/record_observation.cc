#include "analysis/import/record_observation.h"

#include <string>

#include "collectors/common/pci_bus_id.h"

namespace ringside::analysis {

int64_t ClockErrorOf(const ringside::v1::CollectiveBatch& batch) {
  if (!batch.has_clock() || !batch.clock().synchronized()) return -1;
  return batch.clock().max_error_nanos() >= 0 ? batch.clock().max_error_nanos() : -1;
}

CollectiveObservation ObservationFromRecord(const ringside::v1::CollectiveRecord& r,
                                            absl::string_view node, int64_t clock_error_ns) {
  CollectiveObservation o;
  o.job = r.job_id();
  o.comm_id = r.comm_id();
  o.comm_name = r.comm_name();
  o.rank = r.rank();
  o.nranks = r.nranks();
  o.global_rank = r.has_global_rank() ? static_cast<int64_t>(r.global_rank()) : -1;
  o.function = r.function();
  o.seq = r.seq();
  o.bytes = r.bytes();
  o.start_ns = r.kernel_start_unix_nanos();
  o.stop_ns = r.kernel_stop_unix_nanos();
  o.enqueue_ns = r.enqueue_unix_nanos() > 0 ? r.enqueue_unix_nanos() : 0;
  o.host = r.host().empty() ? std::string(node) : r.host();
  o.pid = r.pid();
  o.pod = r.pod();
  o.pod_namespace = r.pod_namespace();
  o.cuda_device = r.has_cuda_device() ? r.cuda_device() : -1;
  o.clock_synchronized = r.clock_synchronized();
  o.clock_error_ns = clock_error_ns;
  o.peer = r.has_peer() ? r.peer() : -1;
  // The sysfs spelling (the aggregator's gpu info records are normalised the same way).
  char bus[collectors::kPciBusIdSize];
  if (collectors::NormalizePciBusId(r.gpu_pci_bus_id().data(), r.gpu_pci_bus_id().size(), bus,
                                    sizeof(bus))) {
    o.gpu_pci_bus_id = bus;
  }
  o.cgroup = r.cgroup();
  return o;
}

}  // namespace ringside::analysis
