// Writes the binary seeds of tests/fuzz/corpus/{collective_stream,ingest_session} (checked in;
// rerun after a format change): fuzz_seed_writer <tests/fuzz/corpus>. The text corpora are
// written by hand.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/record_proto.h"
#include "daemon/common/protocol.h"
#include "ringside/v1/ingest.pb.h"

namespace rc = ringside::collectors;
namespace v1 = ringside::v1;

namespace {

std::string dir;

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(dir + "/" + path, std::ios::binary) << bytes;
}

rc::CollectiveRecordFields Record(int i) {
  rc::CollectiveRecordFields r;
  r.flags = rc::kRecordFlagClockSynchronized | rc::kRecordFlagKernelTimes;
  r.rank = i % 4;
  r.nranks = 4;
  r.pid = 1000 + i;
  r.comm_id = 0xabcdef0012345678ull;
  r.seq = 10 + i;
  r.bytes = 1 << 20;
  r.kernel_start_unix_nanos = 1'700'000'000'000'000'000 + i * 1'000'000;
  r.kernel_stop_unix_nanos = r.kernel_start_unix_nanos + 200'000;
  r.enqueue_unix_nanos = r.kernel_start_unix_nanos - 30'000;
  r.channels = 8;
  r.job_id.Set("job-1");
  r.comm_name.Set("dp-0");
  r.host.Set("gpu-01");
  r.function.Set("AllReduce");
  r.algorithm.Set("RING");
  r.protocol.Set("SIMPLE");
  return r;
}

std::string Frame(int records, bool v2, uint64_t dropped = 0) {
  rc::BatchHeaderFields h;
  h.dropped = dropped;
  h.job_id.Set("job-1");
  if (v2) {
    h.version = rc::kFormatVersion2;
    h.pod.Set("trainer-0");
    h.pod_namespace.Set("ml");
  }
  std::vector<rc::CollectiveRecordFields> rs;
  for (int i = 0; i < records; ++i) rs.push_back(Record(i));
  return rc::EncodeFrame(h, rs).value();
}

void WriteCollective() {
  dir += "/collective_stream";
  Write("ok-v1-one-record", Frame(1, false));
  Write("ok-v2-three-records", Frame(3, true));
  Write("ok-v1-empty-with-drops", Frame(0, false, 5));
  Write("ok-two-frames", Frame(2, false) + Frame(1, true));
  std::string s = Frame(1, false);
  s[0] = 'X';
  Write("bad-magic", s);
  s = Frame(2, true);
  s.resize(s.size() - 10);
  Write("bad-truncated", s);
  s = Frame(1, false);
  s[rc::kBatchHeaderSize + 100] = '\x01';  // inside a zero-padded string field
  Write("bad-string-padding", s);
  s = Frame(1, false);
  s[4] = 9;  // version
  Write("bad-version", s);
  Write("bad-trailing-garbage", Frame(1, false) + "garbage");
  dir.resize(dir.size() - std::string("/collective_stream").size());
}

// Length-prefixed messages, as IngestSession reads them.
std::string Chunks(const std::vector<v1::AgentMessage>& ms) {
  std::string out;
  for (const v1::AgentMessage& m : ms) {
    std::string b = m.SerializeAsString();
    out.push_back(static_cast<char>(b.size() & 0xff));
    out.push_back(static_cast<char>(b.size() >> 8));
    out += b;
  }
  return out;
}

v1::AgentMessage Hello(const std::string& node = "gpu-01", uint32_t version = 1) {
  v1::AgentMessage m;
  m.mutable_hello()->set_node(node);
  m.mutable_hello()->set_agent_epoch(7);
  m.mutable_hello()->set_protocol_version(version);
  m.mutable_hello()->set_min_protocol_version(version);
  m.mutable_hello()->set_agent_version("fuzz");
  return m;
}

v1::AgentMessage Defs(uint32_t width = 64) {
  v1::AgentMessage m;
  for (uint32_t id = 0; id < 3; ++id) {
    v1::SeriesDef* d = m.mutable_series_defs()->add_defs();
    d->set_id(id);
    d->set_source("infiniband");
    d->set_device("mlx5_0");
    d->set_port("1");
    d->set_counter(id == 0 ? "port_xmit_data" : id == 1 ? "port_rcv_data" : "symbol_error");
    d->set_kind(v1::SERIES_KIND_COUNTER);
    d->set_width(width);
    d->set_unit(id < 2 ? "4-byte-words" : "count");
    d->set_priority(-1);
  }
  return m;
}

v1::AgentMessage Samples(uint64_t seq, uint64_t base) {
  v1::AgentMessage m;
  m.set_seq(seq);
  m.mutable_samples()->set_timestamp_unix_nanos(1'700'000'000'000'000'000 + seq * 1'000'000'000);
  for (uint32_t id = 0; id < 3; ++id) {
    m.mutable_samples()->add_ids(id);
    m.mutable_samples()->add_values(base + id * 100);
  }
  return m;
}

void WriteIngest() {
  dir += "/ingest_session";
  v1::AgentMessage coll;
  coll.set_seq(3);
  {
    v1::CollectiveBatch* batch = coll.mutable_collectives();
    for (int i = 0; i < 2; ++i) rc::RecordToProto(Record(i), batch->add_records());
    (*batch->mutable_dropped_by_job())["job-1"] = 1;
  }
  v1::AgentMessage links;
  links.set_seq(4);
  v1::LinkEvent* e = links.mutable_link_events()->add_events();
  e->set_time_unix_nanos(1'700'000'004'000'000'000);
  e->set_source("netlink");
  e->set_device("mlx5_0");
  e->set_port("1");
  e->set_detail("carrier lost");
  Write("ok-session", Chunks({Hello(), Defs(), Samples(1, 1000), Samples(2, 5000), coll, links}));
  Write("ok-duplicate-seq", Chunks({Hello(), Defs(), Samples(1, 1000), Samples(1, 1000)}));
  Write("ok-default-hello", Chunks({Defs(), Samples(1, 10), Samples(2, 20)}));
  Write("bad-hello-node", Chunks({Hello("bad node!"), Defs()}));
  Write("bad-hello-version", Chunks({Hello("gpu-01", 999), Defs()}));
  Write("bad-second-hello", Chunks({Hello(), Defs(), Hello()}));
  Write("bad-width", Chunks({Hello(), Defs(65)}));
  v1::AgentMessage uneven = Samples(1, 1);
  uneven.mutable_samples()->add_ids(9);
  Write("bad-uneven-samples", Chunks({Hello(), Defs(), uneven}));
  v1::AgentMessage seq0 = Samples(0, 1);
  Write("bad-samples-seq0", Chunks({Hello(), Defs(), seq0}));
  Write("bad-unparseable", Chunks({Hello()}) + std::string("\x04\x00\xff\xff\xff\xff", 6));
  dir.resize(dir.size() - std::string("/ingest_session").size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seed_writer <tests/fuzz/corpus>\n");
    return 2;
  }
  dir = argv[1];
  WriteCollective();
  WriteIngest();
  return 0;
}
