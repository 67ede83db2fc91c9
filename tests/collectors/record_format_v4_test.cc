// Collective-record format version 4 (docs/collective-record.md): the sender's cgroup and its CUDA
// devices' PCI addresses in the batch header, the layout byte by byte, the round trip into
// CollectiveRecord.cgroup / gpu_pci_bus_id, what the decoder refuses, older versions still
// accepted, and the plugin's reading of /proc/self/cgroup.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "collectors/nccl_plugin/identity.h"
#include "collectors/nccl_plugin/plugin_state.h"
#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/record_proto.h"
#include "tests/testing/temp_dir.h"

namespace ringside::collectors {
namespace {

constexpr char kCgroup[] =
    "/kubepods.slice/kubepods-pod1234.slice/cri-containerd-0123456789abcdef.scope";

CollectiveRecordFields Record(int cuda_device) {
  CollectiveRecordFields r;
  r.rank = 1;
  r.nranks = 4;
  r.pid = 4242;
  r.comm_id = 0x1234;
  r.seq = 7;
  r.bytes = 1 << 20;
  r.enqueue_unix_nanos = 1700000000000000000;
  r.channels = 2;
  r.cuda_device = cuda_device;
  r.job_id.Set("job-1");
  r.host.Set("node-05");
  r.function.Set("AllReduce");
  return r;
}

BatchHeaderFields Header(uint16_t version) {
  BatchHeaderFields h;
  h.version = version;
  h.job_id.Set("job-1");
  h.pod.Set("trainer-17");
  h.pod_namespace.Set("ml");
  h.cgroup.Set(kCgroup);
  h.gpus[0] = GpuSlot{true, 0, 0x19, 0, 0};
  h.gpus[3] = GpuSlot{true, 0x10000, 0xe1, 0x1f, 7};
  return h;
}

std::string Frame(const BatchHeaderFields& h, const std::vector<CollectiveRecordFields>& records) {
  absl::StatusOr<std::string> f = EncodeFrame(h, records);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *f : std::string();
}

absl::StatusOr<v1::CollectiveBatch> Decode(const std::string& f) {
  return DecodeFrameToProto(
      absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(f.data()), f.size()));
}

TEST(RecordFormatV4Test, LayoutOfTheHeader) {
  const std::string f = Frame(Header(kFormatVersion4), {Record(0)});
  ASSERT_EQ(f.size(), 1056u + kRecordSize);
  EXPECT_EQ(f[4], 4);
  EXPECT_EQ(static_cast<uint8_t>(f[6]) | static_cast<uint8_t>(f[7]) << 8, 1056);
  EXPECT_EQ(f.substr(416, std::strlen(kCgroup)), kCgroup);
  EXPECT_EQ(f[416 + std::strlen(kCgroup)], '\0');
  // Slot 0: domain 0, bus 0x19, device 0, function 0, present.
  EXPECT_EQ(f.substr(928, 8), std::string("\0\0\0\0\x19\0\0\x01", 8));
  // Slot 1: absent, all zero. Slot 3: domain 0x10000 little-endian, e1, 1f, 7, present.
  EXPECT_EQ(f.substr(928 + 8, 8), std::string(8, '\0'));
  EXPECT_EQ(f.substr(928 + 24, 8), std::string("\0\0\x01\0\xe1\x1f\x07\x01", 8));
}

TEST(RecordFormatV4Test, RoundTripGivesEachRecordItsCgroupAndGpuPciAddress) {
  const std::string f =
      Frame(Header(kFormatVersion4), {Record(0), Record(3), Record(1), Record(-1)});
  absl::StatusOr<v1::CollectiveBatch> b = Decode(f);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->records_size(), 4);
  for (const v1::CollectiveRecord& r : b->records()) {
    EXPECT_EQ(r.cgroup(), kCgroup);
    EXPECT_EQ(r.pod(), "trainer-17");
  }
  EXPECT_EQ(b->records(0).gpu_pci_bus_id(), "0000:19:00.0");
  EXPECT_EQ(b->records(1).gpu_pci_bus_id(), "10000:e1:1f.7");
  EXPECT_EQ(b->records(2).gpu_pci_bus_id(), "") << "device 1 has no slot";
  EXPECT_EQ(b->records(3).gpu_pci_bus_id(), "") << "unknown device";
  // Canonical: decoded header fields re-encode to the same bytes.
  BatchHeaderFields h;
  size_t size = 0;
  ASSERT_TRUE(
      DecodeBatchHeader(reinterpret_cast<const uint8_t*>(f.data()), f.size(), &h, &size).ok());
  EXPECT_EQ(size, f.size());
  BatchHeaderFields want = Header(kFormatVersion4);
  want.record_count = 4;
  EXPECT_TRUE(h == want);
}

