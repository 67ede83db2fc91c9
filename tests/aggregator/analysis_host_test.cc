// The analysis host behind the real IngestCore: nodes whose agents declare the very same series
// (same names, so the same interned identities) keep their own detector records — the host's
// per-node, per-slot record hints must never hand one node's port to another — a series
// redefined under the same slot starts from its own record, and leaving out the steps a detector
// called quiet changes no incident. Incidents are event-driven: a link event that completes a
// finding reaches the listeners without any flush tick, and changes made by several ingest threads
// at once are delivered one batch at a time, in the order they were made.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectors/ibmad/subnet_graph.h"
#include "daemon/aggregator/analysis_host.h"
#include "daemon/aggregator/ingest/ingest_core.h"
#include "daemon/aggregator/ingest/ingest_stats.h"
#include "daemon/common/protocol.h"
#include "tests/testing/eventually.h"
#include "tests/testing/fat_tree_graph.h"
#include "tests/testing/graph_info_defs.h"
#include "tests/testing/temp_dir.h"

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

// One IngestCore and AnalysisHost pair, its incident changes recorded as text.
class Rig {
 public:
  explicit Rig(bool skip_quiet) {
    AnalysisHostOptions ho;
    ho.flush_interval = absl::Hours(1);
    ho.now = [this] { return now_; };
    ho.skip_quiet_steps = skip_quiet;
    // Windows off the 10 s beat at which quiet series still go through, so that a step left out
    // that should not have been moves a resolution.
    ho.analysis.link.flap_quiet = absl::Seconds(187);
    ho.analysis.link.clean_window = absl::Seconds(123);
    ho.analysis.pause_storm.restoration_time = absl::Seconds(33);
    ho.analysis.congestion.clear_window = absl::Seconds(63);
    host_ = std::move(AnalysisHost::Start(ho)).value();
    host_->AddListener([this](const std::vector<analysis::IncidentChange>& cs) {
      for (const analysis::IncidentChange& c : cs) {
        std::string e;
        for (const auto& [k, v] : c.incident.entity) absl::StrAppend(&e, k, "=", v, " ");
        changes_.push_back(absl::StrCat(
            analysis::IncidentChangeTypeName(c.type), " ", analysis::IncidentKindName(c.incident.kind),
            " ", e, absl::FormatTime(c.incident.opened), " ",
            c.incident.resolved ? absl::FormatTime(*c.incident.resolved) : "-", " ",
            c.incident.summary));
      }
    });
    IngestOptions io;
    io.now = [this] { return now_; };
    core_ = std::make_unique<IngestCore>(io, &stats_);
    core_->SetObserver(host_.get());
  }
  void Connect(const std::string& node, const std::vector<v1::SeriesDef>& defs) {
    v1::Hello hello;
    hello.set_node(node);
    hello.set_agent_epoch(7);
    hello.set_protocol_version(kProtocolVersion);
    hello.set_min_protocol_version(kMinProtocolVersion);
    auto start = core_->Hello(hello, ++session_id_, session_);
    ASSERT_TRUE(start.ok()) << start.status();
    sessions_[node] = {start->node, session_id_};
    Define(node, defs);
  }
  // The node's agent (re)declares its series.
  void Define(const std::string& node, const std::vector<v1::SeriesDef>& defs) {
    auto& [entry, session] = sessions_[node];
    v1::AgentMessage m;
    for (const v1::SeriesDef& d : defs) *m.mutable_series_defs()->add_defs() = d;
    ASSERT_TRUE(core_->Apply(*entry, 7, session, m).ok());
  }
  void Send(const std::string& node, uint64_t seq, const std::vector<uint64_t>& values) {
    auto& [entry, session] = sessions_[node];
    v1::AgentMessage m;
    m.set_seq(seq);
    m.mutable_samples()->set_timestamp_unix_nanos(absl::ToUnixNanos(now_));
    for (size_t i = 0; i < values.size(); ++i) {
      m.mutable_samples()->add_ids(static_cast<uint32_t>(i));
      m.mutable_samples()->add_values(values[i]);
    }
    ASSERT_TRUE(core_->Apply(*entry, 7, session, m).ok());
  }
  void Flush() { host_->Flush(now_); }
  AnalysisHost& host() { return *host_; }
  void SetNow(absl::Time t) { now_ = t; }
  const std::vector<std::string>& changes() const { return changes_; }

