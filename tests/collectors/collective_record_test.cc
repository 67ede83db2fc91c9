// The collective-record wire format: the documented layout, the round trip to ringside.v1, every
// rejection with its reason, and random corruptions of valid frames (never a crash; either
// rejected or decoded to exactly what re-encodes to the corrupted bytes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/record_proto.h"

namespace ringside::collectors {
namespace {

CollectiveRecordFields SampleRecord(int i = 0) {
  CollectiveRecordFields r;
  r.flags = kRecordFlagClockSynchronized | kRecordFlagKernelTimes;
  r.rank = 3 + i % 4;
  r.nranks = 8;
  r.pid = 4242 + i;
  r.comm_id = 0xfeedface12345678ull + i;
  r.seq = 17 + i;
  r.bytes = 4 << 20;
  r.kernel_start_unix_nanos = 1'700'000'000'000'000'000 + i * 1'000'000;
  r.kernel_stop_unix_nanos = r.kernel_start_unix_nanos + 250'000;
  r.enqueue_unix_nanos = r.kernel_start_unix_nanos - 40'000;
  r.channels = 16;
  r.job_id.Set("slurm-981273");
  r.comm_name.Set("dp-group-0");
  r.host.Set("gpu-node-17");
  r.function.Set("AllReduce");
  r.algorithm.Set("RING");
  r.protocol.Set("SIMPLE");
  return r;
}

// A version-3 frame: version 2's header (the pod, when given), records with their CUDA device.
std::string FrameV3(const std::vector<CollectiveRecordFields>& records, uint64_t dropped = 0,
                    const char* job = "slurm-981273", const char* pod = "",
                    const char* pod_namespace = "") {
  BatchHeaderFields h;
  h.version = kFormatVersion3;
  h.dropped = dropped;
  h.job_id.Set(job);
  h.pod.Set(pod);
  h.pod_namespace.Set(pod_namespace);
  absl::StatusOr<std::string> f = EncodeFrame(h, records);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *f : "";
}

std::string Frame(const std::vector<CollectiveRecordFields>& records, uint64_t dropped = 0,
                  const char* job = "slurm-981273", const char* pod = nullptr,
                  const char* pod_namespace = nullptr) {
  BatchHeaderFields h;
  h.dropped = dropped;
  h.job_id.Set(job);
  if (pod != nullptr) {  // format version 2
    h.version = kFormatVersion2;
    h.pod.Set(pod);
    h.pod_namespace.Set(pod_namespace);
  }
  absl::StatusOr<std::string> f = EncodeFrame(h, records);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *f : "";
}

const uint8_t* Bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }
uint8_t* Bytes(std::string& s) { return reinterpret_cast<uint8_t*>(s.data()); }

DecodeStatus DecodeAll(const std::string& frame, BatchHeaderFields* h = nullptr,
                       std::vector<CollectiveRecordFields>* out = nullptr) {
  BatchHeaderFields header;
  std::vector<CollectiveRecordFields> records(kMaxRecordsPerBatch);
  DecodeStatus s = DecodeFrame(Bytes(frame), frame.size(), &header, records.data(), records.size());
  if (s.ok()) {
    records.resize(header.record_count);
    if (h) *h = header;
    if (out) *out = records;
  }
  return s;
}

DecodeError ErrorOf(const std::string& frame) { return DecodeAll(frame).error; }

// Writes little-endian value v of `width` bytes at `off`.
void Poke(std::string& s, size_t off, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) s[off + i] = static_cast<char>(v >> (8 * i));
}

constexpr size_t kRec0 = kBatchHeaderSize;  // offset of the first record in a frame

