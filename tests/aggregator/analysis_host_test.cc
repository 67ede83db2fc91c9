// The analysis host behind the real IngestCore: nodes whose agents declare the very same series
// (same names, so the same interned identities) keep their own detector records — the host's
// per-node, per-slot record hints must never hand one node's port to another — and a series
// redefined under the same slot starts from its own record.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "daemon/aggregator/analysis_host.h"
#include "daemon/aggregator/ingest_core.h"
#include "daemon/aggregator/ingest_stats.h"
#include "daemon/common/protocol.h"

namespace ringside::daemon {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

class NoSession final : public SessionLink {
 public:
  void Replace(absl::Status) override {}
  void AckReady() override {}
};

struct Def {
  std::string source, device, port, counter;
  bool state = false;
};

// Per port mlx5_0 and mlx5_1: symbol_error, link_downed and infiniband_port/state.
std::vector<Def> PortDefs() {
  std::vector<Def> defs;
  for (const char* dev : {"mlx5_0", "mlx5_1"}) {
    defs.push_back({"infiniband", dev, "1", "symbol_error"});
    defs.push_back({"infiniband", dev, "1", "link_downed"});
    defs.push_back({"infiniband_port", dev, "1", "state", true});
  }
  return defs;
}

class AnalysisHostIngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AnalysisHostOptions ho;
    ho.flush_interval = absl::Hours(1);  // the test flushes
    ho.now = [this] { return now_; };
    auto host = AnalysisHost::Start(ho);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = std::move(*host);
    IngestOptions io;
    io.now = [this] { return now_; };
    core_ = std::make_unique<IngestCore>(io, &stats_);
    core_->SetObserver(host_.get());
  }

  void Connect(const std::string& node, const std::vector<Def>& defs) {
    v1::Hello hello;
    hello.set_node(node);
    hello.set_agent_epoch(7);
    hello.set_protocol_version(kProtocolVersion);
    hello.set_min_protocol_version(kMinProtocolVersion);
    auto start = core_->Hello(hello, ++session_id_, session_);
    ASSERT_TRUE(start.ok()) << start.status();
    Node& n = nodes_[node];
    n.entry = start->node;
    n.session = session_id_;
    Define(node, defs);
  }
  void Define(const std::string& node, const std::vector<Def>& defs) {
    Node& n = nodes_[node];
    v1::AgentMessage m;
    for (size_t i = 0; i < defs.size(); ++i) {
      v1::SeriesDef* d = m.mutable_series_defs()->add_defs();
      d->set_id(static_cast<uint32_t>(i));
      d->set_source(defs[i].source);
      d->set_device(defs[i].device);
      d->set_port(defs[i].port);
      d->set_counter(defs[i].counter);
      d->set_kind(defs[i].state ? v1::SERIES_KIND_STATE : v1::SERIES_KIND_COUNTER);
      d->set_width(defs[i].state ? 0 : 64);
      d->set_unit(defs[i].state ? "state" : "count");
    }
    ASSERT_TRUE(core_->Apply(*n.entry, 7, n.session, m).ok());
    n.values.assign(defs.size(), 0);
    for (size_t i = 0; i < defs.size(); ++i) {
      if (defs[i].state) n.values[i] = 4;  // ACTIVE
    }
  }
  // One batch of every series of `node` at now_.
  void Send(const std::string& node) {
    Node& n = nodes_[node];
    v1::AgentMessage m;
    m.set_seq(++n.seq);
    m.mutable_samples()->set_timestamp_unix_nanos(absl::ToUnixNanos(now_));
    for (size_t i = 0; i < n.values.size(); ++i) {
      m.mutable_samples()->add_ids(static_cast<uint32_t>(i));
      m.mutable_samples()->add_values(n.values[i]);
    }
    ASSERT_TRUE(core_->Apply(*n.entry, 7, n.session, m).ok());
  }
  void Second() {
    for (auto& [name, n] : nodes_) Send(name);
    host_->Flush(now_);
    now_ += absl::Seconds(1);
  }
  // "kind node device" of each open incident.
  std::multiset<std::string> Open() const {
    std::multiset<std::string> out;
    for (const analysis::Incident& i : host_->OpenIncidents()) {
      auto get = [&](const char* k) {
        auto it = i.entity.find(k);
        return it == i.entity.end() ? std::string("-") : it->second;
      };
      out.insert(absl::StrCat(analysis::IncidentKindName(i.kind), " ", get("node"), " ",
                              get("device")));
    }
    return out;
  }

  struct Node {
    std::shared_ptr<IngestCore::NodeEntry> entry;
    uint64_t session = 0;
    uint64_t seq = 0;
    std::vector<uint64_t> values;
  };
  absl::Time now_ = kT0;
  IngestStats stats_;
  std::unique_ptr<AnalysisHost> host_;
  std::unique_ptr<IngestCore> core_;
  std::shared_ptr<NoSession> session_ = std::make_shared<NoSession>();
  uint64_t session_id_ = 0;
  std::map<std::string, Node> nodes_;
};

TEST_F(AnalysisHostIngestTest, NodesWithTheSameSeriesKeepTheirOwnPorts) {
  for (const char* n : {"n0", "n1", "n2"}) Connect(n, PortDefs());
  for (int s = 0; s < 5; ++s) Second();
  // n1 mlx5_1 goes down and up twice (state series 5); n2 mlx5_0 counts symbol errors far past
  // the burst rule (series 0).
  for (int cycle = 0; cycle < 2; ++cycle) {
    nodes_["n1"].values[5] = 1;  // DOWN
    Second();
    nodes_["n1"].values[5] = 4;
    Second();
  }
  for (int s = 0; s < 3; ++s) {
    nodes_["n2"].values[0] += 500;
    Second();
  }
  EXPECT_EQ(Open(), (std::multiset<std::string>{"link_flapping n1 mlx5_1", "link_degraded n2 mlx5_0"}));
}

TEST_F(AnalysisHostIngestTest, ASeriesRedefinedInItsSlotUsesItsOwnPort) {
  Connect("n0", PortDefs());
  for (int s = 0; s < 5; ++s) Second();
  // The agent restarts with its ports in the other order: the same series ids (slots) now name
  // the other port. A flap of what is now series 2 is mlx5_1's.
  std::vector<Def> swapped = PortDefs();
  std::rotate(swapped.begin(), swapped.begin() + 3, swapped.end());
  Define("n0", swapped);
  for (int s = 0; s < 3; ++s) Second();
  for (int cycle = 0; cycle < 2; ++cycle) {
    nodes_["n0"].values[2] = 1;
    Second();
    nodes_["n0"].values[2] = 4;
    Second();
  }
  EXPECT_EQ(Open(), (std::multiset<std::string>{"link_flapping n0 mlx5_1"}));
}

}  // namespace
}  // namespace ringside::daemon