 private:
  absl::Time now_ = kT0;
  IngestStats stats_;
  std::unique_ptr<AnalysisHost> host_;
  std::unique_ptr<IngestCore> core_;
  std::shared_ptr<NoSession> session_ = std::make_shared<NoSession>();
  uint64_t session_id_ = 0;
  std::map<std::string, std::pair<std::shared_ptr<IngestCore::NodeEntry>, uint64_t>> sessions_;
  std::vector<std::string> changes_;
};

class AnalysisHostIngestTest : public ::testing::Test {
 protected:
  void Connect(const std::string& node, const std::vector<Def>& defs) {
    rig_.Connect(node, SeriesDefs(defs));
    Reset(node, defs);
  }
  void Define(const std::string& node, const std::vector<Def>& defs) {
    rig_.Define(node, SeriesDefs(defs));
    Reset(node, defs);
  }
  void Second() {
    rig_.SetNow(now_);
    for (auto& [name, n] : nodes_) rig_.Send(name, ++n.seq, n.values);
    rig_.Flush();
    now_ += absl::Seconds(1);
  }
  // "kind node device" of each open incident.
  std::multiset<std::string> Open() {
    std::multiset<std::string> out;
    for (const analysis::Incident& i : rig_.host().OpenIncidents()) {
      auto get = [&](const char* k) {
        auto it = i.entity.find(k);
        return it == i.entity.end() ? std::string("-") : it->second;
      };
      out.insert(absl::StrCat(analysis::IncidentKindName(i.kind), " ", get("node"), " ",
                              get("device")));
    }
    return out;
  }

  static std::vector<v1::SeriesDef> SeriesDefs(const std::vector<Def>& defs) {
    std::vector<v1::SeriesDef> out;
    for (size_t i = 0; i < defs.size(); ++i) {
      v1::SeriesDef d;
      d.set_id(static_cast<uint32_t>(i));
      d.set_source(defs[i].source);
      d.set_device(defs[i].device);
      d.set_port(defs[i].port);
      d.set_counter(defs[i].counter);
      d.set_kind(defs[i].state ? v1::SERIES_KIND_STATE : v1::SERIES_KIND_COUNTER);
      d.set_width(defs[i].state ? 0 : 64);
      d.set_unit(defs[i].state ? "state" : "count");
      out.push_back(d);
    }
    return out;
  }
  // Counters from 0, states ACTIVE.
  void Reset(const std::string& node, const std::vector<Def>& defs) {
    Node& n = nodes_[node];
    n.values.assign(defs.size(), 0);
    for (size_t i = 0; i < defs.size(); ++i) {
      if (defs[i].state) n.values[i] = 4;
    }
  }