TEST(CollectiveRecordTest, LayoutIsTheDocumentedOne) {
  CollectiveRecordFields r = SampleRecord();
  std::string f = Frame({r}, 5);
  ASSERT_EQ(f.size(), 96u + 352u);
  EXPECT_EQ(f.substr(0, 4), "RSCB");
  EXPECT_EQ(f[4], 1);                                // version
  EXPECT_EQ(static_cast<uint8_t>(f[6]), 96);         // header_length
  EXPECT_EQ(f[12], 1);                               // record_count
  EXPECT_EQ(Bytes(f)[16] | Bytes(f)[17] << 8, 352);  // record_length
  EXPECT_EQ(f[24], 5);                               // dropped
  EXPECT_EQ(std::string(f.data() + 32), "slurm-981273");
  const std::string rec = f.substr(kRec0);
  EXPECT_EQ(rec.substr(0, 4), "RSCR");
  EXPECT_EQ(rec[4], 1);
  EXPECT_EQ(Bytes(rec)[6] | Bytes(rec)[7] << 8, 352);
  EXPECT_EQ(rec[8], 3);   // flags
  EXPECT_EQ(rec[12], 3);  // rank
  EXPECT_EQ(rec[16], 8);  // nranks
  uint64_t comm_id;
  std::memcpy(&comm_id, rec.data() + 24, 8);  // little-endian host (x86-64, aarch64)
  EXPECT_EQ(comm_id, r.comm_id);
  EXPECT_EQ(rec[72], 16);  // channels
  EXPECT_EQ(std::string(rec.data() + 80), "slurm-981273");
  EXPECT_EQ(std::string(rec.data() + 144), "dp-group-0");
  EXPECT_EQ(std::string(rec.data() + 208), "gpu-node-17");
  EXPECT_EQ(std::string(rec.data() + 272), "AllReduce");
  EXPECT_EQ(std::string(rec.data() + 304), "RING");
  EXPECT_EQ(std::string(rec.data() + 336), "SIMPLE");
}

TEST(CollectiveRecordTest, RoundTripKeepsEveryField) {
  std::vector<CollectiveRecordFields> in;
  for (int i = 0; i < 3; ++i) in.push_back(SampleRecord(i));
  in[2].flags = 0;  // no kernel times, clock not synchronised
  in[2].kernel_start_unix_nanos = in[2].kernel_stop_unix_nanos = 0;
  in[2].comm_name.Set("");
  in[2].algorithm.Set("");
  in[2].protocol.Set("");
  BatchHeaderFields h;
  std::vector<CollectiveRecordFields> out;
  ASSERT_TRUE(DecodeAll(Frame(in, 77), &h, &out).ok());
  EXPECT_EQ(h.record_count, 3u);
  EXPECT_EQ(h.dropped, 77u);
  EXPECT_STREQ(h.job_id.c_str(), "slurm-981273");
  EXPECT_EQ(out, in);
}

TEST(CollectiveRecordTest, ProtoHasEveryField) {
  CollectiveRecordFields r = SampleRecord();
  absl::StatusOr<v1::CollectiveBatch> b = DecodeFrameToProto(
      absl::MakeSpan(Bytes(Frame({r}, 9, "job-a")), kBatchHeaderSize + kRecordSize));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->records_size(), 1);
  const v1::CollectiveRecord& p = b->records(0);
  EXPECT_EQ(p.job_id(), "slurm-981273");
  EXPECT_EQ(p.comm_id(), r.comm_id);
  EXPECT_EQ(p.comm_name(), "dp-group-0");
  EXPECT_EQ(p.rank(), 3u);
  EXPECT_EQ(p.nranks(), 8u);
  EXPECT_EQ(p.function(), "AllReduce");
  EXPECT_EQ(p.seq(), 17u);
  EXPECT_EQ(p.bytes(), 4u << 20);
  EXPECT_EQ(p.algorithm(), "RING");
  EXPECT_EQ(p.protocol(), "SIMPLE");
  EXPECT_EQ(p.channels(), 16u);
  EXPECT_EQ(p.kernel_start_unix_nanos(), r.kernel_start_unix_nanos);
  EXPECT_EQ(p.kernel_stop_unix_nanos(), r.kernel_stop_unix_nanos);
  EXPECT_EQ(p.enqueue_unix_nanos(), r.enqueue_unix_nanos);
  EXPECT_EQ(p.pid(), 4242u);
  EXPECT_EQ(p.host(), "gpu-node-17");
  EXPECT_TRUE(p.clock_synchronized());
  ASSERT_EQ(b->dropped_by_job().size(), 1u);
  EXPECT_EQ(b->dropped_by_job().at("job-a"), 9u);
}

TEST(CollectiveRecordTest, EmptyBatchCarriesOnlyTheDropCount) {
  BatchHeaderFields h;
  ASSERT_TRUE(DecodeAll(Frame({}, 1'000'000), &h).ok());
  EXPECT_EQ(h.record_count, 0u);
  EXPECT_EQ(h.dropped, 1'000'000u);
}

