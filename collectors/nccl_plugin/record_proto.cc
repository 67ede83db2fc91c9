#include "collectors/nccl_plugin/record_proto.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "collectors/common/pci_bus_id.h"

namespace ringside::collectors {

absl::Status DecodeStatusToAbsl(const DecodeStatus& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::DataLossError(
      absl::StrCat("collective record: ", DecodeErrorName(status.error), ": ", status.detail));
}

void RecordToProto(const CollectiveRecordFields& r, v1::CollectiveRecord* out) {
  out->set_job_id(r.job_id.c_str());
  out->set_comm_id(r.comm_id);
  out->set_comm_name(r.comm_name.c_str());
  out->set_rank(r.rank);
  out->set_nranks(r.nranks);
  out->set_function(r.function.c_str());
  out->set_seq(r.seq);
  out->set_bytes(r.bytes);
  out->set_algorithm(r.algorithm.c_str());
  out->set_protocol(r.protocol.c_str());
  out->set_channels(r.channels);
  out->set_kernel_start_unix_nanos(r.kernel_start_unix_nanos);
  out->set_kernel_stop_unix_nanos(r.kernel_stop_unix_nanos);
  out->set_enqueue_unix_nanos(r.enqueue_unix_nanos);
  out->set_pid(r.pid);
  out->set_host(r.host.c_str());
  out->set_clock_synchronized((r.flags & kRecordFlagClockSynchronized) != 0);
  if (r.cuda_device >= 0) out->set_cuda_device(r.cuda_device);
}

void SetSenderIdentity(const BatchHeaderFields& header, const CollectiveRecordFields& record,
                       v1::CollectiveRecord* out) {
  SetPod(header, out);
  if (header.version < kFormatVersion4) return;
  if (!header.cgroup.empty()) out->set_cgroup(header.cgroup.c_str());
  if (record.cuda_device >= 0 && static_cast<size_t>(record.cuda_device) < kMaxGpuSlots) {
    const GpuSlot& g = header.gpus[record.cuda_device];
    char bus_id[kPciBusIdSize];
    if (g.present && FormatPciAddress(PciAddress{g.domain, g.bus, g.device, g.function}, bus_id,
                                      sizeof(bus_id))) {
      out->set_gpu_pci_bus_id(bus_id);
    }
  }
}

void SetPod(const BatchHeaderFields& header, v1::CollectiveRecord* out) {
  if (header.pod.empty()) return;
  out->set_pod(header.pod.c_str());
  out->set_pod_namespace(header.pod_namespace.c_str());
}

v1::CollectiveRecord RecordToProto(const CollectiveRecordFields& record) {
  v1::CollectiveRecord out;
  RecordToProto(record, &out);
  return out;
}

absl::StatusOr<v1::CollectiveBatch> DecodeFrameToProto(absl::Span<const uint8_t> frame) {
  BatchHeaderFields header;
  auto records = std::make_unique<CollectiveRecordFields[]>(kMaxRecordsPerBatch);
  DecodeStatus s =
      DecodeFrame(frame.data(), frame.size(), &header, records.get(), kMaxRecordsPerBatch);
  if (!s.ok()) return DecodeStatusToAbsl(s);
  v1::CollectiveBatch batch;
  for (uint32_t i = 0; i < header.record_count; ++i) {
    v1::CollectiveRecord* r = batch.add_records();
    RecordToProto(records[i], r);
    SetSenderIdentity(header, records[i], r);
  }
  if (header.dropped > 0) (*batch.mutable_dropped_by_job())[header.job_id.c_str()] = header.dropped;
  return batch;
}

absl::StatusOr<std::string> EncodeFrame(const BatchHeaderFields& header,
                                        const std::vector<CollectiveRecordFields>& records) {
  if (records.size() > kMaxRecordsPerBatch) {
    return absl::InvalidArgumentError(absl::StrCat("a frame holds at most ", kMaxRecordsPerBatch,
                                                   " records, not ", records.size()));
  }
  if (header.header_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("no frame format version ", header.version));
  }
  std::string out(header.header_size() + records.size() * kRecordSize, '\0');
  BatchHeaderFields h = header;
  h.record_count = static_cast<uint32_t>(records.size());
  uint8_t* p = reinterpret_cast<uint8_t*>(out.data());
  EncodeBatchHeader(h, p);
  for (size_t i = 0; i < records.size(); ++i) {
    EncodeRecord(records[i], p + h.header_size() + i * kRecordSize, h.version);
  }
  return out;
}

}  // namespace ringside::collectors
