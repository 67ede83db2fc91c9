// The collective-record wire format between libringside_nccl.so and ringside-agent: a small,
// versioned, fixed-size binary format (docs/collective-record.md).
//
//   frame   = batch header (96 bytes in version 1, 416 in versions 2 and 3: the sender's
//             Kubernetes pod and namespace; 1056 in version 4: also the sender's cgroup and the
//             PCI address of each of its CUDA devices) + record_count × record (352 bytes each in
//             every version; version 3 gives four reserved bytes of the record the CUDA device)
//   numbers = little-endian; strings = fixed fields, NUL-terminated, zero-padded, UTF-8 without
//             control characters
//
// This file is plain C++ with no Abseil or protobuf, no exceptions and no allocation: the plugin
// (which lives inside training processes with their own copies of those libraries) compiles it in.
// The agent wraps it with record_proto.h. The decoder is strict: it accepts exactly the bytes the
// encoder can produce (a canonical encoding), so anything it accepts re-encodes to the same bytes.
#ifndef RINGSIDE_COLLECTORS_NCCL_PLUGIN_RECORD_FORMAT_H_
#define RINGSIDE_COLLECTORS_NCCL_PLUGIN_RECORD_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ringside::collectors {

// --- Constants ------------------------------------------------------------------------------------

inline constexpr uint32_t kBatchMagic = 0x42435352;   // bytes "RSCB"
inline constexpr uint32_t kRecordMagic = 0x52435352;  // bytes "RSCR"
// The frame format's versions: the batch header's version field. Version 2 adds the sender's pod
// identity to the batch header. Version 3 has version 2's header and puts each record's CUDA
// device (ordinal + 1, 0 unknown) in bytes 76–79, which versions 1 and 2 reserve (zero). Records
// keep their own layout version (1) and size in all three.
inline constexpr uint16_t kFormatVersion1 = 1;
inline constexpr uint16_t kFormatVersion2 = 2;
inline constexpr uint16_t kFormatVersion3 = 3;
// Version 4: version 3's records; the header adds the sender's cgroup v2 path (so the agent reads
// its CPU throttling) and a table of the PCI addresses of the sender's CUDA devices by ordinal (so
// a record's cuda_device names the GPU the agent sees through NVML).
inline constexpr uint16_t kFormatVersion4 = 4;
inline constexpr uint16_t kRecordFormatVersion = kFormatVersion4;  // the newest this code speaks
inline constexpr uint16_t kRecordLayoutVersion = 1;  // a record's own version field
inline constexpr size_t kBatchHeaderSize = 96;       // version 1
inline constexpr size_t kBatchHeaderSizeV2 = 416;    // versions 2, 3: + pod (256) + namespace (64)
// The cgroup field, and the GPU table: kMaxGpuSlots slots of kGpuSlotSize bytes, by CUDA ordinal.
inline constexpr size_t kCgroupSize = 512;
inline constexpr size_t kMaxGpuSlots = 16;
inline constexpr size_t kGpuSlotSize = 8;
inline constexpr size_t kBatchHeaderSizeV4 =
    kBatchHeaderSizeV2 + kCgroupSize + kMaxGpuSlots * kGpuSlotSize;  // 1056
inline constexpr size_t kMaxBatchHeaderSize = kBatchHeaderSizeV4;
inline constexpr size_t kRecordSize = 352;
// The most records one batch may carry, hence the largest frame a reader must buffer.
inline constexpr uint32_t kMaxRecordsPerBatch = 256;
inline constexpr size_t kMaxFrameSize = kMaxBatchHeaderSize + kMaxRecordsPerBatch * kRecordSize;
// The batch header's size for a version (0 for a version this code does not speak).
constexpr size_t BatchHeaderSize(uint16_t version) noexcept {
  return version == kFormatVersion1                                 ? kBatchHeaderSize
         : version == kFormatVersion2 || version == kFormatVersion3 ? kBatchHeaderSizeV2
         : version == kFormatVersion4                               ? kBatchHeaderSizeV4
                                                                    : 0;
}
// An agent answers the first batch header of version 2 or later it accepts on a connection with
// one byte: that header's version (kVersion2Ack, kVersion3Ack). An agent that does not speak the
// version never writes; it cuts the sender off (bad_version), which is how the plugin knows to
// fall back to an older version (sender.h).
inline constexpr uint8_t kVersion2Ack = 2;
inline constexpr uint8_t kVersion3Ack = 3;
inline constexpr uint8_t kVersion4Ack = 4;

