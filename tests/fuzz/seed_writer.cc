// Writes the seeds of tests/fuzz/corpus/<target>/ (checked in; rerun after a format change):
// fuzz_seed_writer <tests/fuzz/corpus>. The binary seeds are built here; the text seeds of the
// newer targets are copied from the repository's test data and ../shared (fixtures, data) with a
// flags byte where the entry takes one. The text corpora of sysfs_text, topology_text and
// ethtool_text are written by hand.
#include <infiniband/mad.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/aggregator/journal/journal_format.h"

#include "collectors/nccl_plugin/record_format.h"
#include "collectors/nccl_plugin/record_proto.h"
#include "daemon/common/protocol.h"
#include "daemon/common/series_set_digest.h"
#include "ringside/v1/ingest.pb.h"

namespace rc = ringside::collectors;
namespace v1 = ringside::v1;

namespace {

std::string dir;

void Write(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(dir);
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

// --- series_defs_wire: one AgentMessage's bytes (the admission path's in-place reader) ---------
void WriteSeriesDefsWire() {
  Write("ok-defs", Defs().SerializeAsString());
  v1::AgentMessage with_info = Defs();
  with_info.mutable_series_defs()->set_has_info(true);
  v1::InfoRecord* info = with_info.mutable_series_defs()->add_info();
  info->set_source("netdev");
  info->set_device("eth2");
  (*info->mutable_labels())["rdma_device"] = "mlx5_0";
  Write("ok-defs-info", with_info.SerializeAsString());
  // Definitions by reference: the set whole, with its digest (daemon/common/series_set_digest.h).
  v1::AgentMessage complete = Defs();
  ringside::daemon::SeriesSetDigest digest;
  for (const v1::SeriesDef& d : complete.series_defs().defs()) digest.Add(d);
  complete.mutable_series_defs()->set_complete_digest(digest.Finish());
  Write("ok-complete-digest", complete.SerializeAsString());
  v1::AgentMessage empty;
  empty.mutable_series_defs();
  Write("ok-empty", empty.SerializeAsString());
  Write("bad-width", Defs(65).SerializeAsString());  // read in place, refused by the checks
  v1::AgentMessage bad_kind = Defs();
  bad_kind.mutable_series_defs()->mutable_defs(1)->set_kind(static_cast<v1::SeriesKind>(9));
  Write("bad-kind", bad_kind.SerializeAsString());
  v1::AgentMessage sequenced = Defs();
  sequenced.set_seq(5);  // not the admission path's: declined, protobuf's turn
  Write("bad-sequenced", sequenced.SerializeAsString());
  Write("bad-hello", Hello().SerializeAsString());
}

// --- sample_batch_wire: one AgentMessage's bytes (the sampling path's in-place reader) ----------
void WriteSampleBatchWire() {
  Write("ok-batch", Samples(1, 1000).SerializeAsString());
  v1::AgentMessage wide = Samples(7, 0);
  wide.mutable_samples()->add_ids(4'000'000'000u);
  wide.mutable_samples()->add_values(~uint64_t{0});  // a 10-byte varint
  wide.mutable_samples()->set_timestamp_unix_nanos(-5);  // negative: 10 bytes too
  Write("ok-wide", wide.SerializeAsString());
  v1::AgentMessage empty;
  empty.set_seq(3);
  empty.mutable_samples();
  Write("ok-empty", empty.SerializeAsString());
  Write("ok-seq0", Samples(0, 1).SerializeAsString());  // read here; the core refuses it
  v1::AgentMessage uneven = Samples(2, 1);
  uneven.mutable_samples()->add_ids(9);
  Write("bad-uneven", uneven.SerializeAsString());  // read here; the core refuses it
  Write("bad-defs", Defs().SerializeAsString());
  Write("bad-hello", Hello().SerializeAsString());
  // ids unpacked (field 2 as varints): valid protobuf, not the canonical encoding: declined.
  Write("bad-unpacked", std::string("\x08\x01\x62\x04\x10\x05\x18\x06", 8));
  // An unknown field in the batch: declined, protobuf's to keep.
  Write("bad-unknown-field", std::string("\x08\x01\x62\x02\x48\x01", 6));
  const std::string whole = Samples(4, 77).SerializeAsString();
  Write("bad-truncated", whole.substr(0, whole.size() - 3));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(1);
  }
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Source(const std::string& rel) { return ReadFile(std::string(RINGSIDE_SOURCE_DIR) + "/" + rel); }
std::string Shared(const std::string& rel) {
  return ReadFile(std::string(RINGSIDE_SOURCE_DIR) + "/../shared/" + rel);
}

template <typename T>
void PutLe(std::string* out, T v, size_t bytes = sizeof(T)) {
  for (size_t i = 0; i < bytes; ++i) out->push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
}

std::string Gzip(const std::string& data) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void InDir(const std::string& target, void (*fn)()) {
  const std::string base = dir;
  dir += "/" + target;
  fn();
  dir = base;
}

// --- ethtool_ioctl: scripts for the fake kernel of ethtool_ioctl_entry.cc -----------------------

std::vector<std::string> EthtoolFixtureNames() {
  std::istringstream in(Shared("fixtures/tool-outputs/ethtool/ethq_ethtool-S_mlx5_cx4lx_ubuntu16.04.txt"));
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos || line.rfind("NIC statistics", 0) == 0) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(" \t"));
    if (!name.empty() && name.size() < 32) names.push_back(name);
  }
  return names;
}