  struct Node {
    uint64_t seq = 0;
    std::vector<uint64_t> values;
  };
  Rig rig_{/*skip_quiet=*/true};
  absl::Time now_ = kT0;
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

// Each node: an InfiniBand port (errors, downs, state), a RoCE netdev's PFC counters on priorities
// 0 and 3 with the stall-prevention events, its ECN/CNP counters, and a second InfiniBand port
// without a state series (only counters tell its story). Over 20 simulated minutes,
// on different nodes: a flap, a degraded link, a pause storm that spreads and then restores, a
// storm event on a port with idle priorities, congestion that clears; the rest idle, with the odd
// small pause burst. Both rigs must change the same incidents the same way at the same times; the
// detectors' windows are set off the 10 s beat at which quiet series still go through.
TEST(AnalysisHostQuietTest, LeavingOutQuietStepsChangesNoIncident) {
  struct S {
    const char* source;
    const char* device;
    const char* counter;
    int priority;
    bool state;
  };
  const std::vector<S> series = {
      {"infiniband", "mlx5_0", "symbol_error", -1, false},             // 0
      {"infiniband", "mlx5_0", "link_downed", -1, false},              // 1
      {"infiniband", "mlx5_0", "port_rcv_errors", -1, false},          // 2
      {"infiniband_port", "mlx5_0", "state", -1, true},                // 3
      {"ethtool", "eth0", "rx_prio0_pause", 0, false},                 // 4
      {"ethtool", "eth0", "tx_prio0_pause", 0, false},                 // 5
      {"ethtool", "eth0", "rx_prio3_pause_duration", 3, false},        // 6
      {"ethtool", "eth0", "tx_prio3_pause_duration", 3, false},        // 7
      {"ethtool", "eth0", "rx_prio3_pause", 3, false},                 // 8
      {"ethtool", "eth0", "tx_prio3_pause", 3, false},                 // 9
      {"ethtool", "eth0", "tx_pause_storm_warning_events", -1, false},  // 10
      {"infiniband_hw", "mlx5_0", "np_ecn_marked_roce_packets", -1, false},  // 11
      {"infiniband_hw", "mlx5_0", "rp_cnp_handled", -1, false},              // 12
      {"netdev", "eth0", "carrier_changes", -1, false},                      // 13
      {"netdev", "eth0", "operstate", -1, true},                             // 14
      {"infiniband", "mlx5_1", "symbol_error", -1, false},                   // 15: no state
      {"infiniband", "mlx5_1", "link_downed", -1, false},                    // 16
  };
  std::vector<v1::SeriesDef> defs;
  for (size_t i = 0; i < series.size(); ++i) {
    v1::SeriesDef d;
    d.set_id(static_cast<uint32_t>(i));
    d.set_source(series[i].source);
    d.set_device(series[i].device);
    d.set_port(std::string(series[i].source) == "ethtool" || std::string(series[i].source) == "netdev"
                   ? ""
                   : "1");
    d.set_counter(series[i].counter);
    d.set_priority(series[i].priority);
    d.set_kind(series[i].state ? v1::SERIES_KIND_STATE : v1::SERIES_KIND_COUNTER);
    d.set_width(series[i].state ? 0 : 64);
    d.set_unit(series[i].state ? "state" : "count");
    defs.push_back(d);
  }
  Rig skip(true), all(false);
  const std::vector<std::string> nodes = {"n0", "n1", "n2", "n3"};
  for (Rig* r : {&skip, &all}) {
    for (const std::string& n : nodes) r->Connect(n, defs);
  }
  std::map<std::string, std::vector<uint64_t>> values;
  for (const std::string& n : nodes) {
    values[n].assign(series.size(), 0);
    values[n][3] = 4;   // ACTIVE
    values[n][14] = 6;  // up
  }
  for (int sec = 0; sec < 1300; ++sec) {
    for (const std::string& n : nodes) {
      std::vector<uint64_t>& v = values[n];
      // n1: mlx5_0 flaps twice around 100 s; its state down for one sample each time.
      v[3] = (n == "n1" && (sec == 100 || sec == 104)) ? 1 : 4;
      if (n == "n1" && (sec == 100 || sec == 104)) v[1] += 1;
      // n2: symbol errors 300..310 s (degraded), then clean.
      if (n == "n2" && sec >= 300 && sec < 310) v[0] += 400;
      // n0: sends pauses on priority 3 (tx 80 %) 400..420 s; n3 under the same node domain is
      // not involved; n0's rx pauses briefly.
      if (n == "n0" && sec >= 400 && sec < 420) {
        v[7] += 800'000;
        v[9] += 5000;
        v[6] += 300'000;
        v[8] += 2000;
      }
      // n3: a stall-prevention event at 500 s with priorities 0 and 3 idle.
      if (n == "n3" && sec == 500) v[10] += 1;
      // n1: ECN marks 600..610 s, then none.
      if (n == "n1" && sec >= 600 && sec < 610) v[11] += 50'000;
      // Everyone: a small rx pause burst now and then (below every rule).
      if (sec % 97 == 0) v[4] += 3;
      if (sec % 89 == 0) v[6] += 1000;
      // n2: a carrier bounce at 700 s (carrier_changes +2, operstate stays up).
      if (n == "n2" && sec == 700) v[13] += 2;
      // n3: mlx5_1, counters only, flaps twice at 800 s; n0's mlx5_1 degrades at 900 s.
      if (n == "n3" && (sec == 800 || sec == 803)) v[16] += 1;
      if (n == "n0" && sec >= 900 && sec < 905) v[15] += 400;
    }
    const absl::Time t = kT0 + absl::Seconds(sec);
    for (Rig* r : {&skip, &all}) {
      r->SetNow(t);
      for (const std::string& n : nodes) r->Send(n, static_cast<uint64_t>(sec + 1), values[n]);
      r->Flush();
    }
  }
  EXPECT_EQ(skip.changes(), all.changes());
  // And the scenario did raise what it meant to.
  std::string kinds;
  for (const std::string& c : all.changes()) {
    absl::StrAppend(&kinds, c.substr(0, c.find(' ', c.find(' ') + 1)), "\n");
  }
  for (const char* k : {"opened link_flapping", "opened link_degraded", "opened pause_storm",
                        "opened congestion", "resolved link_flapping", "resolved link_degraded",
                        "resolved pause_storm", "resolved congestion"}) {
    EXPECT_NE(kinds.find(k), std::string::npos) << k << " not in:\n" << kinds;
  }
}

v1::LinkEvents OneEvent(const std::string& device, absl::Time t, v1::LinkState from,
                        v1::LinkState to) {
  v1::LinkEvents events;
  v1::LinkEvent* e = events.add_events();
  e->set_time_unix_nanos(absl::ToUnixNanos(t));
  e->set_source("verbs");
  e->set_device(device);
  e->set_port("1");
  e->set_from(from);
  e->set_to(to);
  return events;
}

// What the listeners were handed, in order, with the calls that overlapped another (none may).
struct Recorded {
  absl::Mutex mu;
  std::vector<analysis::IncidentChange> changes ABSL_GUARDED_BY(mu);
  int calls_in_progress ABSL_GUARDED_BY(mu) = 0;
  int overlapping_calls ABSL_GUARDED_BY(mu) = 0;
  size_t Count(analysis::IncidentChangeType type) {
    absl::MutexLock l(&mu);
    size_t n = 0;
    for (const auto& c : changes) n += c.type == type ? 1 : 0;
    return n;
  }
};

std::unique_ptr<AnalysisHost> EventHost(Recorded& rec) {
  AnalysisHostOptions ho;
  ho.flush_interval = absl::Hours(1);  // no tick during the test: only the event path
  auto host = AnalysisHost::Start(ho);
  EXPECT_TRUE(host.ok()) << host.status();
  (*host)->AddListener([&rec](const std::vector<analysis::IncidentChange>& cs) {
    {
      absl::MutexLock l(&rec.mu);
      if (++rec.calls_in_progress > 1) ++rec.overlapping_calls;
    }
    absl::SleepFor(absl::Microseconds(50));  // widen the window an overlap would need
    absl::MutexLock l(&rec.mu);
    --rec.calls_in_progress;
    rec.changes.insert(rec.changes.end(), cs.begin(), cs.end());
  });
  return std::move(*host);
}

TEST(AnalysisHostEventTest, ALinkEventOpensAndResolvesWithoutAFlush) {
  Recorded rec;
  std::unique_ptr<AnalysisHost> host = EventHost(rec);
  const absl::Time t = absl::Now();
  host->OnLinkEvents("n1", 1, 1, t, OneEvent("mlx5_0", t, v1::LINK_STATE_UP, v1::LINK_STATE_DOWN));
  // The incident is open (and stored) once OnLinkEvents returns; the listeners get it at once.
  ASSERT_EQ(host->OpenIncidents().size(), 1u);
  EXPECT_EQ(host->OpenIncidents()[0].kind, analysis::IncidentKind::kLinkDown);
  ASSERT_TRUE(testing::Eventually(
      [&] { return rec.Count(analysis::IncidentChangeType::kOpened) == 1; }, absl::Seconds(5)));
  const absl::Time t2 = t + absl::Milliseconds(300);
  host->OnLinkEvents("n1", 1, 2, t2,
                     OneEvent("mlx5_0", t2, v1::LINK_STATE_DOWN, v1::LINK_STATE_UP));
  EXPECT_TRUE(host->OpenIncidents().empty());
  ASSERT_TRUE(testing::Eventually(
      [&] { return rec.Count(analysis::IncidentChangeType::kResolved) == 1; }, absl::Seconds(5)));
  EXPECT_EQ(host->flush_stats().flushes, 0u);  // no tick ran: the event path alone
  EXPECT_EQ(host->flush_stats().applies, 2u);
  absl::MutexLock l(&rec.mu);
  ASSERT_GE(rec.changes.size(), 2u);
  EXPECT_EQ(rec.changes.front().type, analysis::IncidentChangeType::kOpened);
  EXPECT_EQ(rec.changes.back().type, analysis::IncidentChangeType::kResolved);
  EXPECT_EQ(*rec.changes.back().incident.resolved, t2);  // resolved at its real time
}

TEST(AnalysisHostEventTest, ConcurrentIngestThreadsDeliverInTheOrderChangesWereMade) {
  Recorded rec;
  std::unique_ptr<AnalysisHost> host = EventHost(rec);
  constexpr int kThreads = 4;
  constexpr int kPorts = 40;
  const absl::Time t0 = absl::Now();
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      const std::string node = absl::StrCat("n", th);
      for (int p = 0; p < kPorts; ++p) {  // one down→up cycle per port: link_down, resolved
        const std::string dev = absl::StrCat("mlx5_", p);
        const absl::Time t = t0 + absl::Milliseconds(10 * p);
        host->OnLinkEvents(node, 1, 1, t, OneEvent(dev, t, v1::LINK_STATE_UP, v1::LINK_STATE_DOWN));
        const absl::Time u = t + absl::Milliseconds(5);
        host->OnLinkEvents(node, 1, 2, u, OneEvent(dev, u, v1::LINK_STATE_DOWN, v1::LINK_STATE_UP));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  constexpr size_t kIncidents = kThreads * kPorts;
  ASSERT_TRUE(testing::Eventually(
      [&] { return rec.Count(analysis::IncidentChangeType::kResolved) == kIncidents; },
      absl::Seconds(20)));
  absl::MutexLock l(&rec.mu);
  EXPECT_EQ(rec.overlapping_calls, 0);
  // Ids are handed out in the order incidents open, under the analysis lock: delivered in that
  // order, each incident's revisions rising, opened first and resolved last.
  uint64_t last_opened = 0;
  std::map<uint64_t, uint64_t> revision;
  std::set<uint64_t> resolved;
  for (const analysis::IncidentChange& c : rec.changes) {
    const uint64_t id = c.incident.id;
    if (c.type == analysis::IncidentChangeType::kOpened) {
      EXPECT_GT(id, last_opened);
      last_opened = id;
      EXPECT_FALSE(revision.count(id));
    } else {
      ASSERT_TRUE(revision.count(id)) << "incident " << id << " changed before it opened";
      EXPECT_FALSE(resolved.count(id)) << "incident " << id << " changed after it resolved";
    }
    if (revision.count(id)) EXPECT_GT(c.incident.revision, revision[id]);
    revision[id] = c.incident.revision;
    if (c.type == analysis::IncidentChangeType::kResolved) resolved.insert(id);
  }
  EXPECT_EQ(revision.size(), kIncidents);
  EXPECT_EQ(resolved.size(), kIncidents);
}

}  // namespace
}  // namespace ringside::daemon