// Record flags.
inline constexpr uint32_t kRecordFlagClockSynchronized = 1u << 0;  // host clock NTP-synchronised
inline constexpr uint32_t kRecordFlagKernelTimes = 1u << 1;        // kernel start/stop are present
inline constexpr uint32_t kRecordKnownFlags = kRecordFlagClockSynchronized | kRecordFlagKernelTimes;

// String field sizes, terminating NUL included (so a job id holds at most 63 bytes).
inline constexpr size_t kJobIdSize = 64;
inline constexpr size_t kCommNameSize = 64;
inline constexpr size_t kHostSize = 64;
inline constexpr size_t kFunctionSize = 32;
inline constexpr size_t kAlgorithmSize = 32;
inline constexpr size_t kProtocolSize = 16;
// Kubernetes names: a pod name is a DNS subdomain (at most 253 characters), a namespace a DNS label
// (at most 63).
inline constexpr size_t kPodSize = 256;
inline constexpr size_t kPodNamespaceSize = 64;
inline constexpr size_t kMaxPodLength = 253;
inline constexpr size_t kMaxPodNamespaceLength = 63;

// Bounds past which a value is absurd and the record is rejected.
inline constexpr uint32_t kMaxRanks = 1u << 24;
inline constexpr uint32_t kMaxPid = 1u << 22;      // PID_MAX_LIMIT on 64-bit Linux
inline constexpr uint32_t kMaxChannels = 255;      // NCCL's nChannels is a uint8_t
inline constexpr uint64_t kMaxBytes = 1ull << 50;  // 1 PiB in one collective
inline constexpr int64_t kMaxUnixNanos = 7258118400ll * 1000000000ll;  // 2200-01-01
inline constexpr int64_t kMaxKernelNanos = 86400ll * 1000000000ll;     // one day
inline constexpr uint64_t kMaxDroppedPerBatch = 1ull << 48;
inline constexpr int32_t kMaxCudaDevice = (1 << 16) - 1;  // CUDA ordinals are small numbers

// --- Fixed string fields -------------------------------------------------------------------------

// A bounded string that is always valid on the wire: NUL-terminated, zero-padded, UTF-8, no
// control characters. Set() truncates at a character boundary and replaces control characters and
// invalid UTF-8 bytes with '?', so whatever the plugin is given it never sends a record the agent
// must reject.
template <size_t N>
class FixedString {
 public:
  static constexpr size_t kCapacity = N - 1;

  // Copies a NUL-terminated string (reading no further than its terminator).
  void Set(const char* s) noexcept { Set(s, s == nullptr ? 0 : 4 * N); }
  void Set(const char* s, size_t len) noexcept;
  void Clear() noexcept { std::memset(bytes_, 0, N); }

  const char* c_str() const noexcept { return bytes_; }
  size_t size() const noexcept { return ::strnlen(bytes_, N); }
  bool empty() const noexcept { return bytes_[0] == '\0'; }
  // The N bytes as they go on the wire.
  const char* bytes() const noexcept { return bytes_; }
  char* mutable_bytes() noexcept { return bytes_; }

  friend bool operator==(const FixedString& a, const FixedString& b) noexcept {
    return std::memcmp(a.bytes_, b.bytes_, N) == 0;
  }

 private:
  char bytes_[N] = {};
};

