#include "collectors/nccl_plugin/record_format.h"

namespace ringside::collectors {
namespace {

// Record layout (offsets).
constexpr size_t kRecMagic = 0;
constexpr size_t kRecVersion = 4;
constexpr size_t kRecLength = 6;
constexpr size_t kRecFlags = 8;
constexpr size_t kRecRank = 12;
constexpr size_t kRecNranks = 16;
constexpr size_t kRecPid = 20;
constexpr size_t kRecCommId = 24;
constexpr size_t kRecSeq = 32;
constexpr size_t kRecBytes = 40;
constexpr size_t kRecKernelStart = 48;
constexpr size_t kRecKernelStop = 56;
constexpr size_t kRecEnqueue = 64;
constexpr size_t kRecChannels = 72;
constexpr size_t kRecReserved16 = 74;
constexpr size_t kRecReserved32 = 76;  // version 3: the CUDA device + 1 (kRecDevice)
constexpr size_t kRecDevice = kRecReserved32;
constexpr size_t kRecJobId = 80;
constexpr size_t kRecCommName = kRecJobId + kJobIdSize;          // 144
constexpr size_t kRecHost = kRecCommName + kCommNameSize;        // 208
constexpr size_t kRecFunction = kRecHost + kHostSize;            // 272
constexpr size_t kRecAlgorithm = kRecFunction + kFunctionSize;   // 304
constexpr size_t kRecProtocol = kRecAlgorithm + kAlgorithmSize;  // 336
static_assert(kRecProtocol + kProtocolSize == kRecordSize);

// Batch header layout.
constexpr size_t kHdrMagic = 0;
constexpr size_t kHdrVersion = 4;
constexpr size_t kHdrLength = 6;
constexpr size_t kHdrFlags = 8;
constexpr size_t kHdrCount = 12;
constexpr size_t kHdrRecordLength = 16;
constexpr size_t kHdrReserved16 = 18;
constexpr size_t kHdrReserved32 = 20;
constexpr size_t kHdrDropped = 24;
constexpr size_t kHdrJobId = 32;
static_assert(kHdrJobId + kJobIdSize == kBatchHeaderSize);
// Version 2 appends the pod identity.
constexpr size_t kHdrPod = kBatchHeaderSize;                 // 96
constexpr size_t kHdrPodNamespace = kHdrPod + kPodSize;      // 352
static_assert(kHdrPodNamespace + kPodNamespaceSize == kBatchHeaderSizeV2);
// Version 4 appends the cgroup and the GPU table.
constexpr size_t kHdrCgroup = kBatchHeaderSizeV2;      // 416
constexpr size_t kHdrGpus = kHdrCgroup + kCgroupSize;  // 928
static_assert(kHdrGpus + kMaxGpuSlots * kGpuSlotSize == kBatchHeaderSizeV4);

// Little-endian stores and loads, independent of the host's byte order.
inline void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint16_t Get16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}
inline uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
inline uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// The length of the valid UTF-8 sequence of a printable character at p (at most `avail` bytes),
// or 0: control characters (C0 and DEL), stray continuation bytes, overlong forms, surrogates and
// code points past U+10FFFF are all invalid.
size_t CharLength(const uint8_t* p, size_t avail) {
  const uint8_t c = p[0];
  if (c < 0x20 || c == 0x7f) return 0;
  if (c < 0x80) return 1;
  auto cont = [&](size_t i, uint8_t lo = 0x80, uint8_t hi = 0xbf) {
    return i < avail && p[i] >= lo && p[i] <= hi;
  };
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c == 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (c == 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

// A canonical string field: a NUL within the field, zeros after it, valid characters before it.
bool ValidField(const uint8_t* p, size_t n, bool required) {
  size_t len = 0;
  while (len < n && p[len] != 0) ++len;
  if (len == n) return false;  // not terminated
  if (required && len == 0) return false;
  for (size_t i = len; i < n; ++i) {
    if (p[i] != 0) return false;  // bytes after the terminator
  }
  for (size_t i = 0; i < len;) {
    const size_t l = CharLength(p + i, len - i);
    if (l == 0) return false;
    i += l;
  }
  return true;
}

DecodeStatus Fail(DecodeError e, const char* detail) { return DecodeStatus{e, detail}; }

// 1..max characters, each in the set `extra` or [a-z0-9].
bool KubernetesName(const char* s, size_t len, size_t max, const char* extra) {
  if (s == nullptr || len == 0 || len > max) return false;
  for (size_t i = 0; i < len; ++i) {
    const char c = s[i];
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) continue;
    if (std::strchr(extra, c) == nullptr || c == '\0') return false;
  }
  return true;
}

// A pod field: canonical (ValidField), and empty or a valid name.
bool ValidPodField(const uint8_t* p, size_t n, size_t max, const char* extra) {
  if (!ValidField(p, n, /*required=*/false)) return false;
  const size_t len = ::strnlen(reinterpret_cast<const char*>(p), n);
  return len == 0 || KubernetesName(reinterpret_cast<const char*>(p), len, max, extra);
}

bool InTimeRange(int64_t t) { return t > 0 && t <= kMaxUnixNanos; }

}  // namespace

size_t CopySanitized(char* dst, size_t n, const char* src, size_t len) noexcept {
  if (n == 0) return 0;
  const uint8_t* s = reinterpret_cast<const uint8_t*>(src);
  size_t out = 0;
  size_t i = 0;
  while (src != nullptr && i < len) {
    const uint8_t c = s[i];
    if (c >= 0x20 && c < 0x7f) {  // printable ASCII: what NCCL and schedulers send
      if (out + 1 > n - 1) break;
      dst[out++] = static_cast<char>(c);
      ++i;
      continue;
    }
    if (c == 0) break;
    size_t l = CharLength(s + i, len - i);
    if (l == 0) {
      if (out + 1 > n - 1) break;
      dst[out++] = '?';
      ++i;
      continue;
    }
    if (out + l > n - 1) break;  // truncate at a character boundary
    for (size_t k = 0; k < l; ++k) dst[out++] = static_cast<char>(s[i + k]);
    i += l;
  }
  std::memset(dst + out, 0, n - out);
  return out;
}

bool ValidPodName(const char* s, size_t len) noexcept {
  return KubernetesName(s, len, kMaxPodLength, "-.");
}

bool ValidPodNamespace(const char* s, size_t len) noexcept {
  return KubernetesName(s, len, kMaxPodNamespaceLength, "-");
}

bool ValidCgroupPath(const char* s, size_t len) noexcept {
  if (s == nullptr || len < 2 || len > kCgroupSize - 1 || s[0] != '/') return false;
  size_t component = 0;  // length of the current component
  size_t dots = 0;       // its dots, while it is only dots
  for (size_t i = 1; i <= len; ++i) {
    if (i == len || s[i] == '/') {
      if (component == 0 || (dots == component && dots <= 2)) return false;  // "", ".", ".."
      component = 0;
      dots = 0;
      continue;
    }
    const char c = s[i];
    if (c < 0x21 || c > 0x7e) return false;
    ++component;
    if (c == '.') ++dots;
  }
  return true;
}

void EncodeRecord(const CollectiveRecordFields& r, uint8_t* out, uint16_t version) noexcept {
  Put32(out + kRecMagic, kRecordMagic);
  Put16(out + kRecVersion, kRecordLayoutVersion);
  Put16(out + kRecLength, static_cast<uint16_t>(kRecordSize));
  Put32(out + kRecFlags, r.flags);
  Put32(out + kRecRank, r.rank);
  Put32(out + kRecNranks, r.nranks);
  Put32(out + kRecPid, r.pid);
  Put64(out + kRecCommId, r.comm_id);
  Put64(out + kRecSeq, r.seq);
  Put64(out + kRecBytes, r.bytes);
  Put64(out + kRecKernelStart, static_cast<uint64_t>(r.kernel_start_unix_nanos));
  Put64(out + kRecKernelStop, static_cast<uint64_t>(r.kernel_stop_unix_nanos));
  Put64(out + kRecEnqueue, static_cast<uint64_t>(r.enqueue_unix_nanos));
  Put16(out + kRecChannels, r.channels);
  Put16(out + kRecReserved16, 0);
  // cuda_device + 1: 0 for an unknown device (and anything the decoder would not accept, so that
  // a sender never sends a record the agent must reject).
  const bool device = version >= kFormatVersion3 && r.cuda_device >= 0 &&
                      r.cuda_device <= kMaxCudaDevice;
  Put32(out + kRecDevice, device ? static_cast<uint32_t>(r.cuda_device) + 1 : 0);
  std::memcpy(out + kRecJobId, r.job_id.bytes(), kJobIdSize);
  std::memcpy(out + kRecCommName, r.comm_name.bytes(), kCommNameSize);
  std::memcpy(out + kRecHost, r.host.bytes(), kHostSize);
  std::memcpy(out + kRecFunction, r.function.bytes(), kFunctionSize);
  std::memcpy(out + kRecAlgorithm, r.algorithm.bytes(), kAlgorithmSize);
  std::memcpy(out + kRecProtocol, r.protocol.bytes(), kProtocolSize);
}

void DowngradeRecord(uint8_t* record, uint16_t version) noexcept {
  if (version < kFormatVersion3) Put32(record + kRecDevice, 0);
}

void EncodeBatchHeader(const BatchHeaderFields& h, uint8_t* out) noexcept {
  const bool v2 =
      h.version == kFormatVersion2 || h.version == kFormatVersion3 || h.version == kFormatVersion4;
  const bool v4 = h.version == kFormatVersion4;
  Put32(out + kHdrMagic, kBatchMagic);
  Put16(out + kHdrVersion, v2 ? h.version : kFormatVersion1);
  Put16(out + kHdrLength, static_cast<uint16_t>(BatchHeaderSize(v2 ? h.version : kFormatVersion1)));
  Put32(out + kHdrFlags, 0);
  Put32(out + kHdrCount, h.record_count);
  Put16(out + kHdrRecordLength, static_cast<uint16_t>(kRecordSize));
  Put16(out + kHdrReserved16, 0);
  Put32(out + kHdrReserved32, 0);
  Put64(out + kHdrDropped, h.dropped);
  std::memcpy(out + kHdrJobId, h.job_id.bytes(), kJobIdSize);
  if (v2) {
    std::memcpy(out + kHdrPod, h.pod.bytes(), kPodSize);
    std::memcpy(out + kHdrPodNamespace, h.pod_namespace.bytes(), kPodNamespaceSize);
  }
  if (v4) {
    // A cgroup the decoder would refuse goes out empty, so a sender never sends a rejected frame.
    const bool cgroup_ok = ValidCgroupPath(h.cgroup.c_str(), h.cgroup.size());
    std::memset(out + kHdrCgroup, 0, kCgroupSize);
    if (cgroup_ok) std::memcpy(out + kHdrCgroup, h.cgroup.bytes(), kCgroupSize);
    for (size_t i = 0; i < kMaxGpuSlots; ++i) {
      uint8_t* slot = out + kHdrGpus + i * kGpuSlotSize;
      const GpuSlot& g = h.gpus[i];
      const bool ok = g.present && g.device <= 0x1f && g.function <= 7;
      Put32(slot, ok ? g.domain : 0);
      slot[4] = ok ? g.bus : 0;
      slot[5] = ok ? g.device : 0;
      slot[6] = ok ? g.function : 0;
      slot[7] = ok ? 1 : 0;
    }
  }
}

const char* DecodeErrorName(DecodeError e) noexcept {
  switch (e) {
    case DecodeError::kOk:
      return "ok";
    case DecodeError::kTruncated:
      return "truncated";
    case DecodeError::kBadMagic:
      return "bad_magic";
    case DecodeError::kBadVersion:
      return "bad_version";
    case DecodeError::kBadLength:
      return "bad_length";
    case DecodeError::kOversized:
      return "oversized";
    case DecodeError::kBadString:
      return "bad_string";
    case DecodeError::kBadValue:
      return "bad_value";
  }
  return "unknown";
}

DecodeStatus DecodeBatchHeader(const uint8_t* p, size_t size, BatchHeaderFields* h,
                               size_t* frame_size) noexcept {
  // Magic and version are checked on whatever arrived, so garbage is named as such early.
  if (size >= 4 && Get32(p + kHdrMagic) != kBatchMagic) {
    return Fail(DecodeError::kBadMagic, "batch magic is not RSCB");
  }
  if (size >= 6 && BatchHeaderSize(Get16(p + kHdrVersion)) == 0) {
    return Fail(DecodeError::kBadVersion, "batch version is not 1, 2, 3 or 4");
  }
  const uint16_t version = size >= 6 ? Get16(p + kHdrVersion) : kFormatVersion1;
  const size_t header_size = BatchHeaderSize(version);
  if (size < header_size) return Fail(DecodeError::kTruncated, "batch header incomplete");
  if (Get16(p + kHdrLength) != header_size) {
    return Fail(DecodeError::kBadLength,
                version == kFormatVersion1   ? "batch header_length is not 96 (version 1)"
                : version == kFormatVersion4 ? "batch header_length is not 1056 (version 4)"
                                             : "batch header_length is not 416 (version 2, 3)");
  }
  if (Get16(p + kHdrRecordLength) != kRecordSize) {
    return Fail(DecodeError::kBadLength, "batch record_length is not 352");
  }
  const uint32_t count = Get32(p + kHdrCount);
  if (count > kMaxRecordsPerBatch) {
    return Fail(DecodeError::kOversized, "batch record_count above 256");
  }
  if (Get32(p + kHdrFlags) != 0) return Fail(DecodeError::kBadValue, "batch flags not zero");
  if (Get16(p + kHdrReserved16) != 0 || Get32(p + kHdrReserved32) != 0) {
    return Fail(DecodeError::kBadValue, "batch reserved bytes not zero");
  }
  const uint64_t dropped = Get64(p + kHdrDropped);
  if (dropped > kMaxDroppedPerBatch) return Fail(DecodeError::kBadValue, "batch dropped absurd");
  if (!ValidField(p + kHdrJobId, kJobIdSize, /*required=*/true)) {
    return Fail(DecodeError::kBadString, "batch job_id");
  }
  BatchHeaderFields out;
  out.version = version;
  if (version >= kFormatVersion2) {
    if (!ValidPodField(p + kHdrPod, kPodSize, kMaxPodLength, "-.")) {
      return Fail(DecodeError::kBadString, "batch pod: not a Kubernetes pod name");
    }
    if (!ValidPodField(p + kHdrPodNamespace, kPodNamespaceSize, kMaxPodNamespaceLength, "-")) {
      return Fail(DecodeError::kBadString, "batch namespace: not a Kubernetes namespace");
    }
    std::memcpy(out.pod.mutable_bytes(), p + kHdrPod, kPodSize);
    std::memcpy(out.pod_namespace.mutable_bytes(), p + kHdrPodNamespace, kPodNamespaceSize);
    if (out.pod.empty() != out.pod_namespace.empty()) {
      return Fail(DecodeError::kBadString, "batch pod and namespace: one without the other");
    }
  }
  if (version >= kFormatVersion4) {
    if (!ValidField(p + kHdrCgroup, kCgroupSize, /*required=*/false)) {
      return Fail(DecodeError::kBadString, "batch cgroup");
    }
    const size_t len = ::strnlen(reinterpret_cast<const char*>(p + kHdrCgroup), kCgroupSize);
    if (len > 0 && !ValidCgroupPath(reinterpret_cast<const char*>(p + kHdrCgroup), len)) {
      return Fail(DecodeError::kBadString, "batch cgroup: not a cgroup v2 path");
    }
    std::memcpy(out.cgroup.mutable_bytes(), p + kHdrCgroup, kCgroupSize);
    for (size_t i = 0; i < kMaxGpuSlots; ++i) {
      const uint8_t* slot = p + kHdrGpus + i * kGpuSlotSize;
      GpuSlot g;
      g.present = slot[7] == 1;
      g.domain = Get32(slot);
      g.bus = slot[4];
      g.device = slot[5];
      g.function = slot[6];
      if (slot[7] > 1 || g.device > 0x1f || g.function > 7 ||
          (!g.present && (g.domain != 0 || g.bus != 0 || g.device != 0 || g.function != 0))) {
        return Fail(DecodeError::kBadValue, "batch GPU table slot");
      }
      out.gpus[i] = g;
    }
  }
  out.record_count = count;
  out.dropped = dropped;
  std::memcpy(out.job_id.mutable_bytes(), p + kHdrJobId, kJobIdSize);
  *h = out;
  *frame_size = header_size + static_cast<size_t>(count) * kRecordSize;
  return {};
}

DecodeStatus ValidateRecord(const CollectiveRecordFields& r) noexcept {
  if ((r.flags & ~kRecordKnownFlags) != 0) return Fail(DecodeError::kBadValue, "unknown flags");
  if (r.nranks == 0 || r.nranks > kMaxRanks) return Fail(DecodeError::kBadValue, "nranks");
  if (r.rank >= r.nranks) return Fail(DecodeError::kBadValue, "rank not below nranks");
  if (r.pid == 0 || r.pid > kMaxPid) return Fail(DecodeError::kBadValue, "pid");
  if (r.bytes > kMaxBytes) return Fail(DecodeError::kBadValue, "bytes");
  if (r.channels > kMaxChannels) return Fail(DecodeError::kBadValue, "channels");
  if (r.cuda_device < -1 || r.cuda_device > kMaxCudaDevice) {
    return Fail(DecodeError::kBadValue, "cuda device");
  }
  if (!InTimeRange(r.enqueue_unix_nanos)) return Fail(DecodeError::kBadValue, "enqueue time");
  if ((r.flags & kRecordFlagKernelTimes) != 0) {
    if (!InTimeRange(r.kernel_start_unix_nanos) || !InTimeRange(r.kernel_stop_unix_nanos)) {
      return Fail(DecodeError::kBadValue, "kernel times");
    }
    if (r.kernel_stop_unix_nanos < r.kernel_start_unix_nanos ||
        r.kernel_stop_unix_nanos - r.kernel_start_unix_nanos > kMaxKernelNanos) {
      return Fail(DecodeError::kBadValue, "kernel stop before start or a day after it");
    }
  } else if (r.kernel_start_unix_nanos != 0 || r.kernel_stop_unix_nanos != 0) {
    return Fail(DecodeError::kBadValue, "kernel times without the kernel-times flag");
  }
  const auto field = [](const auto& s, bool required) {
    return ValidField(reinterpret_cast<const uint8_t*>(s.bytes()), sizeof(s), required);
  };
  if (!field(r.job_id, true)) return Fail(DecodeError::kBadString, "job_id");
  if (!field(r.comm_name, false)) return Fail(DecodeError::kBadString, "comm_name");
  if (!field(r.host, true)) return Fail(DecodeError::kBadString, "host");
  if (!field(r.function, true)) return Fail(DecodeError::kBadString, "function");
  if (!field(r.algorithm, false)) return Fail(DecodeError::kBadString, "algorithm");
  if (!field(r.protocol, false)) return Fail(DecodeError::kBadString, "protocol");
  return {};
}

DecodeStatus DecodeRecord(const uint8_t* p, size_t size, CollectiveRecordFields* r,
                          uint16_t version) noexcept {
  if (size >= 4 && Get32(p + kRecMagic) != kRecordMagic) {
    return Fail(DecodeError::kBadMagic, "record magic is not RSCR");
  }
  if (size >= 6 && Get16(p + kRecVersion) != kRecordLayoutVersion) {
    return Fail(DecodeError::kBadVersion, "record version is not 1");
  }
  if (size < kRecordSize) return Fail(DecodeError::kTruncated, "record incomplete");
  if (Get16(p + kRecLength) != kRecordSize) {
    return Fail(DecodeError::kBadLength, "record length is not 352");
  }
  if (Get16(p + kRecReserved16) != 0) {
    return Fail(DecodeError::kBadValue, "record reserved bytes not zero");
  }
  const uint32_t device = Get32(p + kRecDevice);
  if (version < kFormatVersion3 && device != 0) {
    return Fail(DecodeError::kBadValue, "record reserved bytes not zero");
  }
  if (device > static_cast<uint32_t>(kMaxCudaDevice) + 1) {
    return Fail(DecodeError::kBadValue, "cuda device");
  }
  CollectiveRecordFields out;
  out.cuda_device = static_cast<int32_t>(device) - 1;
  out.flags = Get32(p + kRecFlags);
  out.rank = Get32(p + kRecRank);
  out.nranks = Get32(p + kRecNranks);
  out.pid = Get32(p + kRecPid);
  out.comm_id = Get64(p + kRecCommId);
  out.seq = Get64(p + kRecSeq);
  out.bytes = Get64(p + kRecBytes);
  out.kernel_start_unix_nanos = static_cast<int64_t>(Get64(p + kRecKernelStart));
  out.kernel_stop_unix_nanos = static_cast<int64_t>(Get64(p + kRecKernelStop));
  out.enqueue_unix_nanos = static_cast<int64_t>(Get64(p + kRecEnqueue));
  out.channels = Get16(p + kRecChannels);
  std::memcpy(out.job_id.mutable_bytes(), p + kRecJobId, kJobIdSize);
  std::memcpy(out.comm_name.mutable_bytes(), p + kRecCommName, kCommNameSize);
  std::memcpy(out.host.mutable_bytes(), p + kRecHost, kHostSize);
  std::memcpy(out.function.mutable_bytes(), p + kRecFunction, kFunctionSize);
  std::memcpy(out.algorithm.mutable_bytes(), p + kRecAlgorithm, kAlgorithmSize);
  std::memcpy(out.protocol.mutable_bytes(), p + kRecProtocol, kProtocolSize);
  DecodeStatus s = ValidateRecord(out);
  if (!s.ok()) return s;
  *r = out;
  return {};
}

DecodeStatus DecodeFrame(const uint8_t* data, size_t size, BatchHeaderFields* header,
                         CollectiveRecordFields* records, size_t capacity) noexcept {
  BatchHeaderFields h;
  size_t frame_size = 0;
  DecodeStatus s = DecodeBatchHeader(data, size, &h, &frame_size);
  if (!s.ok()) return s;
  if (size < frame_size) return Fail(DecodeError::kTruncated, "frame shorter than its records");
  if (size > frame_size) return Fail(DecodeError::kBadLength, "bytes past the frame's records");
  if (h.record_count > capacity) return Fail(DecodeError::kOversized, "more records than room");
  for (uint32_t i = 0; i < h.record_count; ++i) {
    s = DecodeRecord(data + h.header_size() + i * kRecordSize, kRecordSize, &records[i],
                     h.version);
    if (!s.ok()) return s;
  }
  *header = h;
  return {};
}

}  // namespace ringside::collectors