namespace ringside::daemon {
namespace {

v1::SeriesDefs LldpDefs(const std::string& leaf, const std::string& port) {
  v1::SeriesDefs d;
  d.set_has_info(true);
  v1::InfoRecord* nd = d.add_info();
  nd->set_source("netdev");
  nd->set_device("eth2");
  (*nd->mutable_labels())["rdma_device"] = "mlx5_0";
  (*nd->mutable_labels())["rdma_port"] = "1";
  v1::InfoRecord* l = d.add_info();
  l->set_source("lldp");
  l->set_device("eth2");
  (*l->mutable_labels())["chassis_name"] = leaf;
  (*l->mutable_labels())["chassis_id"] = "0c:29:00:00:00:" + leaf.substr(leaf.size() - 2);
  (*l->mutable_labels())["port_id"] = port;
  (*l->mutable_labels())["port_descr"] = port;
  return d;
}

// issue #16: with no --topology file the detectors take the topology the agents' LLDP neighbours
// give; a file, when given, wins.
TEST(AnalysisHostTopologyTest, LldpNeighboursGiveTheTopologyWhenNoFileIsGiven) {
  AnalysisHostOptions ho;
  ho.flush_interval = absl::Hours(1);
  std::vector<std::string> logged;
  ho.log = [&logged](const std::string& m) { logged.push_back(m); };
  auto host = AnalysisHost::Start(ho);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ((*host)->topology_source(), "none");
  (*host)->OnInfo("node-a", LldpDefs("leaf-01", "Ethernet1"));
  (*host)->OnInfo("node-b", LldpDefs("leaf-01", "Ethernet2"));
  (*host)->OnInfo("node-c", LldpDefs("leaf-02", "Ethernet1"));
  EXPECT_EQ((*host)->topology_source(), "lldp");
  bool said = false;
  for (const std::string& m : logged) said = said || m.find("topology from LLDP") != std::string::npos;
  EXPECT_TRUE(said) << "the topology change is logged";

  testing::TempDir dir;
  const std::string file = dir.path() + "/topology.txt";
  std::ofstream(file) << "node-a leaf-9\n";
  AnalysisHostOptions fo;
  fo.flush_interval = absl::Hours(1);
  fo.topology_file = file;
  auto with_file = AnalysisHost::Start(fo);
  ASSERT_TRUE(with_file.ok()) << with_file.status();
  (*with_file)->OnInfo("node-a", LldpDefs("leaf-01", "Ethernet1"));
  EXPECT_EQ((*with_file)->topology_source(), "file");
}

// issue #16 item 3: a --topology file merged with LLDP: the file wins for the hosts it names, LLDP
// fills in the others, and where they differ it is a disagreement, logged and kept.
TEST(AnalysisHostTopologyTest, AFileIsMergedWithLldpAndItsDisagreementsReported) {
  testing::TempDir dir;
  const std::string file = dir.path() + "/topology.txt";
  std::ofstream(file) << "node-a leaf-01\nnode-b leaf-09\n";
  AnalysisHostOptions ho;
  ho.flush_interval = absl::Hours(1);
  ho.topology_file = file;
  std::vector<std::string> logged;
  ho.log = [&logged](const std::string& m) { logged.push_back(m); };
  auto host = AnalysisHost::Start(ho);
  ASSERT_TRUE(host.ok()) << host.status();
  (*host)->OnInfo("node-a", LldpDefs("leaf-01", "Ethernet1"));  // agrees
  (*host)->OnInfo("node-b", LldpDefs("leaf-02", "Ethernet2"));  // the file says leaf-09
  (*host)->OnInfo("node-c", LldpDefs("leaf-02", "Ethernet3"));  // not in the file
  EXPECT_EQ((*host)->topology_source(), "file");
  TopologyState t = (*host)->topology_state();
  EXPECT_EQ(t.discovery, "lldp");
  ASSERT_NE(t.topology, nullptr);
  EXPECT_EQ(t.topology->LeafOf("node-b", "mlx5_0", "1"), "leaf-09");  // the file wins
  EXPECT_EQ(t.topology->LeafOf("node-c", "mlx5_0", "1"), "leaf-02");  // LLDP fills in
  ASSERT_EQ(t.disagreements.size(), 1u);
  EXPECT_EQ(analysis::DescribeDisagreement(t.disagreements[0]),
            "node-b: other_switch: file leaf-09, discovered leaf-02 Ethernet2");
  const std::string said =
      "topology: the --topology file disagrees with lldp: node-b: other_switch: file leaf-09, "
      "discovered leaf-02 Ethernet2";
  EXPECT_EQ(std::count(logged.begin(), logged.end(), said), 1) << "logged once, on change";
  // The peer of each port, as `ringside links` shows it.
  auto peer = PeerOfLink(t, "node-c", "infiniband", "mlx5_0", "1");
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->name, "leaf-02");
  EXPECT_EQ(peer->port_name, "Ethernet3");
  peer = PeerOfLink(t, "node-c", "netdev", "eth2", "");
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->port_name, "Ethernet3");
  peer = PeerOfLink(t, "node-b", "infiniband", "mlx5_0", "1");
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->name, "leaf-09");  // the file's leaf, no port known
  EXPECT_FALSE(PeerOfLink(t, "node-z", "infiniband", "mlx5_0", "1").has_value());

  // node-b recabled to where the file says: the disagreement goes, and that is logged too.
  (*host)->OnInfo("node-b", LldpDefs("leaf-09", "Ethernet2"));
  EXPECT_TRUE((*host)->topology_state().disagreements.empty());
  EXPECT_NE(std::find_if(logged.begin(), logged.end(),
                         [](const std::string& m) {
                           return m.find("topology: no longer disagrees: node-b") == 0;
                         }),
            logged.end());
}

