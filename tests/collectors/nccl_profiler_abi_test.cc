// The plugin's declarations of the NCCL profiler ABI (collectors/nccl_plugin/profiler_abi.h)
// against the layouts of NVIDIA's released profiler_v4.h, profiler_v5.h and profiler_v6.h, as
// ../shared/reference/nccl-profiler-abi.md §3 and §5 restate them (LP64, offsets from the start of
// the descriptor). The expected numbers are written here from the reference, not computed from
// our structs; the same checks also stand as static_asserts so a wrong edit fails to compile.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "collectors/nccl_plugin/profiler_abi.h"
#include "gtest/gtest.h"

namespace ringside::collectors::nccl_abi {
namespace {

constexpr size_t kUnion = 24;  // every version's union starts at descriptor offset 24

// --- Compile-time: descriptor-relative offsets from the reference tables. ---
static_assert(offsetof(EventDescrV5, coll) + offsetof(CollV5, v4) == 24);
static_assert(offsetof(EventDescrV4, coll) + offsetof(CollV4, proto) == 96);
static_assert(offsetof(EventDescrV5, coll) + offsetof(CollV5, parent_group) == 104);
static_assert(offsetof(EventDescrV5, p2p) + offsetof(P2pV5, parent_group) == 64);
static_assert(offsetof(EventDescrV6, ce_coll) + offsetof(CeCollV6, stream) == 104);
static_assert(offsetof(EventDescrV6, kernel_ch) + offsetof(KernelCh, p_timer) == 32);

struct Field {
  std::string name;
  size_t actual;    // from our declaration
  size_t expected;  // from the reference
};

void ExpectLayout(const std::string& what, const std::vector<Field>& fields) {
  for (const Field& f : fields) {
    EXPECT_EQ(f.actual, f.expected) << what << "." << f.name;
  }
}

TEST(NcclProfilerAbiTest, HeaderOfEveryVersion) {
  ExpectLayout("v4", {{"type", offsetof(EventDescrV4, type), 0},
                      {"parentObj", offsetof(EventDescrV4, parent_obj), 8},
                      {"rank", offsetof(EventDescrV4, rank), 16},
                      {"union", offsetof(EventDescrV4, coll), 24},
                      {"sizeof", sizeof(EventDescrV4), 104}});
  EXPECT_EQ(sizeof(EventDescrV4::type), 1u) << "v1-v4 type is uint8_t";
  ExpectLayout("v5", {{"type", offsetof(EventDescrV5, type), 0},
                      {"parentObj", offsetof(EventDescrV5, parent_obj), 8},
                      {"rank", offsetof(EventDescrV5, rank), 16},
                      {"union", offsetof(EventDescrV5, coll), 24},
                      {"sizeof", sizeof(EventDescrV5), 112}});
  EXPECT_EQ(sizeof(EventDescrV5::type), 8u) << "v5+ type is uint64_t";
  ExpectLayout("v6", {{"type", offsetof(EventDescrV6, type), 0},
                      {"parentObj", offsetof(EventDescrV6, parent_obj), 8},
                      {"rank", offsetof(EventDescrV6, rank), 16},
                      {"union", offsetof(EventDescrV6, coll), 24},
                      {"sizeof", sizeof(EventDescrV6), 112}});
  EXPECT_EQ(sizeof(EventDescrV6::type), 8u);
}

TEST(NcclProfilerAbiTest, CollMatchesTheReference) {
  const std::vector<Field> prefix = {
      {"seqNumber", kUnion + offsetof(CollV4, seq_number), 24},
      {"func", kUnion + offsetof(CollV4, func), 32},
      {"sendBuff", kUnion + offsetof(CollV4, send_buff), 40},
      {"recvBuff", kUnion + offsetof(CollV4, recv_buff), 48},
      {"count", kUnion + offsetof(CollV4, count), 56},
      {"root", kUnion + offsetof(CollV4, root), 64},
      {"datatype", kUnion + offsetof(CollV4, datatype), 72},
      {"nChannels", kUnion + offsetof(CollV4, n_channels), 80},
      {"nWarps", kUnion + offsetof(CollV4, n_warps), 81},
      {"algo", kUnion + offsetof(CollV4, algo), 88},
      {"proto", kUnion + offsetof(CollV4, proto), 96},
  };
  ExpectLayout("v4 coll", prefix);
  ExpectLayout("v5/v6 coll", {{"v4 prefix", offsetof(CollV5, v4), 0},
                              {"parentGroup", kUnion + offsetof(CollV5, parent_group), 104},
                              {"v6 union", offsetof(EventDescrV6, coll), 24}});
}

TEST(NcclProfilerAbiTest, P2pKernelChAndCeCollMatchTheReference) {
  ExpectLayout("p2p", {{"func", kUnion + offsetof(P2pV4, func), 24},
                       {"buff", kUnion + offsetof(P2pV4, buff), 32},
                       {"datatype", kUnion + offsetof(P2pV4, datatype), 40},
                       {"count", kUnion + offsetof(P2pV4, count), 48},
                       {"peer", kUnion + offsetof(P2pV4, peer), 56},
                       {"nChannels", kUnion + offsetof(P2pV4, n_channels), 60},
                       {"v5 parentGroup", kUnion + offsetof(P2pV5, parent_group), 64}});
  ExpectLayout("kernelCh", {{"channelId", kUnion + offsetof(KernelCh, channel_id), 24},
                            {"pTimer", kUnion + offsetof(KernelCh, p_timer), 32},
                            {"v4 union", offsetof(EventDescrV4, kernel_ch), 24},
                            {"v6 union", offsetof(EventDescrV6, kernel_ch), 24}});
  ExpectLayout("v6 ceColl", {{"union", offsetof(EventDescrV6, ce_coll), 24},
                             {"seqNumber", kUnion + offsetof(CeCollV6, seq_number), 24},
                             {"func", kUnion + offsetof(CeCollV6, func), 32},
                             {"sendBuff", kUnion + offsetof(CeCollV6, send_buff), 40},
                             {"recvBuff", kUnion + offsetof(CeCollV6, recv_buff), 48},
                             {"count", kUnion + offsetof(CeCollV6, count), 56},
                             {"root", kUnion + offsetof(CeCollV6, root), 64},
                             {"datatype", kUnion + offsetof(CeCollV6, datatype), 72},
                             {"syncStrategy", kUnion + offsetof(CeCollV6, sync_strategy), 80},
                             {"intraBatchSync", kUnion + offsetof(CeCollV6, intra_batch_sync), 88},
                             {"batchSize", kUnion + offsetof(CeCollV6, batch_size), 92},
                             {"numBatches", kUnion + offsetof(CeCollV6, num_batches), 96},
                             {"ceSeqNum", kUnion + offsetof(CeCollV6, ce_seq_num), 100},
                             {"stream", kUnion + offsetof(CeCollV6, stream), 104}});
}

TEST(NcclProfilerAbiTest, FunctionTablesAndStateArgs) {
  for (const auto& [what, size, align, init, start, stop, state, finalize] :
       std::vector<std::tuple<std::string, size_t, size_t, size_t, size_t, size_t, size_t, size_t>>{
           {"v4", sizeof(ProfilerV4), alignof(ProfilerV4), offsetof(ProfilerV4, init),
            offsetof(ProfilerV4, start_event), offsetof(ProfilerV4, stop_event),
            offsetof(ProfilerV4, record_event_state), offsetof(ProfilerV4, finalize)},
           {"v5", sizeof(ProfilerV5), alignof(ProfilerV5), offsetof(ProfilerV5, init),
            offsetof(ProfilerV5, start_event), offsetof(ProfilerV5, stop_event),
            offsetof(ProfilerV5, record_event_state), offsetof(ProfilerV5, finalize)},
           {"v6", sizeof(ProfilerV6), alignof(ProfilerV6), offsetof(ProfilerV6, init),
            offsetof(ProfilerV6, start_event), offsetof(ProfilerV6, stop_event),
            offsetof(ProfilerV6, record_event_state), offsetof(ProfilerV6, finalize)}}) {
    ExpectLayout(what, {{"sizeof", size, 48}, {"alignof", align, 8}, {"init", init, 8},
                        {"startEvent", start, 16}, {"stopEvent", stop, 24},
                        {"recordEventState", state, 32}, {"finalize", finalize, 40}});
  }
  EXPECT_EQ(sizeof(StateArgs), 8u);
  StateArgs a{};
  a.kernel_ch_p_timer = 0x1122334455667788ull;
  uint64_t raw;
  std::memcpy(&raw, &a, sizeof(raw));
  EXPECT_EQ(raw, 0x1122334455667788ull) << "kernelCh.pTimer sits at offset 0";
}

TEST(NcclProfilerAbiTest, EventBitsAndStatesOfReleasedVersionsOnly) {
  EXPECT_EQ(kEventColl, 0x2u);
  EXPECT_EQ(kEventKernelCh, 0x40u);
  EXPECT_EQ(kEventKernelLaunch, 1u << 11);
  EXPECT_EQ(kEventCeColl, 1u << 12);
  EXPECT_EQ(kEventCeSync, 1u << 13);
  EXPECT_EQ(kEventCeBatch, 1u << 14);
  EXPECT_EQ(kStateKernelChStop, 22);
}

// A descriptor NCCL 2.29/2.30 fills at the reference's byte offsets reads back through our v6
// declaration field by field (a CeColl and a Coll), and a v4 one through the v4 declaration.
TEST(NcclProfilerAbiTest, BytesAtTheReferenceOffsetsReadBackThroughTheDeclarations) {
  alignas(8) unsigned char raw[112] = {};
  auto put = [&raw](size_t off, auto v) { std::memcpy(raw + off, &v, sizeof(v)); };
  static const char kFunc[] = "AllGather", kType[] = "ncclBfloat16", kSync[] = "UC";
  put(size_t{0}, uint64_t{kEventCeColl});
  put(size_t{16}, int{3});
  put(size_t{24}, uint64_t{41});
  put(size_t{32}, static_cast<const char*>(kFunc));
  put(size_t{56}, size_t{12345});
  put(size_t{64}, int{-1});
  put(size_t{72}, static_cast<const char*>(kType));
  put(size_t{80}, static_cast<const char*>(kSync));
  put(size_t{88}, true);
  put(size_t{92}, uint32_t{5});
  put(size_t{96}, uint32_t{6});
  put(size_t{100}, uint32_t{41});
  EventDescrV6 d;
  std::memcpy(&d, raw, sizeof(d));
  EXPECT_EQ(d.type, kEventCeColl);
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.ce_coll.seq_number, 41u);
  EXPECT_EQ(d.ce_coll.func, kFunc);
  EXPECT_EQ(d.ce_coll.count, 12345u);
  EXPECT_EQ(d.ce_coll.root, -1);
  EXPECT_EQ(d.ce_coll.datatype, kType);
  EXPECT_EQ(d.ce_coll.sync_strategy, kSync);
  EXPECT_TRUE(d.ce_coll.intra_batch_sync);
  EXPECT_EQ(d.ce_coll.batch_size, 5u);
  EXPECT_EQ(d.ce_coll.num_batches, 6u);
  EXPECT_EQ(d.ce_coll.ce_seq_num, 41u);

  alignas(8) unsigned char raw4[104] = {};
  raw4[0] = static_cast<unsigned char>(kEventColl);
  const uint64_t seq = 9;
  std::memcpy(raw4 + 24, &seq, 8);
  const uint8_t channels = 4;
  std::memcpy(raw4 + 80, &channels, 1);
  static const char kAlgo[] = "RING", kProto[] = "SIMPLE";
  const char* algo = kAlgo;
  const char* proto = kProto;
  std::memcpy(raw4 + 88, &algo, 8);
  std::memcpy(raw4 + 96, &proto, 8);
  EventDescrV4 d4;
  std::memcpy(&d4, raw4, sizeof(d4));
  EXPECT_EQ(d4.type, kEventColl);
  EXPECT_EQ(d4.coll.seq_number, 9u);
  EXPECT_EQ(d4.coll.n_channels, 4u);
  EXPECT_EQ(d4.coll.algo, kAlgo);
  EXPECT_EQ(d4.coll.proto, kProto);
}

}  // namespace
}  // namespace ringside::collectors::nccl_abi