TEST(CollectiveRecordTest, RejectsMalformedHeaders) {
  const std::string good = Frame({SampleRecord()});
  std::string f = good;
  f[0] = 'X';
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadMagic);
  EXPECT_EQ(ErrorOf("GET / HTTP/1.0\r\n\r\n"), DecodeError::kBadMagic);
  f = good;
  Poke(f, 4, 5, 2);
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadVersion);
  f = good;
  Poke(f, 4, 3, 2);  // a version-1 header claiming version 3: its header_length is 96, not 416
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadLength);
  f = good;
  Poke(f, 4, 0, 2);
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadVersion);
  f = good;
  Poke(f, 4, 2, 2);  // a version-1 header claiming version 2: its header_length is 96, not 416
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadLength);
  f = good;
  Poke(f, 6, 128, 2);
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadLength);
  f = good;
  Poke(f, 16, 351, 2);
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadLength);
  f = good;
  Poke(f, 12, 257, 4);
  EXPECT_EQ(ErrorOf(f), DecodeError::kOversized);
  f = good;
  Poke(f, 12, 0xffffffff, 4);
  EXPECT_EQ(ErrorOf(f), DecodeError::kOversized);
  f = good;
  Poke(f, 8, 1, 4);
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadValue);  // flags
  f = good;
  Poke(f, 20, 1, 4);
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadValue);  // reserved
  f = good;
  Poke(f, 24, ~0ull, 8);
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadValue);  // dropped
  f = good;
  std::memset(f.data() + 32, 'a', 64);
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadString);  // job id not terminated
  f = good;
  f[32] = '\0';
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadString);  // job id empty
}

TEST(CollectiveRecordTest, RejectsTruncatedAndOverlongFrames) {
  const std::string good = Frame({SampleRecord(), SampleRecord(1)});
  EXPECT_EQ(ErrorOf(good.substr(0, 10)), DecodeError::kTruncated);
  EXPECT_EQ(ErrorOf(good.substr(0, 95)), DecodeError::kTruncated);
  EXPECT_EQ(ErrorOf(good.substr(0, good.size() - 1)), DecodeError::kTruncated);
  EXPECT_EQ(ErrorOf(good.substr(0, 96 + 352)), DecodeError::kTruncated);
  EXPECT_EQ(ErrorOf(good + "x"), DecodeError::kBadLength);
  CollectiveRecordFields r;
  EXPECT_EQ(DecodeRecord(Bytes(good) + kRec0, 351, &r).error, DecodeError::kTruncated);
  // The header alone says how long the frame is.
  BatchHeaderFields h;
  size_t frame_size = 0;
  ASSERT_TRUE(DecodeBatchHeader(Bytes(good), 96, &h, &frame_size).ok());
  EXPECT_EQ(frame_size, 96u + 2 * 352u);
  // A frame with more records than the caller has room for.
  std::vector<CollectiveRecordFields> one(1);
  EXPECT_EQ(DecodeFrame(Bytes(good), good.size(), &h, one.data(), 1).error,
            DecodeError::kOversized);
}

struct RecordCase {
  const char* name;
  size_t offset;  // within the record
  uint64_t value;
  int width;
  DecodeError error;
};

