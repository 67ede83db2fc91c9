// LLDP through real lldpd daemons: a "host" namespace and two "switch" namespaces this test
// creates (and always deletes), each running its own lldpd with its own control socket. The host's
// h0 is cabled (a veth pair) to leaf-1's swp1; the agent's LLDP collector, reading the host
// lldpd's socket, sees leaf-1 port swp1 with its management address. Recabling h0 to leaf-2's
// swp3 (the pair deleted and made again to the other namespace) replaces the record, logs the
// change and counts it. The agent process itself, run in the host namespace, logs the same
// neighbours. Skips when namespaces cannot be made or lldpd is not installed. Frames stay inside
// the namespaces (tests/testing/lldp_lab.h makes them).
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "collectors/lldp/lldp_collector.h"
#include "tests/testing/lldp_lab.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using collectors::CollectorSnapshot;
using collectors::CycleErrors;
using collectors::InfoRecord;

class LldpNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::LldpLab::LldpdInstalled()) {
      GTEST_SKIP() << "lldpd is not installed (apt-get install lldpd)";
    }
    lab_ = std::make_unique<testing::LldpLab>(dir_.path());
    const std::pair<std::string*, const char*> namespaces[] = {
        {&host_, "rs-lh"}, {&sw1_, "rs-ls1"}, {&sw2_, "rs-ls2"}};
    for (auto [ns, tag] : namespaces) {
      absl::StatusOr<std::string> made = lab_->AddNamespace(tag);
      if (absl::IsFailedPrecondition(made.status())) GTEST_SKIP() << made.status();
      ASSERT_TRUE(made.ok()) << made.status();
      *ns = *made;
    }
    Cable(sw1_, "swp1", "192.0.2.1/24");
    ASSERT_TRUE(StartLldpd(host_, "h0", "host-1"));
    ASSERT_TRUE(StartLldpd(sw1_, "swp*", "leaf-1"));
    ASSERT_TRUE(StartLldpd(sw2_, "swp*", "leaf-2"));
  }

  void TearDown() override { lab_.reset(); }

  std::string Socket(const std::string& ns) const { return lab_->Socket(ns); }

  // h0 in the host namespace ↔ `port` in `sw`, both up; `addr` on the switch end (its LLDP
  // management address).
  void Cable(const std::string& sw, const std::string& port, const std::string& addr) {
    absl::Status s = lab_->Cable(host_, "h0", sw, port, addr);
    ASSERT_TRUE(s.ok()) << s;
  }

  bool StartLldpd(const std::string& ns, const std::string& pattern, const std::string& name) {
    absl::Status s = lab_->StartLldpd(ns, pattern, name);
    EXPECT_TRUE(s.ok()) << s;
    return s.ok();
  }

  // Collects until h0's record names `chassis_name` (bounded); the last snapshot.
  CollectorSnapshot WaitForNeighbor(collectors::LldpCollector& c, const std::string& chassis_name) {
    CollectorSnapshot out;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      CycleErrors errors;
      out = CollectorSnapshot{};
      c.Collect(absl::Now(), out, errors);
      for (const InfoRecord& r : out.table->info) {
        auto it = r.labels.find("chassis_name");
        if (r.device == "h0" && it != r.labels.end() && it->second == chassis_name) return out;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    ADD_FAILURE() << "h0 never had neighbour " << chassis_name;
    return out;
  }

  static const InfoRecord* Record(const CollectorSnapshot& s, const std::string& netdev) {
    for (const InfoRecord& r : s.table->info) {
      if (r.device == netdev) return &r;
    }
    return nullptr;
  }

  static uint64_t Changes(const CollectorSnapshot& s) {
    for (size_t i = 0; i < s.table->defs.size(); ++i) {
      if (s.table->defs[i].device == "h0" && s.table->defs[i].counter == "neighbor_changes") {
        return s.values[i].raw;
      }
    }
    return ~uint64_t{0};
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::LldpLab> lab_;
  std::string host_, sw1_, sw2_;
};

TEST_F(LldpNetnsTest, HostPortSeesItsSwitchAndFollowsARecabling) {
  std::vector<std::string> logs;
  collectors::LldpOptions o;
  o.client.socket_path = Socket(host_);
  o.refresh_interval = absl::ZeroDuration();
  o.log = [&logs](const std::string& m) { logs.push_back(m); };
  collectors::LldpCollector collector(o);

  CollectorSnapshot first = WaitForNeighbor(collector, "leaf-1");
  EXPECT_TRUE(collector.Availability().ok()) << collector.Availability();
  const InfoRecord* r = Record(first, "h0");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->source, "lldp");
  EXPECT_EQ(r->labels.at("protocol"), "LLDP");
  EXPECT_EQ(r->labels.at("port_id_subtype"), "ifname");
  EXPECT_EQ(r->labels.at("port_id"), "swp1");
  EXPECT_EQ(r->labels.at("port_descr"), "swp1");
  EXPECT_EQ(r->labels.at("chassis_descr"), "ringside test leaf-1");
  EXPECT_EQ(r->labels.at("chassis_id_subtype"), "mac");
  EXPECT_FALSE(r->labels.at("chassis_id").empty());
  EXPECT_EQ(r->labels.at("mgmt_addr"), "192.0.2.1");
  const std::string leaf1_id = r->labels.at("chassis_id");
  EXPECT_EQ(Changes(first), 0u);

  // Recabled: h0 now goes to leaf-2's swp3.
  ASSERT_TRUE(lab_->Uncable(host_, "h0").ok());
  Cable(sw2_, "swp3", "192.0.2.2/24");
  const absl::Time recabled = absl::Now();
  CollectorSnapshot second = WaitForNeighbor(collector, "leaf-2");
  const double seconds = absl::ToDoubleSeconds(absl::Now() - recabled);
  RecordProperty("recabling_seen_after_seconds", absl::StrCat(seconds));
  std::fprintf(stderr, "recabling seen after %.2f s (lldpd tx-interval 1 s)\n", seconds);
  r = Record(second, "h0");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->labels.at("port_id"), "swp3");
  EXPECT_EQ(r->labels.at("mgmt_addr"), "192.0.2.2");
  EXPECT_NE(r->labels.at("chassis_id"), leaf1_id);
  EXPECT_GE(Changes(second), 1u);
  bool logged = false;
  for (const std::string& line : logs) {
    logged |= line.find("h0 neighbour changed from leaf-1 port swp1") != std::string::npos &&
              line.find("to leaf-2 port swp3") != std::string::npos;
    logged |= line.find("h0 lost its neighbour leaf-1 port swp1") != std::string::npos;
  }
  EXPECT_TRUE(logged) << "logs:\n" << absl::StrJoin(logs, "\n");
}