std::string SsetInfo(uint16_t count, bool has_set = true) {
  std::string s{'\0', static_cast<char>(has_set ? 1 : 0)};
  PutLe<uint16_t>(&s, count);
  return s;
}
std::string Strings(const std::vector<std::string>& names) {
  std::string s{'\0', '\1'};  // answer; the count the caller asked for
  for (const std::string& n : names) {
    std::string slot = n;
    slot.resize(32, '\0');
    s += slot;
  }
  return s;
}
std::string Stats(size_t n, uint64_t base) {
  std::string s{'\0', '\1'};
  for (size_t i = 0; i < n; ++i) PutLe<uint64_t>(&s, base + i * 1000);
  return s;
}

void WriteEthtoolIoctl() {
  const std::vector<std::string> names = EthtoolFixtureNames();
  const uint16_t n = static_cast<uint16_t>(names.size());
  const std::string pause = std::string("\0\0\1\1", 4);
  Write("ok-mlx5-fixture", SsetInfo(n) + Strings(names) + SsetInfo(n) + Stats(n, 7) + SsetInfo(n) +
                               Stats(n, 9) + pause);
  const std::vector<std::string> few = {"rx_bytes", "rx_prio3_pause", "tx_prio3_pause_duration",
                                        "link_down_events_phy", "rx_prio3_pause"};
  // Old kernel: the set grew to 6 between GSSET_INFO and GSTRINGS (EFAULT at the guard), then
  // GSSET_INFO says 6 and the strings follow.
  std::string grew = SsetInfo(5) + std::string("\0\0", 2);
  PutLe<uint16_t>(&grew, 6);
  for (int i = 0; i < 5; ++i) grew += std::string(32, 'a' + i);
  std::vector<std::string> six = few;
  six.push_back("rx_prio0_pause");
  grew += SsetInfo(6) + Strings(six) + SsetInfo(6) + Stats(6, 1) + SsetInfo(6) + Stats(6, 2) + pause;
  Write("ok-grew-old-kernel", grew);
  // New kernel: a stale count is answered with 0 entries, then the stats set changed.
  std::string stale = SsetInfo(5) + Strings(few) + SsetInfo(5) + std::string("\0\2", 2);
  PutLe<uint16_t>(&stale, 7);
  stale += SsetInfo(5) + Stats(5, 3) + pause;
  Write("ok-stale-stats-new-kernel", stale);
  Write("bad-eopnotsupp", std::string("\5", 1));
  Write("bad-no-stats-set", SsetInfo(0, false));
  std::string changing;
  for (int i = 0; i < 3; ++i) {
    changing += SsetInfo(4) + std::string("\0\2", 2);
    PutLe<uint16_t>(&changing, 5 + i);
  }
  Write("bad-set-keeps-changing", changing);
}