TEST(CollectiveRecordTest, RejectsEveryMalformedRecordWithItsReason) {
  const std::string good = Frame({SampleRecord()});
  const RecordCase cases[] = {
      {"magic", 0, 0x52435353, 4, DecodeError::kBadMagic},
      {"version", 4, 0, 2, DecodeError::kBadVersion},
      {"length", 6, 353, 2, DecodeError::kBadLength},
      {"unknown flag", 8, 4, 4, DecodeError::kBadValue},
      {"rank = nranks", 12, 8, 4, DecodeError::kBadValue},
      {"nranks 0", 16, 0, 4, DecodeError::kBadValue},
      {"nranks absurd", 16, (1u << 24) + 1, 4, DecodeError::kBadValue},
      {"pid 0", 20, 0, 4, DecodeError::kBadValue},
      {"pid absurd", 20, 1u << 30, 4, DecodeError::kBadValue},
      {"bytes absurd", 40, (1ull << 50) + 1, 8, DecodeError::kBadValue},
      {"kernel start 0", 48, 0, 8, DecodeError::kBadValue},
      {"kernel stop before start", 56, 1'600'000'000'000'000'000ull, 8, DecodeError::kBadValue},
      {"kernel a day long", 56, 1'700'000'000'000'000'000ull + 86'401'000'000'000ull, 8,
       DecodeError::kBadValue},
      {"enqueue 0", 64, 0, 8, DecodeError::kBadValue},
      {"enqueue negative", 64, ~0ull, 8, DecodeError::kBadValue},
      {"enqueue after 2200", 64, 7'300'000'000'000'000'000ull, 8, DecodeError::kBadValue},
      {"channels 256", 72, 256, 2, DecodeError::kBadValue},
      {"reserved16", 74, 1, 2, DecodeError::kBadValue},
      {"reserved32", 76, 1, 4, DecodeError::kBadValue},
      {"job id empty", 80, 0, 1, DecodeError::kBadString},
      {"host empty", 208, 0, 1, DecodeError::kBadString},
      {"function empty", 272, 0, 1, DecodeError::kBadString},
      {"control character", 272 + 3, '\n', 1, DecodeError::kBadString},
      {"DEL", 144, 0x7f, 1, DecodeError::kBadString},
      {"invalid UTF-8", 144, 0xff, 1, DecodeError::kBadString},
      {"stray continuation byte", 144, 0x80, 1, DecodeError::kBadString},
      {"overlong UTF-8", 144, 0xafc0, 2, DecodeError::kBadString},
      {"UTF-16 surrogate", 144, 0x80a0ed, 3, DecodeError::kBadString},
      {"byte after the terminator", 336 + 10, 'x', 1, DecodeError::kBadString},
  };
  for (const RecordCase& c : cases) {
    std::string f = good;
    Poke(f, kRec0 + c.offset, c.value, c.width);
    const DecodeStatus s = DecodeAll(f);
    EXPECT_EQ(s.error, c.error) << c.name << ": " << DecodeErrorName(s.error) << " " << s.detail;
    EXPECT_NE(std::string(s.detail), "") << c.name;
  }
  // A string field with no terminator.
  std::string f = good;
  std::memset(f.data() + kRec0 + 336, 'A', 16);
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadString);
  // Kernel times without the flag, and the flag without times.
  f = good;
  Poke(f, kRec0 + 8, kRecordFlagClockSynchronized, 4);
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadValue);
  CollectiveRecordFields r = SampleRecord();
  r.kernel_start_unix_nanos = r.kernel_stop_unix_nanos = 0;
  EXPECT_EQ(ErrorOf(Frame({r})), DecodeError::kBadValue);
}

TEST(CollectiveRecordTest, StatusesAreDataLossWithTheReason) {
  std::string f = Frame({SampleRecord()});
  f[0] = 'Z';
  absl::StatusOr<v1::CollectiveBatch> b = DecodeFrameToProto(absl::MakeSpan(Bytes(f), f.size()));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(b.status().message(), "collective record: bad_magic: batch magic is not RSCB");
  EXPECT_TRUE(DecodeStatusToAbsl(DecodeStatus{}).ok());
}

TEST(CollectiveRecordTest, FixedStringsAreAlwaysValidOnTheWire) {
  FixedString<8> s;
  s.Set("abcdefghijk");
  EXPECT_STREQ(s.c_str(), "abcdefg");   // 7 bytes and the terminator
  s.Set("ab\xc3\xa9\xc3\xa9\xc3\xa9");  // "abééé": é is two bytes; cut before a split é
  EXPECT_STREQ(s.c_str(), "ab\xc3\xa9\xc3\xa9");
  s.Set(
      "a\tb\x7f"
      "c\xff");
  EXPECT_STREQ(s.c_str(), "a?b?c?");
  s.Set(nullptr);
  EXPECT_TRUE(s.empty());
  s.Set("xyz", 2);
  EXPECT_STREQ(s.c_str(), "xy");
  // Whatever the plugin is given, the record it encodes decodes.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng() % 100, '\0');
    for (char& ch : junk) ch = static_cast<char>(rng());
    CollectiveRecordFields r = SampleRecord();
    r.comm_name.Set(junk.data(), junk.size());
    r.algorithm.Set(junk.data(), junk.size());
    r.job_id.Set(junk.data(), junk.size());
    if (r.job_id.empty()) r.job_id.Set("j");
    std::string f = Frame({r});
    std::vector<CollectiveRecordFields> out;
    ASSERT_TRUE(DecodeAll(f, nullptr, &out).ok()) << i;
    EXPECT_EQ(out[0], r);
  }
}

