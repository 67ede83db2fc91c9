// The ethtool collector through the real SIOCETHTOOL ioctl, on a veth pair in a network namespace
// this test creates (and always deletes). What it reads must equal what `ethtool -S` prints for
// the same interfaces at the same moment.
//
// How the test gets into the namespace: a forked child joins it (setns), takes a private mount
// namespace and mounts a sysfs there (so <sysfs-root>/class/net lists the namespace's interfaces,
// like `ip netns exec` does for /sys), runs the collector and `ethtool -S`, and reports back over
// a pipe. The mount dies with the child; the parent only asserts. Traffic: a bounded number of raw
// frames from one veth end to the other, inside the namespace.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "collectors/ethtool/ethtool_collector.h"
#include "collectors/ethtool/ethtool_ioctl.h"
#include "collectors/ethtool/ethtool_text.h"
#include "collectors/ethtool/guarded_buffer.h"
#include "tests/testing/temp_dir.h"

namespace ringside::collectors {
namespace {

constexpr char kNsPrefix[] = "rs-ethtool-";
constexpr char kNetnsDir[] = "/var/run/netns";
constexpr char kIfA[] = "rsveth0a";
constexpr char kIfB[] = "rsveth0b";
constexpr int kFrames = 20;

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

// Runs a shell command, bounded in time, with stderr folded into the output.
CommandResult Sh(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen(absl::StrCat("timeout 30 ", command, " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Namespaces left behind by a run of this test that was killed (its pid is gone).
void DeleteStaleNamespaces() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(kNetnsDir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kNsPrefix, 0) != 0) continue;
    int pid = 0;
    if (!absl::SimpleAtoi(name.substr(sizeof(kNsPrefix) - 1), &pid) || pid <= 0) continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) Sh("ip netns del " + name);
  }
}

// In the child: everything it reports, one tab-separated record a line.
std::string ChildMain(const std::string& sysfs) {
  std::string out;
  auto fail = [&out](const std::string& what) {
    return absl::StrCat(out, "FAIL\t", what, ": ", std::strerror(errno), "\n");
  };

  // Bounded traffic from A to B: raw broadcast frames of a local experimental EtherType.
  const unsigned ifindex_a = ::if_nametoindex(kIfA);
  if (ifindex_a == 0) return fail("if_nametoindex");
  int s = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (s < 0) return fail("AF_PACKET socket");
  struct sockaddr_ll to;
  std::memset(&to, 0, sizeof(to));
  to.sll_family = AF_PACKET;
  to.sll_ifindex = static_cast<int>(ifindex_a);
  to.sll_halen = ETH_ALEN;
  std::memset(to.sll_addr, 0xff, ETH_ALEN);
  unsigned char frame[64] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x88, 0xb5};
  for (int i = 0; i < kFrames; ++i) {
    frame[14] = static_cast<unsigned char>(i);
    if (::sendto(s, frame, sizeof(frame), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)) < 0) {
      ::close(s);
      return fail("sendto");
    }
  }
  ::close(s);

  EthtoolOptions o;
  o.sysfs_root = sysfs;
  EthtoolCollector c(o);  // its socket is opened here, in the namespace
  auto value_of = [](const CollectorSnapshot& snap, const std::string& dev,
                     const std::string& counter) -> int64_t {
    for (size_t i = 0; i < snap.table->defs.size(); ++i) {
      const SeriesDef& d = snap.table->defs[i];
      if (d.device == dev && d.counter == counter && snap.values[i].status == ValueStatus::kOk) {
        return static_cast<int64_t>(snap.values[i].raw);
      }
    }
    return -1;
  };
  // B's receive queue is served by NAPI a moment after the sends: wait (bounded) for all frames.
  CollectorSnapshot first;
  CycleErrors ignored;
  for (int i = 0; i < 100; ++i) {
    c.Collect(absl::Now(), first, ignored);
    if (value_of(first, kIfB, "rx_queue_0_xdp_packets") >= kFrames) break;
    ::usleep(20'000);
  }

  // Collector, `ethtool -S`, collector: equal when nothing moved in between. Retried a few times
  // in case something did.
  for (int attempt = 0; attempt < 5; ++attempt) {
    CollectorSnapshot s1, s2;
    CycleErrors e1, e2;
    c.Collect(absl::Now(), s1, e1);
    CommandResult ta = Sh(absl::StrCat("ethtool -S ", kIfA));
    CommandResult tb = Sh(absl::StrCat("ethtool -S ", kIfB));
    c.Collect(absl::Now(), s2, e2);
    bool stable = s1.table == s2.table && s1.values.size() == s2.values.size();
    for (size_t i = 0; stable && i < s1.values.size(); ++i) {
      stable = s1.values[i].raw == s2.values[i].raw && s1.values[i].status == s2.values[i].status;
    }
    if (!stable && attempt < 4) continue;
    absl::StrAppend(&out, "STABLE\t", stable ? 1 : 0, "\n");
    absl::StrAppend(&out, "ERRORS\t", e1.count + e2.count, "\t",
                    e1.messages.empty() ? "" : e1.messages[0], "\n");
    for (size_t i = 0; i < s1.table->defs.size(); ++i) {
      const SeriesDef& d = s1.table->defs[i];
      absl::StrAppend(&out, "SERIES\t", d.device, "\t", d.counter, "\t",
                      static_cast<int>(s1.values[i].status), "\t", s1.values[i].raw, "\t",
                      static_cast<int>(d.unit), "\t", static_cast<int>(d.kind), "\n");
    }
    for (const InfoRecord& r : s1.table->info) {
      for (const auto& [k, v] : r.labels) {
        absl::StrAppend(&out, "CAP\t", r.source, "\t", r.device, "\t", k, "\t", v, "\n");
      }
    }
    for (const auto& [dev, text] : {std::pair{kIfA, &ta}, std::pair{kIfB, &tb}}) {
      absl::StrAppend(&out, "ETHTOOL_EXIT\t", dev, "\t", text->exit_code, "\n");
      for (absl::string_view line : absl::StrSplit(text->output, '\n')) {
        absl::StrAppend(&out, "ETHTOOL\t", dev, "\t", line, "\n");
      }
    }
    break;
  }

  // The real kernel and the count race: asking with a count that is not the current one.
  std::unique_ptr<EthtoolIoctl> io = NewEthtoolIoctl();
  absl::StatusOr<std::vector<std::string>> names = io->GetStringSet(kIfA);
  if (names.ok()) {
    absl::StatusOr<EthtoolStats> wrong = io->GetStats(kIfA, names->size() + 1);
    absl::StrAppend(&out, "RACE\t",
                    !wrong.ok() ? wrong.status().ToString()
                    : wrong->outcome == EthtoolStats::Outcome::kStringSetChanged ? "changed"
                                                                                 : "ok",
                    "\n");
  }
  absl::StrAppend(&out, "PAUSEPARAM\t", io->GetPauseParam(kIfA).status().ToString(), "\n");
  // The guard page against the real kernel: GSTATS with n_stats 0 (which every kernel, with or
  // without the count-race fix, answers with all its values) into a buffer with room for the
  // header only. The values must fault on the guard page (EFAULT), not land past the buffer.
  {
    GuardedBuffer guarded;
    unsigned char* buf = guarded.Get(ethtool_abi::kStatsDataOffset);
    ethtool_abi::StatsHeader h{ethtool_abi::kGetStats, 0};
    std::memcpy(buf, &h, sizeof(h));
    struct ifreq ifr;
    std::memset(&ifr, 0, sizeof(ifr));
    std::memcpy(ifr.ifr_name, kIfA, sizeof(kIfA));
    ifr.ifr_data = reinterpret_cast<char*>(buf);
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const int rc = ::ioctl(fd, ethtool_abi::kSiocEthtool, &ifr);
    const int err = errno;
    ::close(fd);
    std::memcpy(&h, buf, sizeof(h));
    absl::StrAppend(&out, "GUARD\t",
                    rc < 0 && err == EFAULT ? "efault" : rc == 0 ? "ok" : std::strerror(err),
                    "\t", h.n_stats, "\n");
  }
  std::string ifindex_b;
  if (FILE* f = std::fopen(absl::StrCat(sysfs, "/class/net/", kIfB, "/ifindex").c_str(), "r")) {
    char buf[32] = {};
    if (std::fgets(buf, sizeof(buf), f) != nullptr) ifindex_b = buf;
    std::fclose(f);
  }
  absl::StrAppend(&out, "IFINDEX_B\t", absl::StripAsciiWhitespace(ifindex_b), "\n");
  return out;
}

class EthtoolNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a network namespace";
    DeleteStaleNamespaces();
    ns_ = absl::StrCat(kNsPrefix, ::getpid());
    CommandResult add = Sh("ip netns add " + ns_);
    if (add.exit_code != 0) {
      GTEST_SKIP() << "cannot create a network namespace (`ip netns add` failed: " << add.output
                   << ")";
    }
    created_ = true;
    // No IPv6 in the namespace: no neighbour discovery traffic moving the counters.
    Sh(absl::StrCat("ip netns exec ", ns_,
                    " sh -c 'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6;"
                    " echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6'"));
    for (const std::string& cmd : {
             absl::StrCat("ip -n ", ns_, " link add ", kIfA, " type veth peer name ", kIfB),
             absl::StrCat("ip -n ", ns_, " link set ", kIfA, " up"),
             absl::StrCat("ip -n ", ns_, " link set ", kIfB, " up"),
             // veth counts per-queue packets only on its NAPI path: GRO on the receiver, and no
             // TSO on the sender so that its frames may take that path.
             absl::StrCat("ip netns exec ", ns_, " ethtool -K ", kIfA, " tso off"),
             absl::StrCat("ip netns exec ", ns_, " ethtool -K ", kIfB, " gro on"),
         }) {
      CommandResult r = Sh(cmd);
      ASSERT_EQ(r.exit_code, 0) << cmd << ": " << r.output;
    }
  }

  void TearDown() override {
    if (!created_) return;
    CommandResult r = Sh("ip netns del " + ns_);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_FALSE(std::filesystem::exists(absl::StrCat(kNetnsDir, "/", ns_)));
  }

  // Runs ChildMain in a child inside the namespace; its report, or a failure. Bounded in time.
  std::string RunInNamespace(absl::Duration timeout) {
    testing::TempDir sysfs;  // the child mounts a sysfs here, in its own mount namespace
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return "FAIL\tpipe";
    const std::string netns_path = absl::StrCat(kNetnsDir, "/", ns_);
    const pid_t pid = ::fork();
    if (pid < 0) return "FAIL\tfork";
    if (pid == 0) {
      ::close(fds[0]);
      std::string report;
      const int nsfd = ::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (nsfd < 0 || ::setns(nsfd, CLONE_NEWNET) != 0) {
        report = absl::StrCat("FAIL\tsetns: ", std::strerror(errno), "\n");
      } else if (::unshare(CLONE_NEWNS) != 0 ||
                 ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
                 ::mount("sysfs", sysfs.path().c_str(), "sysfs", 0, nullptr) != 0) {
        report = absl::StrCat("FAIL\tmount namespace and sysfs: ", std::strerror(errno), "\n");
      } else {
        report = ChildMain(sysfs.path());
      }
      size_t off = 0;
      while (off < report.size()) {
        ssize_t n = ::write(fds[1], report.data() + off, report.size() - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      ::_exit(0);  // no destructors, no gtest teardown in the child
    }
    ::close(fds[1]);
    std::string report;
    const absl::Time deadline = absl::Now() + timeout;
    bool timed_out = false;
    for (;;) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        timed_out = true;
        break;
      }
      struct pollfd p = {fds[0], POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) continue;
      char buf[8192];
      const ssize_t n = ::read(fds[0], buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      report.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    if (timed_out) ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (timed_out) return "FAIL\tthe child did not finish in time\n";
    return report;
  }

  std::string ns_;
  bool created_ = false;
};

struct Series {
  int status = -1;
  uint64_t value = 0;
  int unit = -1;
  int kind = -1;
};

TEST_F(EthtoolNetnsTest, VethThroughTheRealIoctlEqualsEthtool) {
  const std::string report = RunInNamespace(absl::Seconds(60));
  SCOPED_TRACE("report from the namespace:\n" + report);
  std::vector<std::string> failures;
  std::map<std::string, std::vector<std::string>> order;        // device → names, table order
  std::map<std::string, std::map<std::string, Series>> series;  // device → name → series
  std::map<std::string, std::map<std::string, std::string>> caps;
  std::map<std::string, std::string> ethtool_text;
  std::map<std::string, int> ethtool_exit;
  std::map<std::string, std::string> single;
  for (absl::string_view line : absl::StrSplit(report, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (f[0] == "FAIL") {
      failures.push_back(std::string(line));
    } else if (f[0] == "SERIES" && f.size() == 7) {
      Series s;
      ASSERT_TRUE(absl::SimpleAtoi(f[3], &s.status) && absl::SimpleAtoi(f[4], &s.value) &&
                  absl::SimpleAtoi(f[5], &s.unit) && absl::SimpleAtoi(f[6], &s.kind))
          << line;
      order[f[1]].push_back(f[2]);
      series[f[1]][f[2]] = s;
    } else if (f[0] == "CAP" && f.size() == 5 && f[1] == "ethtool_caps") {
      caps[f[2]][f[3]] = f[4];
    } else if (f[0] == "ETHTOOL" && f.size() >= 3) {
      absl::StrAppend(&ethtool_text[f[1]], absl::StrJoin(f.begin() + 2, f.end(), "\t"), "\n");
    } else if (f[0] == "ETHTOOL_EXIT" && f.size() == 3) {
      ASSERT_TRUE(absl::SimpleAtoi(f[2], &ethtool_exit[f[1]]));
    } else if (f.size() >= 2) {
      single[f[0]] = f[1];
    }
  }
  ASSERT_TRUE(failures.empty()) << failures[0];
  ASSERT_FALSE(series.empty()) << "no report from the namespace:\n" << report;

  EXPECT_EQ(single["STABLE"], "1") << "counters kept moving while compared";
  EXPECT_EQ(single["ERRORS"], "0") << report;

  // Only the namespace's interfaces: its loopback and the veth pair.
  std::vector<std::string> devices;
  for (const auto& [dev, labels] : caps) devices.push_back(dev);
  EXPECT_EQ(devices, (std::vector<std::string>{"lo", kIfA, kIfB}));

  for (const char* dev : {kIfA, kIfB}) {
    SCOPED_TRACE(dev);
    ASSERT_EQ(ethtool_exit[dev], 0) << ethtool_text[dev];
    EthtoolText t = ParseEthtoolText(ethtool_text[dev]);
    EXPECT_EQ(t.malformed, 0u) << t.first_malformed;
    ASSERT_FALSE(t.names.empty()) << ethtool_text[dev];
    // Same names in the same order, and the same values.
    EXPECT_EQ(order[dev], t.names);
    for (size_t i = 0; i < t.names.size(); ++i) {
      const Series& s = series[dev][t.names[i]];
      EXPECT_EQ(s.status, static_cast<int>(ValueStatus::kOk)) << t.names[i];
      EXPECT_EQ(s.value, t.values[i]) << t.names[i];
    }
    // veth has no pause counters and no pause configuration: said once, as capabilities.
    for (const std::string& n : t.names) EXPECT_EQ(n.find("pause"), std::string::npos) << n;
    EXPECT_EQ(caps[dev]["stats"], "supported");
    EXPECT_EQ(caps[dev]["pfc_priorities"], "none");
    EXPECT_EQ(caps[dev]["pfc_duration_priorities"], "none");
    EXPECT_EQ(caps[dev]["global_pause"], "false");
    EXPECT_EQ(caps[dev]["global_pause_duration"], "false");
    EXPECT_EQ(caps[dev]["pause_storm_events"], "false");
    EXPECT_EQ(caps[dev]["pause_config"], "unsupported");
    EXPECT_EQ(caps[dev]["n_stats"], std::to_string(t.names.size()));
  }
  // The frames sent from A arrived on B's queue 0; A's peer is B.
  EXPECT_EQ(series[kIfB]["rx_queue_0_xdp_packets"].value, static_cast<uint64_t>(kFrames));
  EXPECT_EQ(series[kIfB]["rx_queue_0_xdp_bytes"].unit, static_cast<int>(Unit::kBytes));
  EXPECT_EQ(std::to_string(series[kIfA]["peer_ifindex"].value), single["IFINDEX_B"]);
  EXPECT_EQ(series[kIfA]["peer_ifindex"].kind, static_cast<int>(SeriesKind::kGauge));
  // Loopback has no driver statistics: a capability, not an error, and no series.
  EXPECT_EQ(caps["lo"]["stats"], "unsupported");
  EXPECT_EQ(series.count("lo"), 0u);
  // The real kernel answers a stale count as "changed" (0 entries, or a different count).
  EXPECT_EQ(single["RACE"], "changed");
  // The kernel wrote the header (its count) and faulted on the guard page for the values.
  EXPECT_EQ(single["GUARD"], "efault") << report;
  std::vector<std::string> guard_line;
  for (absl::string_view line : absl::StrSplit(report, '\n')) {
    if (absl::StartsWith(line, "GUARD\t")) guard_line = absl::StrSplit(line, '\t');
  }
  ASSERT_EQ(guard_line.size(), 3u);
  EXPECT_EQ(guard_line[2], std::to_string(order[kIfA].size()));
  EXPECT_NE(single["PAUSEPARAM"].find("UNIMPLEMENTED"), std::string::npos) << single["PAUSEPARAM"];
}

}  // namespace
}  // namespace ringside::collectors