TEST(RecordFormatV4Test, OlderVersionsAreStillAcceptedAndCarryNeither) {
  for (uint16_t v : {kFormatVersion1, kFormatVersion2, kFormatVersion3}) {
    SCOPED_TRACE(v);
    absl::StatusOr<v1::CollectiveBatch> b = Decode(Frame(Header(v), {Record(0)}));
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->records(0).cgroup(), "");
    EXPECT_EQ(b->records(0).gpu_pci_bus_id(), "");
    EXPECT_EQ(b->records(0).has_cuda_device(), v == kFormatVersion3);
  }
}

TEST(RecordFormatV4Test, TheDecoderRefusesWhatTheEncoderNeverWrites) {
  const std::string good = Frame(Header(kFormatVersion4), {Record(0)});
  auto error = [](const std::string& f) {
    BatchHeaderFields h;
    size_t size = 0;
    return DecodeBatchHeader(reinterpret_cast<const uint8_t*>(f.data()), f.size(), &h, &size).error;
  };
  ASSERT_EQ(error(good), DecodeError::kOk);
  std::string f = good;
  f[928 + 7] = 2;  // a flag that does not exist
  EXPECT_EQ(error(f), DecodeError::kBadValue);
  f = good;
  f[928 + 8 + 4] = 1;  // an absent slot with a bus
  EXPECT_EQ(error(f), DecodeError::kBadValue);
  f = good;
  f[928 + 5] = 0x20;  // device past 0x1f
  EXPECT_EQ(error(f), DecodeError::kBadValue);
  f = good;
  f.replace(416, 4, "/../");  // a path the agent would never read
  EXPECT_EQ(error(f), DecodeError::kBadString);
  f = good;
  f[416 + std::strlen(kCgroup) + 3] = 'x';  // bytes after the terminator
  EXPECT_EQ(error(f), DecodeError::kBadString);
  f = good;
  f.resize(1000);  // the header cut short
  EXPECT_EQ(error(f), DecodeError::kTruncated);
  f = good;
  f[6] = static_cast<char>(416 & 0xff);  // a version-4 header claiming version 2's length
  f[7] = static_cast<char>(416 >> 8);
  EXPECT_EQ(error(f), DecodeError::kBadLength);
}

TEST(RecordFormatV4Test, AnUnusableCgroupGoesOutEmpty) {
  BatchHeaderFields h = Header(kFormatVersion4);
  h.cgroup.Set("/");
  absl::StatusOr<v1::CollectiveBatch> b = Decode(Frame(h, {Record(0)}));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->records(0).cgroup(), "");
}

TEST(RecordFormatV4Test, GpuSlotsPackIntoOneWord) {
  for (const GpuSlot& g :
       {GpuSlot{}, GpuSlot{true, 0, 0x19, 0, 0}, GpuSlot{true, 0xffffffffu, 0xff, 0x1f, 7}}) {
    EXPECT_TRUE(UnpackGpuSlot(PackGpuSlot(g)) == g);
  }
}

TEST(RecordFormatV4Test, CgroupFromProcSelfCgroup) {
  ringside::testing::TempDir dir;
  const std::string path = dir.path() + "/cgroup";
  FixedString<kCgroupSize> cgroup;
  std::ofstream(path) << "0::" << kCgroup << "\n";
  EXPECT_STREQ(CgroupFromProc(&cgroup, path.c_str()), "");
  EXPECT_STREQ(cgroup.c_str(), kCgroup);
  // A hybrid host: v1 lines first.
  std::ofstream(path, std::ios::trunc) << "12:cpu,cpuacct:/slurm/job_1\n1:name=systemd:/x\n"
                                       << "0::/system.slice/slurmstepd.scope/job_1/step_0\n";
  EXPECT_STREQ(CgroupFromProc(&cgroup, path.c_str()), "");
  EXPECT_STREQ(cgroup.c_str(), "/system.slice/slurmstepd.scope/job_1/step_0");
  // A container's private cgroup namespace: "/" names nothing the agent can find.
  std::ofstream(path, std::ios::trunc) << "0::/\n";
  EXPECT_NE(std::string(CgroupFromProc(&cgroup, path.c_str())), "");
  EXPECT_TRUE(cgroup.empty());
  std::ofstream(path, std::ios::trunc) << "4:memory:/x\n";  // cgroup v1 only
  EXPECT_NE(std::string(CgroupFromProc(&cgroup, path.c_str())), "");
  EXPECT_TRUE(cgroup.empty());
  EXPECT_NE(std::string(CgroupFromProc(&cgroup, (dir.path() + "/none").c_str())), "");
}

}  // namespace
}  // namespace ringside::collectors