// Random corruptions of valid frames: a flipped bit, a random byte, a run of random bytes, a cut,
// an extension, or pure garbage. The decoder never crashes; what it accepts is canonical (it
// re-encodes to exactly the bytes it was given), and what it rejects comes with a reason.
TEST(CollectiveRecordTest, RandomCorruptionsAreRejectedOrDecodedIdentically) {
  std::mt19937_64 rng(20240611);
  int accepted = 0, rejected = 0;
  int by_reason[kDecodeErrorCount] = {};
  for (int iter = 0; iter < 60000; ++iter) {
    std::vector<CollectiveRecordFields> records;
    const int n = static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) records.push_back(SampleRecord(static_cast<int>(rng() % 1000)));
    // A third of the frames in version 2, with a pod identity; a third in version 3, whose
    // records carry a CUDA device (or none).
    const int version = 1 + static_cast<int>(rng() % 3);
    if (version == 3) {
      for (CollectiveRecordFields& r : records) r.cuda_device = static_cast<int32_t>(rng() % 9) - 1;
    }
    const std::string original =
        version == 2   ? Frame(records, rng() % 1000, "slurm-981273", "trainer-7f9c-0",
                               "ml-research")
        : version == 3 ? FrameV3(records, rng() % 1000, "slurm-981273", "trainer-7f9c-0",
                                 "ml-research")
                       : Frame(records, rng() % 1000);
    std::string f = original;
    switch (rng() % 6) {
      case 0:
        f[rng() % f.size()] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:
        f[rng() % f.size()] = static_cast<char>(rng());
        break;
      case 2: {
        const size_t at = rng() % f.size();
        const size_t len = std::min<size_t>(1 + rng() % 16, f.size() - at);
        for (size_t i = 0; i < len; ++i) f[at + i] = static_cast<char>(rng());
        break;
      }
      case 3:
        f.resize(rng() % f.size());
        break;
      case 4:
        f.append(1 + rng() % 400, static_cast<char>(rng()));
        break;
      case 5:
        for (char& c : f) c = static_cast<char>(rng());
        break;
    }
    BatchHeaderFields h;
    std::vector<CollectiveRecordFields> out;
    const DecodeStatus s = DecodeAll(f, &h, &out);
    if (s.ok()) {
      ++accepted;
      absl::StatusOr<std::string> again = EncodeFrame(h, out);
      ASSERT_TRUE(again.ok());
      ASSERT_EQ(*again, f) << "accepted a non-canonical frame at iteration " << iter;
      if (f == original) {
        EXPECT_EQ(out, records);
      }
    } else {
      ++rejected;
      ++by_reason[static_cast<int>(s.error)];
      EXPECT_NE(std::string(DecodeErrorName(s.error)), "ok");
    }
  }
  // Both outcomes happen (a flipped bit in a sequence number is a valid frame, a flipped magic is
  // not), and every reason is exercised.
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(rejected, 1000);
  for (int e = 1; e < kDecodeErrorCount; ++e) {
    EXPECT_GT(by_reason[e], 0) << DecodeErrorName(static_cast<DecodeError>(e));
  }
}

// --- Format version 2: the pod identity in the batch header ---------------------------------------

TEST(CollectiveRecordTest, VersionTwoLayoutCarriesThePodAfterTheVersionOneHeader) {
  const std::string f = Frame({SampleRecord()}, 5, "job-a", "trainer-0", "ml-team");
  ASSERT_EQ(f.size(), 416u + 352u);
  EXPECT_EQ(f.substr(0, 4), "RSCB");
  EXPECT_EQ(f[4], 2);                               // version
  EXPECT_EQ(Bytes(f)[6] | Bytes(f)[7] << 8, 416);   // header_length
  EXPECT_EQ(f[12], 1);                              // record_count
  EXPECT_EQ(Bytes(f)[16] | Bytes(f)[17] << 8, 352);  // record_length: records did not change
  EXPECT_EQ(f[24], 5);                              // dropped
  EXPECT_EQ(std::string(f.data() + 32), "job-a");
  EXPECT_EQ(std::string(f.data() + 96), "trainer-0");
  EXPECT_EQ(std::string(f.data() + 352), "ml-team");
  for (size_t i = 96 + 9; i < 352; ++i) ASSERT_EQ(f[i], 0) << i;  // zero-padded
  // The record is byte for byte the version-1 record, layout version 1 included.
  EXPECT_EQ(f.substr(416), Frame({SampleRecord()}, 5, "job-a").substr(96));
  EXPECT_EQ(f[416 + 4], 1);
}

