// The agent's side of the collective-record format: Abseil statuses and ringside.v1 messages on
// top of the plain decoder in record_format.h. Not linked into the plugin.
#ifndef RINGSIDE_COLLECTORS_NCCL_PLUGIN_RECORD_PROTO_H_
#define RINGSIDE_COLLECTORS_NCCL_PLUGIN_RECORD_PROTO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "collectors/nccl_plugin/record_format.h"
#include "ringside/v1/ingest.pb.h"

namespace ringside::collectors {

// OK for kOk; otherwise DataLoss (the bytes are not a valid record), with the reason name and the
// decoder's detail: "collective record: bad_magic: batch magic is not RSCB".
absl::Status DecodeStatusToAbsl(const DecodeStatus& status);

// The proto form of one decoded record (cuda_device set only when known).
void RecordToProto(const CollectiveRecordFields& record, v1::CollectiveRecord* out);
v1::CollectiveRecord RecordToProto(const CollectiveRecordFields& record);
// The sender's pod (a version-2, -3 or -4 batch header's) onto one of its records; nothing without
// one.
void SetPod(const BatchHeaderFields& header, v1::CollectiveRecord* out);
// Everything a batch header says about the sender onto one of its records `record`: the pod
// (version 2 on), the cgroup and the record's GPU PCI address, from the header's GPU table by the
// record's CUDA device (version 4, gpu_pci_bus_id in the sysfs form).
void SetSenderIdentity(const BatchHeaderFields& header, const CollectiveRecordFields& record,
                       v1::CollectiveRecord* out);

// A whole frame (header + records, exactly `frame.size()` bytes, version 1 to 4) decoded into
// a CollectiveBatch: its records (with the header's pod from version 2, their CUDA device from
// version 3, cgroup and GPU PCI address from version 4), and the header's drop count
// under the header's job id (absent when zero).
absl::StatusOr<v1::CollectiveBatch> DecodeFrameToProto(absl::Span<const uint8_t> frame);

// Encodes a frame (header + records, in header.version: the records' CUDA device only in version
// 3) into bytes: for tests and tools.
// `records.size()` must not exceed kMaxRecordsPerBatch (InvalidArgument otherwise).
absl::StatusOr<std::string> EncodeFrame(const BatchHeaderFields& header,
                                        const std::vector<CollectiveRecordFields>& records);

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NCCL_PLUGIN_RECORD_PROTO_H_