v1::SeriesDefs RoceLldpDefs(const std::string& leaf, const std::string& port) {
  v1::SeriesDefs d;
  d.set_has_info(true);
  v1::InfoRecord* nd = d.add_info();
  nd->set_source("netdev");
  nd->set_device("eth0");
  (*nd->mutable_labels())["rdma_device"] = "mlx5_3";
  (*nd->mutable_labels())["rdma_port"] = "1";
  v1::InfoRecord* l = d.add_info();
  l->set_source("lldp");
  l->set_device("eth0");
  (*l->mutable_labels())["chassis_name"] = leaf;
  (*l->mutable_labels())["port_id"] = port;
  return d;
}

// issue #16 item 4: a port moved to another switch is an event (logged, kept, oldest first), and
// an incident opened while the ports were on leaf-01 keeps the leaf it was judged with.
// What an agent with --fabric-discover sends: its discovered graph as ib_node / ib_link records.
v1::SeriesDefs IbDiscoveryDefs(const collectors::SubnetGraph& g) {
  v1::SeriesDefs defs;
  testing::AddGraphInfo(g, &defs);
  return defs;
}

// issue #16: two discoverers on two rail planes give the detectors both planes; one that falls
// silent stops counting, and with none left the IB discovery is gone.
TEST(AnalysisHostTopologyTest, SeveralDiscoverersAreMergedAndASilentOneDropped) {
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  AnalysisHostOptions ho;
  ho.flush_interval = absl::Hours(1);
  ho.now = [&now] { return now; };
  std::vector<std::string> logged;
  ho.log = [&logged](const std::string& m) { logged.push_back(m); };
  auto host = AnalysisHost::Start(ho);
  ASSERT_TRUE(host.ok()) << host.status();
  auto said = [&logged](const std::string& line) {
    return std::find(logged.begin(), logged.end(), line) != logged.end();
  };
  (*host)->OnInfo("discA", IbDiscoveryDefs(testing::FatTreeGraph{1}.Build()));
  (*host)->OnInfo("discB", IbDiscoveryDefs(testing::FatTreeGraph{2}.Build()));
  (*host)->OnInfo("discC", IbDiscoveryDefs(testing::FatTreeGraph{2}.Build()));  // no change
  EXPECT_EQ((*host)->topology_source(), "ib-discovery");
  EXPECT_TRUE(said("topology: from the InfiniBand subnet discovery of discA, discB (update 2)"))
      << absl::StrJoin(logged, "\n");
  EXPECT_EQ((*host)->topology_state().topology->LeavesOf("host1").size(), 2u);

  now += absl::Minutes(10);
  (*host)->OnSamples("discA", {});
  (*host)->OnSamples("discC", {});
  now += absl::Minutes(6);
  (*host)->OnSamples("discA", {});
  // discB is dropped, but discC has the same plane: nothing changes for the detectors.
  EXPECT_EQ(std::count_if(logged.begin(), logged.end(),
                          [](const std::string& m) {
                            return m.find("subnet discovery of") != std::string::npos;
                          }),
            2);
  EXPECT_EQ((*host)->topology_state().topology->LeavesOf("host1").size(), 2u);
  now += absl::Minutes(10);
  (*host)->OnSamples("discA", {});
  EXPECT_TRUE(said("topology: from the InfiniBand subnet discovery of discA (update 3)"))
      << absl::StrJoin(logged, "\n");
  EXPECT_EQ((*host)->topology_state().topology->LeavesOf("host1").size(), 1u);
  now += absl::Minutes(16);
  (*host)->OnSamples("other", {});
  EXPECT_TRUE(said("topology: no InfiniBand subnet discovery left (every discoverer is stale)"))
      << absl::StrJoin(logged, "\n");
  EXPECT_EQ((*host)->topology_source(), "none");
}