TEST(CollectiveRecordTest, VersionTwoRoundTripsWithThePodOnEveryRecord) {
  std::vector<CollectiveRecordFields> in = {SampleRecord(0), SampleRecord(1)};
  // The longest names Kubernetes allows.
  const std::string pod = std::string(250, 'p') + "-x9";
  const std::string ns = std::string(62, 'n') + "1";
  const std::string f = Frame(in, 3, "job-a", pod.c_str(), ns.c_str());
  BatchHeaderFields h;
  std::vector<CollectiveRecordFields> out;
  ASSERT_TRUE(DecodeAll(f, &h, &out).ok()) << DecodeAll(f).detail;
  EXPECT_EQ(h.version, kFormatVersion2);
  EXPECT_EQ(h.pod.c_str(), pod);
  EXPECT_EQ(h.pod_namespace.c_str(), ns);
  EXPECT_EQ(out, in);
  absl::StatusOr<std::string> again = EncodeFrame(h, out);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, f);

  absl::StatusOr<v1::CollectiveBatch> b =
      DecodeFrameToProto(absl::MakeSpan(Bytes(f), f.size()));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->records_size(), 2);
  for (const v1::CollectiveRecord& r : b->records()) {
    EXPECT_EQ(r.pod(), pod);
    EXPECT_EQ(r.pod_namespace(), ns);
  }
  EXPECT_EQ(b->dropped_by_job().at("job-a"), 3u);
}

TEST(CollectiveRecordTest, VersionOneFramesStillDecodeWithNoPod) {
  const std::string f = Frame({SampleRecord()}, 0, "job-a");
  BatchHeaderFields h;
  ASSERT_TRUE(DecodeAll(f, &h).ok());
  EXPECT_EQ(h.version, kFormatVersion1);
  EXPECT_TRUE(h.pod.empty());
  EXPECT_TRUE(h.pod_namespace.empty());
  absl::StatusOr<v1::CollectiveBatch> b =
      DecodeFrameToProto(absl::MakeSpan(Bytes(f), f.size()));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->records(0).pod(), "");
  EXPECT_EQ(b->records(0).pod_namespace(), "");
  // A version-2 frame without a pod (both empty) is valid too, and equally pod-less.
  ASSERT_TRUE(DecodeAll(Frame({SampleRecord()}, 0, "job-a", "", ""), &h).ok());
  EXPECT_EQ(h.version, kFormatVersion2);
  EXPECT_TRUE(h.pod.empty());
}

TEST(CollectiveRecordTest, RejectsGarbageAndOversizedPodIdentities) {
  const auto error = [](const std::string& pod, const std::string& ns) {
    // Written straight into the fields, past FixedString's sanitising.
    std::string f = Frame({SampleRecord()}, 0, "job-a", "x", "y");
    std::memset(f.data() + 96, 0, 256 + 64);
    std::memcpy(f.data() + 96, pod.data(), std::min<size_t>(pod.size(), 256));
    std::memcpy(f.data() + 352, ns.data(), std::min<size_t>(ns.size(), 64));
    return DecodeAll(f);
  };
  EXPECT_TRUE(error("trainer-0", "ml-team").ok());
  EXPECT_TRUE(error("web.v2-0", "default").ok());
  struct Case {
    std::string pod, ns, why;
  };
  const std::vector<Case> bad = {
      {std::string(254, 'a'), "ml", "pod longer than 253"},
      {std::string(256, 'a'), "ml", "pod not terminated"},
      {"trainer-0", std::string(64, 'n'), "namespace not terminated"},
      {"Trainer-0", "ml", "upper case"},
      {"trainer_0", "ml", "underscore"},
      {"trainer 0", "ml", "space"},
      {"trainer\n0", "ml", "control character"},
      {"tr\xc3\xa4iner", "ml", "non-ASCII"},
      {"trainer-0", "ml.team", "a dot in a namespace"},
      {"trainer-0", "", "pod without namespace"},
      {"", "ml", "namespace without pod"},
      {std::string("trainer\0x", 9), "ml", "bytes after the terminator"},
  };
  for (const Case& c : bad) {
    const DecodeStatus s = error(c.pod, c.ns);
    EXPECT_EQ(s.error, DecodeError::kBadString) << c.why << ": " << s.detail;
  }
  // A version-2 header cut short anywhere is truncated, not garbage: the listener waits for more.
  const std::string good = Frame({SampleRecord()}, 0, "job-a", "trainer-0", "ml-team");
  for (size_t n : {6, 95, 96, 97, 300, 415}) {
    BatchHeaderFields h;
    size_t frame_size = 0;
    EXPECT_EQ(DecodeBatchHeader(Bytes(good), n, &h, &frame_size).error, DecodeError::kTruncated)
        << n;
  }
  BatchHeaderFields h;
  size_t frame_size = 0;
  ASSERT_TRUE(DecodeBatchHeader(Bytes(good), 416, &h, &frame_size).ok());
  EXPECT_EQ(frame_size, 416u + 352u);
}

