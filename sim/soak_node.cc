#include "sim/soak_node.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collectors/ethtool/ethtool_collector.h"
#include "collectors/infiniband/infiniband_collector.h"
#include "collectors/netdev/netdev_collector.h"
#include "daemon/common/protocol.h"
#include "sim/node_build.h"
#include "sim/sim_names.h"

namespace ringside::sim {
namespace {

// The soak's stand-in for the gRPC reactor: nothing to tell, there is one session per node.
class NullLink final : public daemon::SessionLink {
 public:
  void Replace(absl::Status) override {}
  void AckReady() override {}
};

uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A canonical text of a snapshot's info records, to tell when they changed.
std::string InfoText(const daemon::AgentSnapshot& snap) {
  std::string out;
  for (const collectors::CollectorSnapshot& cs : snap.collectors) {
    if (!cs.table) continue;
    for (const collectors::InfoRecord& r : cs.table->info) {
      absl::StrAppend(&out, r.source, "\x1f", r.device, "\x1f", r.port);
      for (const auto& [k, v] : r.labels) absl::StrAppend(&out, "\x1f", k, "=", v);
      out.push_back('\x1e');
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SoakNode>> SoakNode::Create(const Scenario& s, int index,
                                                           const std::string& dir,
                                                           daemon::Sampler::NowFn now) {
  std::unique_ptr<SoakNode> n(new SoakNode());
  n->name_ = s.NodeName(index);
  const std::string sys = dir + "/sys", ethtool = dir + "/ethtool";
  std::error_code ec;
  std::filesystem::create_directories(ethtool, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", ethtool, ": ", ec.message()));
  n->tree_ = std::make_unique<SysfsTreeWriter>(sys);
  absl::StatusOr<std::vector<AnimatedPort>> ports = BuildNodeTree(s, index, n->tree_.get());
  if (!ports.ok()) return ports.status();
  AnimatorOptions ao;
  ao.noise = s.noise;
  ao.background_noise = s.background_noise;
  // The same seed per node as sim/cluster.cc, so a soak and a run see the same noise.
  n->animator_ = std::make_unique<NodeAnimator>(n->tree_.get(), std::move(*ports),
                                                s.seed * 1000003 + index, ethtool, ao);
  for (PortFault& f : PortFaultsOfNode(s, index)) n->animator_->AddFault(std::move(f));
  if (absl::Status st = n->animator_->Step(absl::ZeroDuration()); !st.ok()) return st;

  // The collectors the agent builds for the simulator (daemon/agent/main.cc with
  // --sysfs-root=<tree> --ethtool-source=dir:<dumps>), with its default rediscovery.
  collectors::InfinibandOptions ib;
  ib.sysfs_root = sys;
  collectors::NetdevOptions nd;
  nd.sysfs_root = sys;
  nd.rediscover_interval = ib.rediscover_interval;
  absl::StatusOr<collectors::EthtoolSource> src = collectors::ParseEthtoolSource("dir:" + ethtool);
  if (!src.ok()) return src.status();
  collectors::EthtoolOptions eth;
  eth.sysfs_root = sys;
  eth.source = *src;
  eth.rediscover_interval = ib.rediscover_interval;
  std::vector<std::unique_ptr<collectors::Collector>> cs;
  cs.push_back(std::make_unique<collectors::InfinibandCollector>(ib));
  cs.push_back(std::make_unique<collectors::NetdevCollector>(nd));
  cs.push_back(std::make_unique<collectors::EthtoolCollector>(eth));
  daemon::SamplerOptions so;
  so.node = n->name_;
  so.interval = s.interval;
  n->sampler_ = std::make_unique<daemon::Sampler>(so, std::move(cs), std::move(now),
                                                  [](const std::string&) {});
  return n;
}

absl::Status SoakNode::Connect(daemon::IngestCore* core, uint64_t seed) {
  core_ = core;
  link_ = std::make_shared<NullLink>();
  epoch_ = Mix(seed ^ Mix(std::hash<std::string>()(name_))) | 1;
  session_id_ = epoch_;
  v1::Hello hello;
  hello.set_node(name_);
  hello.set_agent_epoch(epoch_);
  hello.set_protocol_version(daemon::kProtocolVersion);
  hello.set_min_protocol_version(daemon::kMinProtocolVersion);
  hello.set_agent_version(RINGSIDE_VERSION);
  for (const char* c : {"samples", "collectives", "link_events"}) hello.add_capabilities(c);
  hello.set_resend_from_seq(1);
  absl::StatusOr<daemon::IngestCore::SessionStart> start = core->Hello(hello, session_id_, link_);
  if (!start.ok()) return start.status();
  entry_ = start->node;
  return absl::OkStatus();
}

absl::Status SoakNode::Animate(absl::Duration t) { return animator_->Step(t); }

absl::Status SoakNode::Apply(const v1::AgentMessage& msg) {
  if (absl::Status st = core_->Apply(*entry_, epoch_, session_id_, msg); !st.ok()) {
    return absl::Status(st.code(),
                        absl::StrCat(name_, ": ingest refused a message: ", st.message()));
  }
  return absl::OkStatus();
}

absl::Status SoakNode::Send(v1::AgentMessage msg) {
  msg.set_seq(next_seq_++);
  return Apply(msg);
}

absl::Status SoakNode::SampleAndSend(uint64_t* samples) {
  std::shared_ptr<const daemon::AgentSnapshot> snap = sampler_->RunOnce();
  for (const collectors::CollectorSnapshot& cs : snap->collectors) read_errors_ += cs.read_errors;
  // As daemon/agent/uploader.cc OnSnapshot and upload_session.cc BuildDefsLocked do: ids from
  // SeriesIds, values that are not ok left out, a series defined before its first use in the
  // session (and again when its definition changed), info records sent when they change.
  std::vector<uint32_t> changed;
  v1::AgentMessage batch_msg;
  v1::SampleBatch* batch = batch_msg.mutable_samples();
  batch->set_timestamp_unix_nanos(absl::ToUnixNanos(snap->timestamp));
  for (const collectors::CollectorSnapshot& cs : snap->collectors) {
    if (!cs.table) continue;
    const std::vector<uint32_t>& ids = ids_.IdsFor(cs.collector, cs.table, &changed);
    for (size_t i = 0; i < ids.size() && i < cs.values.size(); ++i) {
      if (cs.values[i].status != collectors::ValueStatus::kOk) continue;
      batch->add_ids(ids[i]);
      batch->add_values(cs.values[i].raw);
    }
  }
  if (defined_.size() < size_t{ids_.size()} + 1) defined_.resize(size_t{ids_.size()} + 1, false);
  for (uint32_t id : changed) defined_[id] = false;
  v1::AgentMessage defs_msg;
  v1::SeriesDefs* defs = defs_msg.mutable_series_defs();
  for (uint32_t id : batch->ids()) {
    if (defined_[id]) continue;
    *defs->add_defs() = ids_.Def(id);
    defined_[id] = true;
  }
  const std::string info = InfoText(*snap);
  if (!info_ever_sent_ || info != info_sent_) {
    for (const collectors::CollectorSnapshot& cs : snap->collectors) {
      if (!cs.table) continue;
      for (const collectors::InfoRecord& r : cs.table->info) {
        v1::InfoRecord* p = defs->add_info();
        p->set_source(r.source);
        p->set_device(r.device);
        p->set_port(r.port);
        for (const auto& [k, v] : r.labels) (*p->mutable_labels())[k] = v;
      }
    }
    defs->set_has_info(true);
    info_sent_ = info;
    info_ever_sent_ = true;
  }
  if (defs->defs_size() > 0 || defs->has_info()) {
    if (absl::Status st = Apply(defs_msg); !st.ok()) return st;  // seq 0: session-scoped
  }
  if (batch->ids_size() == 0) return absl::OkStatus();
  *samples += static_cast<uint64_t>(batch->ids_size());
  return Send(std::move(batch_msg));
}

}  // namespace ringside::sim