// --- netlink_link: datagrams of rtnetlink messages ----------------------------------------------

std::string Attr(uint16_t type, const std::string& payload) {
  std::string a;
  PutLe<uint16_t>(&a, static_cast<uint16_t>(RTA_LENGTH(payload.size())));
  PutLe<uint16_t>(&a, type);
  a += payload;
  a.resize(RTA_ALIGN(a.size()), '\0');
  return a;
}

std::string LinkMsg(uint16_t type, uint32_t seq, int ifindex, const std::string& name,
                    uint8_t operstate, bool carrier, uint32_t ups, uint32_t downs) {
  std::string body;
  ifinfomsg ifi{};
  ifi.ifi_index = ifindex;
  ifi.ifi_flags = IFF_UP | (carrier ? IFF_LOWER_UP : 0);
  body.append(reinterpret_cast<const char*>(&ifi), sizeof(ifi));
  body += Attr(IFLA_IFNAME, name + std::string(1, '\0'));
  body += Attr(IFLA_OPERSTATE, std::string(1, static_cast<char>(operstate)));
  body += Attr(IFLA_CARRIER, std::string(1, carrier ? 1 : 0));
  std::string u, d;
  PutLe<uint32_t>(&u, ups);
  PutLe<uint32_t>(&d, downs);
  body += Attr(IFLA_CARRIER_UP_COUNT, u);
  body += Attr(IFLA_CARRIER_DOWN_COUNT, d);
  std::string m;
  PutLe<uint32_t>(&m, static_cast<uint32_t>(NLMSG_HDRLEN + body.size()));
  PutLe<uint16_t>(&m, type);
  PutLe<uint16_t>(&m, seq != 0 ? NLM_F_MULTI : 0);
  PutLe<uint32_t>(&m, seq);
  PutLe<uint32_t>(&m, 0);
  return m + body;
}

std::string Done(uint32_t seq, uint16_t type = NLMSG_DONE, int32_t error = 0) {
  std::string m;
  PutLe<uint32_t>(&m, NLMSG_HDRLEN + 4);
  PutLe<uint16_t>(&m, type);
  PutLe<uint16_t>(&m, NLM_F_MULTI);
  PutLe<uint32_t>(&m, seq);
  PutLe<uint32_t>(&m, 0);
  PutLe<int32_t>(&m, error);
  return m;
}

// One datagram as NetlinkLink reads it: op, length, bytes.
std::string Gram(uint8_t op, const std::string& bytes) {
  std::string g(1, static_cast<char>(op));
  PutLe<uint16_t>(&g, static_cast<uint16_t>(bytes.size()));
  return g + bytes;
}