TEST(CollectiveRecordTest, PodNamesAreValidatedTheKubernetesWay) {
  EXPECT_TRUE(ValidPodName("a", 1));
  EXPECT_TRUE(ValidPodName("trainer-0.web", 13));
  EXPECT_FALSE(ValidPodName("", 0));
  EXPECT_FALSE(ValidPodName(nullptr, 3));
  const std::string longest(253, 'a');
  EXPECT_TRUE(ValidPodName(longest.c_str(), longest.size()));
  EXPECT_FALSE(ValidPodName(longest.c_str(), 254));
  EXPECT_TRUE(ValidPodNamespace("kube-system", 11));
  EXPECT_FALSE(ValidPodNamespace("kube.system", 11));
  const std::string ns(64, 'n');
  EXPECT_TRUE(ValidPodNamespace(ns.c_str(), 63));
  EXPECT_FALSE(ValidPodNamespace(ns.c_str(), 64));
}

}  // namespace
}  // namespace ringside::collectors

namespace ringside::collectors {
namespace {

// --- Format version 3: the CUDA device in every record --------------------------------------------

TEST(CollectiveRecordTest, VersionThreeCarriesTheCudaDeviceInTheRecordsReservedBytes) {
  CollectiveRecordFields r = SampleRecord();
  r.cuda_device = 6;
  const std::string f = FrameV3({r}, 5, "job-a", "trainer-0", "ml-team");
  ASSERT_EQ(f.size(), 416u + 352u);
  EXPECT_EQ(f[4], 3);                               // version
  EXPECT_EQ(Bytes(f)[6] | Bytes(f)[7] << 8, 416);   // header_length: version 2's header
  EXPECT_EQ(Bytes(f)[16] | Bytes(f)[17] << 8, 352);  // record_length: records did not grow
  EXPECT_EQ(std::string(f.data() + 96), "trainer-0");
  EXPECT_EQ(std::string(f.data() + 352), "ml-team");
  const std::string rec = f.substr(416);
  EXPECT_EQ(rec[4], 1);  // the record's own layout version is unchanged
  uint32_t device = 0;
  std::memcpy(&device, rec.data() + 76, 4);
  EXPECT_EQ(device, 7u) << "cuda_device + 1";
  EXPECT_EQ(rec[74], 0);
  EXPECT_EQ(rec[75], 0);
  // Everything else is the version-2 record byte for byte; version 2 keeps bytes 76–79 zero.
  std::string v2 = Frame({r}, 5, "job-a", "trainer-0", "ml-team").substr(416);
  for (int i = 76; i < 80; ++i) EXPECT_EQ(v2[i], 0) << i;
  v2.replace(76, 4, rec.substr(76, 4));
  EXPECT_EQ(rec, v2);
  // An unknown device is 0 on the wire.
  r.cuda_device = -1;
  EXPECT_EQ(FrameV3({r}).substr(416 + 76, 4), std::string(4, '\0'));
}

TEST(CollectiveRecordTest, VersionThreeRoundTripsTheDeviceIntoTheProto) {
  std::vector<CollectiveRecordFields> in = {SampleRecord(0), SampleRecord(1), SampleRecord(2)};
  in[0].cuda_device = 0;  // ordinal 0 is a device, not "unknown"
  in[1].cuda_device = 1;
  in[2].cuda_device = -1;
  const std::string f = FrameV3(in, 2, "job-a", "trainer-0", "ml-team");
  BatchHeaderFields h;
  std::vector<CollectiveRecordFields> out;
  ASSERT_TRUE(DecodeAll(f, &h, &out).ok()) << DecodeAll(f).detail;
  EXPECT_EQ(h.version, kFormatVersion3);
  EXPECT_STREQ(h.pod.c_str(), "trainer-0");
  EXPECT_EQ(out, in);
  absl::StatusOr<std::string> again = EncodeFrame(h, out);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, f);