TEST(AnalysisHostTopologyTest, RecablingIsAnEventAndAnOpenIncidentKeepsItsLeaf) {
  Rig rig(true);
  std::vector<analysis::IncidentChange> changes;
  rig.host().AddListener([&changes](const std::vector<analysis::IncidentChange>& cs) {
    changes.insert(changes.end(), cs.begin(), cs.end());
  });
  std::vector<v1::SeriesDef> defs;
  for (const char* c : {"rx_prio3_pause_duration", "tx_prio3_pause_duration"}) {
    v1::SeriesDef d;
    d.set_id(static_cast<uint32_t>(defs.size()));
    d.set_source("ethtool");
    d.set_device("eth0");
    d.set_counter(c);
    d.set_priority(3);
    d.set_kind(v1::SERIES_KIND_COUNTER);
    d.set_width(64);
    d.set_unit("count");
    defs.push_back(d);
  }
  const std::vector<std::string> nodes = {"node-a", "node-c"};
  for (const std::string& n : nodes) {
    rig.Connect(n, defs);
    rig.host().OnInfo(n, RoceLldpDefs("leaf-01", n == "node-a" ? "Ethernet1" : "Ethernet3"));
  }
  EXPECT_EQ(rig.host().topology_source(), "lldp");
  // Both paused 90 % of the time by a sender nobody reports: a storm on their leaf.
  std::map<std::string, uint64_t> rx;
  auto second = [&](int sec) {
    rig.SetNow(kT0 + absl::Seconds(sec));
    for (const std::string& n : nodes) {
      rx[n] += 900'000;
      rig.Send(n, static_cast<uint64_t>(sec + 1), {rx[n], 0});
    }
    rig.Flush();
  };
  for (int sec = 0; sec < 8; ++sec) second(sec);
  std::vector<analysis::Incident> open = rig.host().OpenIncidents();
  ASSERT_EQ(open.size(), 1u);
  const analysis::Incident storm = open[0];
  ASSERT_EQ(storm.kind, analysis::IncidentKind::kPauseStorm);
  ASSERT_EQ(storm.entity.count("leaf"), 1u);
  EXPECT_EQ(storm.entity.at("leaf"), "leaf-01");

  // Recabled: node-a and node-c now answer from leaf-02 (node-c on another port number too).
  rig.host().OnInfo("node-a", RoceLldpDefs("leaf-02", "Ethernet1"));
  rig.host().OnInfo("node-c", RoceLldpDefs("leaf-02", "Ethernet7"));
  std::vector<analysis::TopologyEvent> events = rig.host().topology_events();
  std::string all;
  for (const analysis::TopologyEvent& e : events) absl::StrAppend(&all, DescribeTopologyEvent(e), "\n");
  ASSERT_EQ(events.size(), 2u) << all;
  EXPECT_EQ(analysis::DescribeTopologyEvent(events[0]),
            "node-a mlx5_3/1 moved: leaf-01 Ethernet1 → leaf-02 Ethernet1");
  EXPECT_EQ(analysis::DescribeTopologyEvent(events[1]),
            "node-c mlx5_3/1 moved: leaf-01 Ethernet3 → leaf-02 Ethernet7");
  EXPECT_EQ(events[0].source, "lldp");
  EXPECT_EQ(events[0].reporter, "node-a");
  EXPECT_EQ(events[1].reporter, "node-c");
  EXPECT_EQ(rig.host().topology_state().events, 2u);
  // The same report again changes nothing.
  rig.host().OnInfo("node-c", RoceLldpDefs("leaf-02", "Ethernet7"));
  EXPECT_EQ(rig.host().topology_events().size(), 2u);

  for (int sec = 8; sec < 12; ++sec) second(sec);
  // The incident judged on leaf-01 still says leaf-01, in every change made to it.
  for (const analysis::IncidentChange& c : changes) {
    if (c.incident.id != storm.id) continue;
    EXPECT_EQ(c.incident.entity, storm.entity) << analysis::IncidentChangeTypeName(c.type);
  }
  for (const analysis::Incident& i : rig.host().OpenIncidents()) {
    if (i.id == storm.id) EXPECT_EQ(i.entity.at("leaf"), "leaf-01");
  }
}

}  // namespace
}  // namespace ringside::daemon