void WriteNetlink() {
  constexpr uint32_t kDumpSeq = 2;  // the watcher's first dump request
  const std::string dump = LinkMsg(RTM_NEWLINK, kDumpSeq, 2, "eth0", 6, true, 1, 0) +
                           LinkMsg(RTM_NEWLINK, kDumpSeq, 3, "ib0", 6, true, 3, 2) + Done(kDumpSeq);
  Write("ok-dump-then-flap",
        Gram(0, dump) + Gram(0, LinkMsg(RTM_NEWLINK, 0, 2, "eth0", 2, false, 1, 1)) +
            Gram(0, LinkMsg(RTM_NEWLINK, 0, 2, "eth0", 6, true, 2, 1)));
  // Coalesced: the counts jumped by three cycles; then eth0 is deleted.
  Write("ok-inferred-and-deleted",
        Gram(0, dump) + Gram(0, LinkMsg(RTM_NEWLINK, 0, 3, "ib0", 6, true, 6, 5)) +
            Gram(0, LinkMsg(RTM_DELLINK, 0, 2, "eth0", 2, false, 1, 0)));
  // An overflow, a resync dump (seq 3) that no longer lists ib0.
  Write("ok-overflow-resync",
        Gram(0, dump) + Gram(1, LinkMsg(RTM_NEWLINK, 3, 2, "eth0", 6, true, 1, 0) + Done(3)));
  // The dump refused (EBUSY), retried on Tick.
  Write("ok-dump-refused-retried",
        Gram(2, Done(kDumpSeq, NLMSG_ERROR, -16)) +
            Gram(0, LinkMsg(RTM_NEWLINK, 3, 2, "eth0", 6, true, 0, 0) + Done(3)));
  std::string torn = LinkMsg(RTM_NEWLINK, 0, 2, "eth0", 6, true, 1, 0);
  torn[NLMSG_HDRLEN + sizeof(ifinfomsg)] = 0x7f;  // the first attribute runs past the message
  Write("bad-attr-past-message", Gram(0, torn));
  std::string long_len = LinkMsg(RTM_NEWLINK, 0, 2, "eth0", 6, true, 1, 0);
  long_len[0] = static_cast<char>(0xf0);  // nlmsg_len past the datagram
  Write("bad-message-past-datagram", Gram(0, long_len));
  Write("bad-short-ifinfomsg", Gram(0, Done(0, RTM_NEWLINK)));
}

// --- mad_fields: [kind][cap mask][use_extended] + attribute data ---------------------------------

std::string Mad(uint8_t kind, uint16_t cap, bool ext, void (*fill)(uint8_t*)) {
  std::string s(1, static_cast<char>(kind));
  PutLe<uint16_t>(&s, cap);
  s.push_back(ext ? 1 : 0);
  uint8_t data[256] = {};
  fill(data);
  s.append(reinterpret_cast<const char*>(data), sizeof(data));
  return s;
}

void WriteMad() {
  constexpr uint16_t kCap = 0x1300;  // ExtWidth, AllPortSelect, XmitWait
  Write("ok-nodeinfo-switch", Mad(0, 0, false, [](uint8_t* d) {
          mad_set_field(d, 0, IB_NODE_TYPE_F, 2);
          mad_set_field(d, 0, IB_NODE_NPORTS_F, 36);
          mad_set_field64(d, 0, IB_NODE_GUID_F, 0xf4521403007eaa70ull);
          mad_set_field64(d, 0, IB_NODE_PORT_GUID_F, 0xf4521403007eaa70ull);
          mad_set_field(d, 0, IB_NODE_VENDORID_F, 0x02c9);
        }));
  Write("ok-portinfo-active", Mad(1, 0, false, [](uint8_t* d) {
          mad_set_field(d, 0, IB_PORT_STATE_F, 4);
          mad_set_field(d, 0, IB_PORT_PHYS_STATE_F, 5);
        }));
  Write("ok-portcounters", Mad(2, 0x1000, false, [](uint8_t* d) {
          mad_set_field(d, 0, IB_PC_ERR_SYM_F, 12);
          mad_set_field(d, 0, IB_PC_LINK_DOWNED_F, 3);
          mad_set_field(d, 0, IB_PC_XMT_BYTES_F, 0xfffffff0u);
          mad_set_field(d, 0, IB_PC_XMT_WAIT_F, 1234);
        }));
  Write("ok-portcounters-extended", Mad(3, kCap, true, [](uint8_t* d) {
          mad_set_field64(d, 0, IB_PC_EXT_XMT_BYTES_F, 0xfedcba9876543210ull);
          mad_set_field64(d, 0, IB_PC_EXT_RCV_PKTS_F, 123456789);
        }));
  Write("ok-nodedescription", Mad(4, 0, false, [](uint8_t* d) {
          std::memcpy(d, "MF0;ib5:SX6036/U1   ", 20);
        }));
  Write("ok-classportinfo", Mad(5, 0, false, [](uint8_t* d) {
          mad_set_field(d, 0, IB_CPI_CAPMASK_F, 0x1300);
        }));
  Write("bad-short", std::string("\0\0", 2));
  Write("bad-nodeinfo-type-0", Mad(0, 0, false, [](uint8_t*) {}));
  Write("bad-portinfo-state-7", Mad(1, 0, false, [](uint8_t* d) {
          mad_set_field(d, 0, IB_PORT_STATE_F, 7);
          mad_set_field(d, 0, IB_PORT_PHYS_STATE_F, 5);
        }));
}