  absl::StatusOr<v1::CollectiveBatch> b = DecodeFrameToProto(absl::MakeSpan(Bytes(f), f.size()));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->records_size(), 3);
  ASSERT_TRUE(b->records(0).has_cuda_device());
  EXPECT_EQ(b->records(0).cuda_device(), 0);
  ASSERT_TRUE(b->records(1).has_cuda_device());
  EXPECT_EQ(b->records(1).cuda_device(), 1);
  EXPECT_FALSE(b->records(2).has_cuda_device());
  EXPECT_EQ(b->records(1).pod(), "trainer-0");
  // Without a pod, version 3 is just as valid.
  ASSERT_TRUE(DecodeAll(FrameV3(in), &h).ok());
  EXPECT_TRUE(h.pod.empty());
}

TEST(CollectiveRecordTest, OlderVersionsCarryNoDeviceAndRejectOneInTheirReservedBytes) {
  CollectiveRecordFields r = SampleRecord();
  r.cuda_device = 2;
  for (const std::string& f : {Frame({r}), Frame({r}, 0, "job-a", "trainer-0", "ml-team")}) {
    std::vector<CollectiveRecordFields> out;
    ASSERT_TRUE(DecodeAll(f, nullptr, &out).ok());
    EXPECT_EQ(out[0].cuda_device, -1) << "versions 1 and 2 have no device";
    absl::StatusOr<v1::CollectiveBatch> b =
        DecodeFrameToProto(absl::MakeSpan(Bytes(f), f.size()));
    ASSERT_TRUE(b.ok());
    EXPECT_FALSE(b->records(0).has_cuda_device());
    // A device in a version-1 or -2 record: reserved bytes that are not zero.
    std::string bad = f;
    Poke(bad, f.size() - kRecordSize + 76, 3, 4);
    EXPECT_EQ(ErrorOf(bad), DecodeError::kBadValue);
  }
  // Version 3: a device number past any real one.
  std::string f = FrameV3({r});
  Poke(f, 416 + 76, static_cast<uint64_t>(kMaxCudaDevice) + 2, 4);
  EXPECT_EQ(ErrorOf(f), DecodeError::kBadValue);
  Poke(f, 416 + 76, static_cast<uint64_t>(kMaxCudaDevice) + 1, 4);
  EXPECT_TRUE(DecodeAll(f).ok());
  // A record decoded on its own reads the newest version unless told the frame's.
  const std::string v3 = FrameV3({r});
  CollectiveRecordFields one;
  ASSERT_TRUE(DecodeRecord(Bytes(v3) + 416, kRecordSize, &one).ok());
  EXPECT_EQ(one.cuda_device, 2);
  EXPECT_EQ(DecodeRecord(Bytes(v3) + 416, kRecordSize, &one, kFormatVersion2).error,
            DecodeError::kBadValue);
}

TEST(CollectiveRecordTest, DowngradeRewritesANewestRecordAsAnOlderVersionEncodesIt) {
  CollectiveRecordFields r = SampleRecord();
  r.cuda_device = 4;
  for (uint16_t version : {kFormatVersion1, kFormatVersion2, kFormatVersion3}) {
    uint8_t newest[kRecordSize];
    uint8_t direct[kRecordSize];
    EncodeRecord(r, newest);
    EncodeRecord(r, direct, version);
    DowngradeRecord(newest, version);
    EXPECT_EQ(std::memcmp(newest, direct, kRecordSize), 0) << "version " << version;
    CollectiveRecordFields back;
    ASSERT_TRUE(DecodeRecord(newest, kRecordSize, &back, version).ok()) << version;
    EXPECT_EQ(back.cuda_device, version == kFormatVersion3 ? 4 : -1);
  }
}

}  // namespace
}  // namespace ringside::collectors