// Copies at most `len` bytes of `src`, stopping at a NUL, into `dst[n]` as a canonical field (see
// FixedString). Never reads past a NUL, so `len` may be an upper bound. Returns the number of
// bytes written before the terminator.
size_t CopySanitized(char* dst, size_t n, const char* src, size_t len) noexcept;

template <size_t N>
void FixedString<N>::Set(const char* s, size_t len) noexcept {
  CopySanitized(bytes_, N, s, len);
}

// --- Logical contents ----------------------------------------------------------------------------

// One collective on one rank (DESIGN.md "Plugin → agent"; ringside.v1.CollectiveRecord).
struct CollectiveRecordFields {
  uint32_t flags = 0;  // kRecordFlag*
  uint32_t rank = 0;
  uint32_t nranks = 0;
  uint32_t pid = 0;
  uint64_t comm_id = 0;  // NCCL commHash/commId: the same on every rank of the communicator
  uint64_t seq = 0;      // NCCL seqNumber: per communicator per collective type, 0-based
  uint64_t bytes = 0;    // count × element size
  int64_t kernel_start_unix_nanos = 0;  // earliest KernelCh start (0 without kKernelTimes)
  int64_t kernel_stop_unix_nanos = 0;   // latest KernelCh stop (0 without kKernelTimes)
  int64_t enqueue_unix_nanos = 0;       // host CLOCK_REALTIME when NCCL enqueued it
  uint16_t channels = 0;
  // The communicator's GPU: its CUDA ordinal in the sending process (after CUDA_VISIBLE_DEVICES),
  // -1 when unknown (no CUDA library answered at init, or a frame older than version 3). On the
  // wire (version 3): cuda_device + 1 in bytes 76–79.
  int32_t cuda_device = -1;
  FixedString<kJobIdSize> job_id;
  FixedString<kCommNameSize> comm_name;
  FixedString<kHostSize> host;
  FixedString<kFunctionSize> function;
  FixedString<kAlgorithmSize> algorithm;
  FixedString<kProtocolSize> protocol;

  bool operator==(const CollectiveRecordFields&) const = default;
};

// One slot of the version-4 GPU table: the PCI address of the sender's CUDA device with that
// ordinal, as CUDA reports it (cudaDeviceGetPCIBusId / cuDeviceGetPCIBusId). On the wire: domain
// (4 bytes), bus, device, function, flags (bit 0: present); an absent slot is all zero.
struct GpuSlot {
  bool present = false;
  uint32_t domain = 0;
  uint8_t bus = 0;
  uint8_t device = 0;    // ≤ 0x1f
  uint8_t function = 0;  // ≤ 7
  bool operator==(const GpuSlot&) const = default;
};

struct BatchHeaderFields {
  uint16_t version = kFormatVersion1;  // kFormatVersion1, 2, 3 or 4
  uint32_t record_count = 0;
  uint64_t dropped = 0;            // records the sender dropped since its previous batch
  FixedString<kJobIdSize> job_id;  // the job the drops belong to
  // Versions 2 and 3 (empty in version 1): the sending process's Kubernetes pod, from the
  // downward API (POD_NAME, POD_NAMESPACE). Both set or both empty.
  FixedString<kPodSize> pod;
  FixedString<kPodNamespaceSize> pod_namespace;
  // Version 4 (empty in older ones): the sender's cgroup v2 path from /proc/self/cgroup ("0::"
  // line), empty when unknown or when it is the root of a cgroup namespace ("/", which names
  // nothing the agent can find); and its CUDA devices' PCI addresses by ordinal.
  FixedString<kCgroupSize> cgroup;
  GpuSlot gpus[kMaxGpuSlots];

  size_t header_size() const noexcept { return BatchHeaderSize(version); }

  bool operator==(const BatchHeaderFields&) const = default;
};

// --- Encoding ------------------------------------------------------------------------------------

// Writes exactly kRecordSize / header.header_size() bytes (version 1 when header.version is not
// 2 or 3; the pod fields are then not written). A record for a frame of `version` (the newest by
// default) carries its CUDA device only from version 3 on. The encoder does not validate numbers:
// a caller that passes absurd values (rank ≥ nranks, ...) gets a record the decoder rejects.
void EncodeRecord(const CollectiveRecordFields& record, uint8_t* out,
                  uint16_t version = kRecordFormatVersion) noexcept;