// --- journal_segment: [flags] + segment bytes -----------------------------------------------------

namespace rd = ringside::daemon;

std::string JournalFrames(bool unparsable = false) {
  std::string seg;
  rd::JournalRecord h;
  h.type = rd::JournalRecordType::kHeader;
  h.node = std::string(rd::kJournalMagic);
  h.epoch = rd::kJournalFormatVersion;
  h.seq = 7;
  rd::EncodeJournalRecord(h, &seg);
  rd::JournalRecord w;
  w.type = rd::JournalRecordType::kWatermark;
  w.node = "gpu-01";
  w.epoch = 7;
  w.seq = 2;
  rd::EncodeJournalRecord(w, &seg);
  for (uint64_t seq = 2; seq <= 4; ++seq) {  // seq 2 is a duplicate of the checkpoint
    v1::AgentMessage m;
    m.set_seq(seq);
    if (seq == 3) {
      v1::LinkEvent* e = m.mutable_link_events()->add_events();
      e->set_time_unix_nanos(1'700'000'004'000'000'000);
      e->set_source("netlink");
      e->set_device("eth0");
    } else {
      rc::RecordToProto(Record(static_cast<int>(seq)), m.mutable_collectives()->add_records());
    }
    rd::JournalRecord p;
    p.type = rd::JournalRecordType::kPayload;
    p.node = "gpu-01";
    p.epoch = 7;
    p.seq = seq;
    p.received_unix_nanos = 1'700'000'000'000'000'000 + static_cast<int64_t>(seq);
    p.message = unparsable && seq == 4 ? std::string("\xff\xff\xff\xff", 4) : m.SerializeAsString();
    rd::EncodeJournalRecord(p, &seg);
  }
  return seg;
}

void WriteJournal() {
  const std::string seg = JournalFrames();
  Write("ok-segment", std::string(1, '\0') + seg);
  Write("ok-two-segments-resent", std::string(1, '\2') + seg + seg);
  std::string zero_crc = seg;
  for (size_t pos = 0; pos + 8 <= zero_crc.size();) {  // CRCs zeroed: the entry recomputes them
    uint32_t len = 0;
    std::memcpy(&len, zero_crc.data() + pos, 4);
    std::memset(zero_crc.data() + pos + 4, 0, 4);
    pos += 8 + len;
  }
  Write("ok-crcs-fixed-by-entry", std::string(1, '\1') + zero_crc);
  Write("bad-torn-tail", std::string(1, '\0') + seg.substr(0, seg.size() - 5));
  std::string flipped = seg;
  flipped[flipped.size() - 3] ^= 0x40;
  Write("bad-crc-mismatch", std::string(1, '\0') + flipped);
  Write("bad-unparsable-payload", std::string(1, '\0') + JournalFrames(true));
  std::string unknown;  // a frame of type 9 (CRC fixed by the entry)
  PutLe<uint32_t>(&unknown, 19);
  PutLe<uint32_t>(&unknown, 0);
  unknown.push_back(9);
  unknown.append(18, '\0');
  Write("bad-unknown-type", std::string(1, '\1') + unknown);
}

// --- trace_import: [flags] + trace -----------------------------------------------------------------

