// LLDP through real lldpd daemons: a "host" namespace and two "switch" namespaces this test
// creates (and always deletes), each running its own lldpd with its own control socket. The host's
// h0 is cabled (a veth pair) to leaf-1's swp1; the agent's LLDP collector, reading the host
// lldpd's socket, sees leaf-1 port swp1 with its management address. Recabling h0 to leaf-2's
// swp3 (the pair deleted and made again to the other namespace) replaces the record, logs the
// change and counts it. The agent process itself, run in the host namespace, logs the same
// neighbours. Skips when namespaces cannot be made or lldpd is not installed. Frames stay inside
// the namespaces.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "collectors/lldp/lldp_collector.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

using collectors::CollectorSnapshot;
using collectors::CycleErrors;
using collectors::InfoRecord;

constexpr char kLldpd[] = "/usr/sbin/lldpd";
constexpr char kLldpcli[] = "/usr/sbin/lldpcli";

int Sh(const std::string& cmd) {
  return testing::Run({"/bin/sh", "-c", cmd}, "", absl::Seconds(20)).exit_code;
}

class LldpNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kLldpd) || !std::filesystem::exists(kLldpcli)) {
      GTEST_SKIP() << "lldpd is not installed (apt-get install lldpd)";
    }
    // lldpcli is set-user-id _lldpd: it must be able to reach the sockets in the folder.
    std::filesystem::permissions(dir_.path(), std::filesystem::perms(0755));
    const std::string id = absl::StrCat(getpid());
    host_ = "rs-lh-" + id;
    sw1_ = "rs-ls1-" + id;
    sw2_ = "rs-ls2-" + id;
    for (const std::string* ns : {&host_, &sw1_, &sw2_}) {
      if (Sh("ip netns add " + *ns) != 0) GTEST_SKIP() << "cannot create a network namespace";
      made_.push_back(*ns);
      ASSERT_EQ(Sh(absl::StrCat("ip -n ", *ns, " link set lo up")), 0);
    }
    Cable(sw1_, "swp1", "192.0.2.1/24");
    ASSERT_TRUE(StartLldpd(host_, "h0", "host-1"));
    ASSERT_TRUE(StartLldpd(sw1_, "swp*", "leaf-1"));
    ASSERT_TRUE(StartLldpd(sw2_, "swp*", "leaf-2"));
  }

  void TearDown() override {
    for (auto& p : lldpd_) {
      p->Signal(SIGTERM);
      p->Wait(absl::Seconds(5));
    }
    lldpd_.clear();
    for (const std::string& ns : made_) Sh("ip netns del " + ns);
  }

  std::string Socket(const std::string& ns) const { return absl::StrCat(dir_.path(), "/", ns, ".sock"); }

  // h0 in the host namespace ↔ `port` in `sw`, both up; `addr` on the switch end (its LLDP
  // management address).
  void Cable(const std::string& sw, const std::string& port, const std::string& addr) {
    ASSERT_EQ(Sh(absl::StrCat("ip link add h0 netns ", host_, " type veth peer name ", port,
                              " netns ", sw)),
              0);
    ASSERT_EQ(Sh(absl::StrCat("ip -n ", sw, " addr add ", addr, " dev ", port, " && ip -n ", sw,
                              " link set ", port, " up && ip -n ", host_, " link set h0 up")),
              0);
  }

  // lldpd in `ns` on the interfaces matching `pattern`, its own socket, system name `name`,
  // one frame a second, the port id being the interface name (as switches send).
  bool StartLldpd(const std::string& ns, const std::string& pattern, const std::string& name) {
    const std::string sock = Socket(ns);
    lldpd_.push_back(std::make_unique<testing::Process>(
        std::vector<std::string>{"/usr/sbin/ip", "netns", "exec", ns, kLldpd, "-d", "-u", sock,
                                 "-I", pattern, "-S", "ringside test " + name},
        dir_.path()));
    for (int i = 0; i < 100 && !std::filesystem::exists(sock); ++i) {
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (!std::filesystem::exists(sock)) {
      ADD_FAILURE() << "lldpd in " << ns << " made no socket: " << lldpd_.back()->Stderr();
      return false;
    }
    for (const std::string& cmd : {absl::StrCat("configure system hostname ", name),
                                   std::string("configure lldp tx-interval 1"),
                                   std::string("configure lldp portidsubtype ifname")}) {
      std::vector<std::string> argv{kLldpcli, "-u", sock};
      for (absl::string_view word : absl::StrSplit(cmd, ' ')) argv.emplace_back(word);
      testing::RunResult r = testing::Run(argv, "", absl::Seconds(10));
      if (r.exit_code != 0) {
        ADD_FAILURE() << "lldpcli " << cmd << ": " << r.err;
        return false;
      }
    }
    return true;
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
  std::string host_, sw1_, sw2_;
  std::vector<std::string> made_;
  std::vector<std::unique_ptr<testing::Process>> lldpd_;
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
  ASSERT_EQ(Sh(absl::StrCat("ip -n ", host_, " link del h0")), 0);
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

  lldpd_[0]->Signal(SIGTERM);
  ASSERT_GE(lldpd_[0]->Wait(absl::Seconds(10)), 0);
  CollectorSnapshot off;
  CycleErrors errors;
  collector.Collect(absl::Now(), off, errors);
  EXPECT_FALSE(collector.Availability().ok());
  EXPECT_TRUE(off.table->info.empty());

  lldpd_.erase(lldpd_.begin());
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
  ASSERT_EQ(Sh(absl::StrCat("ip -n ", host_, " link del h0")), 0);
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