void EncodeBatchHeader(const BatchHeaderFields& header, uint8_t* out) noexcept;
// Rewrites an encoded record (kRecordSize bytes, encoded for the newest version) in place for a
// frame of an older `version`: zeroes what that version reserves (the CUDA device before
// version 3). The sender's ring holds records of the newest version; an older agent gets them so.
void DowngradeRecord(uint8_t* record, uint16_t version) noexcept;

// --- Pod identity ----------------------------------------------------------------------------------

// A Kubernetes pod name as the decoder accepts it: 1–253 characters of [a-z0-9.-]; a namespace:
// 1–63 of [a-z0-9-]. (Kubernetes also wants an alphanumeric first and last character; the
// decoder only guards what it forwards, so it does not insist.)
bool ValidPodName(const char* s, size_t len) noexcept;
bool ValidPodNamespace(const char* s, size_t len) noexcept;
// A cgroup v2 path as the decoder accepts it: '/' then components of printable ASCII without
// spaces, none empty, "." or ".."; at most kCgroupSize - 1 bytes; not "/" alone.
bool ValidCgroupPath(const char* s, size_t len) noexcept;

// --- Decoding ------------------------------------------------------------------------------------

enum class DecodeError : uint8_t {
  kOk = 0,
  kTruncated,   // fewer bytes than the header or its records need
  kBadMagic,    // not "RSCB" / "RSCR"
  kBadVersion,  // a version this decoder does not speak
  kBadLength,   // header_length/record_length/frame size inconsistent with the version
  kOversized,   // more records than kMaxRecordsPerBatch
  kBadString,   // a string field not terminated, not zero-padded, empty where required, not UTF-8
  kBadValue,    // an absurd number, an unknown flag or a non-zero reserved field
};
inline constexpr int kDecodeErrorCount = 8;

// "ok", "truncated", "bad_magic", "bad_version", "bad_length", "oversized", "bad_string",
// "bad_value": also the `reason` label of the agent's rejection counters.
const char* DecodeErrorName(DecodeError e) noexcept;

struct DecodeStatus {
  DecodeError error = DecodeError::kOk;
  const char* detail = "";  // a static string naming the field or rule, for logs

  bool ok() const noexcept { return error == DecodeError::kOk; }
};

// Decodes and validates a batch header (version 1, 2, 3 or 4) from the first bytes of `size`. On
// success
// `*frame_size` is the whole frame's length (header + records). Fewer bytes than the header of its
// version: kTruncated (and only then).
DecodeStatus DecodeBatchHeader(const uint8_t* data, size_t size, BatchHeaderFields* header,
                               size_t* frame_size) noexcept;

// Decodes and validates one record of a frame of `version` (the newest by default) from exactly
// kRecordSize bytes (fewer: kTruncated). Before version 3 bytes 76–79 are reserved (zero) and the
// record's cuda_device is -1.
DecodeStatus DecodeRecord(const uint8_t* data, size_t size, CollectiveRecordFields* record,
                          uint16_t version = kRecordFormatVersion) noexcept;

// Validates a whole frame (header + records) of exactly `size` bytes: kTruncated if shorter than
// its header says, kBadLength if longer. Records are written to `records[0..capacity)`; a frame
// with more records than `capacity` is kOversized.
DecodeStatus DecodeFrame(const uint8_t* data, size_t size, BatchHeaderFields* header,
                         CollectiveRecordFields* records, size_t capacity) noexcept;

// The same rules on decoded values (what DecodeRecord checks after parsing).
DecodeStatus ValidateRecord(const CollectiveRecordFields& record) noexcept;

}  // namespace ringside::collectors

#endif  // RINGSIDE_COLLECTORS_NCCL_PLUGIN_RECORD_FORMAT_H_