void WriteTrace() {
  const std::string fr0 = Source("tests/data/flight_recorder/nccl_trace_rank_0.json");
  const std::string fr1 = Source("tests/data/flight_recorder/nccl_trace_rank_1.json");
  Write("ok-fr-rank0", std::string(1, '\0') + fr0);
  Write("ok-fr-two-ranks-p2p", std::string(1, '\x0c') + fr0 + "\x1e" + fr1);
  Write("ok-fr-gzip", std::string(1, '\0') + Gzip(fr1));
  // The head of the straggler-analysis trace (shared/data), cut at a line.
  std::string csv;
  {
    const std::string gz = Shared("data/straggler-analysis/trace-ST.csv.gz");
    z_stream z{};
    inflateInit2(&z, 31);
    std::string out(24 * 1024, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
    z.avail_in = static_cast<uInt>(gz.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    inflate(&z, Z_SYNC_FLUSH);
    out.resize(z.total_out);
    inflateEnd(&z);
    csv = out.substr(0, out.rfind('\n', 6000) + 1);
  }
  Write("ok-straggler-head", std::string(1, '\1') + csv);
  Write("ok-straggler-head-gzip-p2p", std::string(1, '\5') + Gzip(csv));
  Write("ok-straggler-skip-malformed", std::string(1, '\3') + csv + "garbage\n0,0,0,6,gc,zz,0.1,0,0,-1,-1\n");
  Write("bad-straggler-malformed-row", std::string(1, '\1') + csv + "0,0,0,6,gc,zz,0.1,0,0,-1,-1\n");
  Write("bad-straggler-no-header", std::string(1, '\1') + csv.substr(csv.find('\n') + 1));
  Write("bad-fr-pickle", std::string("\0\x80\x04\x95", 4));
  Write("bad-fr-cut-json", std::string(1, '\0') + fr0.substr(0, fr0.size() / 2));
  Write("bad-fr-gzip-truncated", std::string(1, '\0') + Gzip(fr0).substr(0, 200));
}

// --- detection_config: [flags] + text --------------------------------------------------------------

void WriteDetection() {
  Write("ok-config", std::string(1, '\0') +
                         "# thresholds\n\nlink.flap_cycles = 3  # stricter\nlink.flap_window 5m\n"
                         "straggler.slowdown_ratio = 1.5\nstraggler.max_pending_per_comm=100\n");
  Write("ok-assignments", std::string(1, '\1') + "link.flap_window=90s, straggler.slowdown_ratio=2");
  Write("bad-unknown-option", std::string(1, '\0') + "link.flap_cycles = 3\nnonsense = 1\n");
  Write("bad-no-value", std::string(1, '\0') + "link.flap_cycles\n");
  Write("bad-negative", std::string(1, '\1') + "straggler.slowdown_ratio=-1");
}

// --- scenario_yaml: the repository's scenarios, and broken ones ---------------------------------

void WriteScenario() {
  for (const char* name : {"combined", "pause_storm", "straggler", "agent_crash", "link_flap"}) {
    Write(std::string("ok-") + name, Source(std::string("tests/scenarios/") + name + ".yaml"));
  }
  Write("bad-not-a-map", "- 1\n- 2\n");
  Write("bad-unknown-fault", "name: x\nfaults:\n  - kind: meteor\n    node: 0\n");
  Write("bad-rank-outside", "cluster: {nodes: 2, gpus: 2}\nfaults:\n  - kind: straggler\n    rank: 4\n");
  Write("bad-yaml-syntax", "name: [unclosed\n");
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
  InDir("ethtool_ioctl", WriteEthtoolIoctl);
  InDir("netlink_link", WriteNetlink);
  InDir("mad_fields", WriteMad);
  InDir("journal_segment", WriteJournal);
  InDir("trace_import", WriteTrace);
  InDir("detection_config", WriteDetection);
  InDir("scenario_yaml", WriteScenario);
  InDir("series_defs_wire", WriteSeriesDefsWire);
  InDir("sample_batch_wire", WriteSampleBatchWire);
  return 0;
}