// lldpd stopped: the collector goes off with a reason, no records, and comes back by itself.
TEST_F(LldpNetnsTest, LldpdStoppedAndStartedAgain) {
  std::vector<std::string> logs;
  collectors::LldpOptions o;
  o.client.socket_path = Socket(host_);
  o.refresh_interval = absl::ZeroDuration();
  o.log = [&logs](const std::string& m) { logs.push_back(m); };
  collectors::LldpCollector collector(o);
  WaitForNeighbor(collector, "leaf-1");

  ASSERT_TRUE(lab_->StopLldpd(host_).ok());
  CollectorSnapshot off;
  CycleErrors errors;
  collector.Collect(absl::Now(), off, errors);
  EXPECT_FALSE(collector.Availability().ok());
  EXPECT_TRUE(off.table->info.empty());

  ASSERT_TRUE(StartLldpd(host_, "h0", "host-1"));
  WaitForNeighbor(collector, "leaf-1");
  EXPECT_TRUE(collector.Availability().ok());
  for (const std::string& line : logs) {
    EXPECT_EQ(line.find("changed"), std::string::npos) << "an lldpd restart is no recabling: " << line;
  }
}

// The agent process in the host namespace: its log names h0's neighbour, then the new one.
TEST_F(LldpNetnsTest, AgentProcessLogsNeighbourAndRecabling) {
  const std::string agent = testing::BinaryPath("daemon/ringside-agent");
  testing::Process p({"/usr/sbin/ip", "netns", "exec", host_, agent, "--listen=", "--interval=200ms",
                      "--lldp-socket=" + Socket(host_), "--lldp-interval=500ms",
                      "--ethtool-source=off", "--nvml-library=", "--link-events=false",
                      "--collectives-socket=", "--node-name=host-1"},
                     dir_.path());
  ASSERT_TRUE(p.WaitForStderr("lldp: h0 neighbour leaf-1 port swp1", absl::Seconds(20)))
      << p.Stderr();
  ASSERT_TRUE(lab_->Uncable(host_, "h0").ok());
  Cable(sw2_, "swp3", "192.0.2.2/24");
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  bool seen = false;
  while (!seen && absl::Now() < deadline) {
    const std::string err = p.Stderr();
    seen = err.find("h0 neighbour changed from leaf-1 port swp1") != std::string::npos ||
           (err.find("h0 lost its neighbour leaf-1") != std::string::npos &&
            err.find("h0 neighbour leaf-2 port swp3") != std::string::npos);
    if (!seen) absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(seen) << p.Stderr();
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(absl::Seconds(10)), 0) << p.Stderr();
}

// The agent's only privilege for LLDP is the socket's group: as user nobody, without capabilities,
// it is refused until it is also in group _lldpd; then it reads the neighbour.
TEST_F(LldpNetnsTest, AgentNeedsOnlyTheLldpdGroup) {
  collectors::LldpOptions o;
  o.client.socket_path = Socket(host_);
  o.refresh_interval = absl::ZeroDuration();
  collectors::LldpCollector collector(o);
  WaitForNeighbor(collector, "leaf-1");  // lldpd has learnt it

  const std::string agent = testing::BinaryPath("daemon/ringside-agent");
  auto run_as_nobody = [&](const std::string& groups) {
    std::vector<std::string> argv{"/usr/sbin/ip", "netns", "exec", host_, "/usr/bin/setpriv",
                                  "--reuid=nobody", "--regid=nogroup"};
    if (groups.empty()) {
      argv.push_back("--clear-groups");
    } else {
      argv.push_back("--groups=" + groups);
    }
    for (const char* a : {"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"}) {
      argv.push_back(a);
    }
    for (const std::string& a :
         {agent, std::string("--once"), "--lldp-socket=" + Socket(host_),
          std::string("--ethtool-source=off"), std::string("--nvml-library="),
          std::string("--collectives-socket="), std::string("--node-name=host-1")}) {
      argv.push_back(a);
    }
    return testing::Run(argv, "", absl::Seconds(30));
  };
  testing::RunResult refused = run_as_nobody("");
  EXPECT_EQ(refused.exit_code, 0) << refused.err;
  EXPECT_NE(refused.err.find("lldp: PERMISSION_DENIED"), std::string::npos) << refused.err;
  testing::RunResult allowed = run_as_nobody("_lldpd");
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_NE(allowed.err.find("lldp: h0 neighbour leaf-1 port swp1"), std::string::npos)
      << allowed.err;
}

}  // namespace
}  // namespace ringside
