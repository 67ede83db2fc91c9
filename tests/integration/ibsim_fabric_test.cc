// The fabric scan against a simulated InfiniBand fabric: Debian's ibsim runs the two-switch,
// four-HCA fabric of shared/fixtures/tool-outputs/ibsim-net/ibsim_net.2sw2path4hca.txt, OpenSM
// (under ibsim-run) assigns LIDs and routes, and every MAD tool — ringside-fabric-scan,
// perfquery, smpquery, ibnetdiscover — runs under ibsim-run, which LD_PRELOADs libumad2sim so
// that libibumad talks to ibsim instead of /dev/infiniband. Counters are set and links taken
// down and up through ibsim's console (its stdin).
//
// Isolation: ibsim and its clients meet on abstract unix sockets named after IBSIM_SOCKNAME,
// which each test sets to a name of its own (nothing on disk; gone with the processes).
// libumad2sim writes a fake sysfs tree into ./sys-<pid> of each client, so every process runs in
// the test's temporary folder, which is removed at the end. Every wait is bounded; every process
// is killed in TearDown.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/testing/perfquery_text.h"
#include "tests/testing/process.h"
#include "tests/testing/temp_dir.h"

namespace ringside {
namespace {

constexpr char kIbsim[] = "/usr/bin/ibsim";
constexpr char kIbsimRun[] = "/usr/bin/ibsim-run";
constexpr char kUmad2sim[] = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

// A child process in a given folder with extra environment, stdout/stderr to files, and
// optionally a pipe on stdin (ibsim's console). In a process group of its own; killed on
// destruction.
class Child {
 public:
  Child(std::vector<std::string> argv, const std::string& dir, const std::string& name,
        const std::vector<std::pair<std::string, std::string>>& env, bool stdin_pipe)
      : out_path_(absl::StrCat(dir, "/", name, ".out")),
        err_path_(absl::StrCat(dir, "/", name, ".err")) {
    int fds[2] = {-1, -1};
    if (stdin_pipe && ::pipe2(fds, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
      if (::chdir(dir.c_str()) != 0) ::_exit(126);
      int in = stdin_pipe ? fds[0] : ::open("/dev/null", O_RDONLY);
      int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(in, 0);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::unsetenv("LD_PRELOAD");  // ibsim-run sets it (and mangles one already there)
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
      ::_exit(127);
    }
    if (stdin_pipe) {
      ::close(fds[0]);
      stdin_ = fds[1];
    }
  }
  ~Child() {
    Stop(absl::ZeroDuration());
    if (stdin_ >= 0) ::close(stdin_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool started() const { return pid_ > 0; }
  bool Send(absl::string_view text) {
    if (stdin_ < 0) return false;
    while (!text.empty()) {
      ssize_t n = ::write(stdin_, text.data(), text.size());
      if (n <= 0) return false;
      text.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Exit code, 128+signal, or -1 if still running after `timeout`.
  int Wait(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!exited_ && pid_ > 0) {
      if (::waitpid(pid_, &status_, WNOHANG) == pid_) {
        exited_ = true;
        break;
      }
      if (absl::Now() >= deadline) return -1;
      absl::SleepFor(absl::Milliseconds(5));
    }
    if (WIFEXITED(status_)) return WEXITSTATUS(status_);
    if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
    return -1;
  }
  bool Running() { return pid_ > 0 && Wait(absl::ZeroDuration()) == -1; }
  // SIGTERM to the group, then SIGKILL after `grace`. Returns how it ended.
  int Stop(absl::Duration grace) {
    if (pid_ <= 0 || exited_) return Wait(absl::ZeroDuration());
    ::kill(-pid_, SIGTERM);
    int rc = Wait(grace);
    if (rc == -1) {
      ::kill(-pid_, SIGKILL);
      rc = Wait(absl::Seconds(5));
    }
    return rc;
  }
  std::string Stdout() const { return testing::ReadFileOrEmpty(out_path_); }
  std::string Stderr() const { return testing::ReadFileOrEmpty(err_path_); }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  bool exited_ = false;
  int status_ = 0;
  std::string out_path_;
  std::string err_path_;
};

// Waits until `pred` holds, polling; false after `timeout`.
template <typename Pred>
bool WaitUntil(Pred pred, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return pred();
}

size_t Count(absl::string_view text, absl::string_view needle) {
  if (needle.empty()) return 0;
  size_t n = 0;
  for (size_t at = text.find(needle); at != absl::string_view::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// One "value ..." line of ringside-fabric-scan's text output.
struct ScanValue {
  std::string status;
  uint64_t raw = 0;
  int width = -1;
  std::string unit;
};

std::map<std::string, std::string> KeyValues(absl::string_view line) {
  std::map<std::string, std::string> kv;
  for (absl::string_view w : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    const size_t eq = w.find('=');
    if (eq != absl::string_view::npos)
      kv[std::string(w.substr(0, eq))] = std::string(w.substr(eq + 1));
  }
  return kv;
}

// The values of (device, port) in the *last* scan of `text`, by counter.
std::map<std::string, ScanValue> ScanValues(absl::string_view text, const std::string& device,
                                            const std::string& port) {
  std::map<std::string, ScanValue> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "scan ")) out.clear();
    if (!absl::StartsWith(line, "value ")) continue;
    auto kv = KeyValues(line);
    if (kv["device"] != device || kv["port"] != port) continue;
    ScanValue v;
    v.status = kv["status"];
    EXPECT_TRUE(absl::SimpleAtoi(kv["raw"], &v.raw)) << line;
    EXPECT_TRUE(absl::SimpleAtoi(kv["width"], &v.width)) << line;
    v.unit = kv["unit"];
    out[kv["counter"]] = v;
  }
  return out;
}

struct ScanEvent {
  std::string device, port, from, to;
};
std::vector<ScanEvent> ScanEvents(absl::string_view text) {
  std::vector<ScanEvent> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, "event ")) continue;
    auto kv = KeyValues(line);
    out.push_back({kv["device"], kv["port"], kv["from"], kv["to"]});
  }
  return out;
}

// smpquery portinfo's LinkState / PhysLinkState as sysfs ids.
std::map<std::string, uint64_t> PortInfoStates(absl::string_view text) {
  static const std::map<std::string, uint64_t> kState = {
      {"Down", 1}, {"Initialize", 2}, {"Armed", 3}, {"Active", 4}};
  static const std::map<std::string, uint64_t> kPhys = {
      {"Sleep", 1},  {"Polling", 2},          {"Disabled", 3}, {"PortConfigurationTraining", 4},
      {"LinkUp", 5}, {"LinkErrorRecovery", 6}};
  std::map<std::string, uint64_t> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const std::string name(line.substr(0, colon));
    std::string value(absl::StripLeadingAsciiWhitespace(line.substr(colon + 1)));
    value.erase(0, value.find_first_not_of('.'));
    if (name == "LinkState" && kState.count(value)) out["state"] = kState.at(value);
    if (name == "PhysLinkState" && kPhys.count(value)) out["phys_state"] = kPhys.at(value);
  }
  return out;
}

// A node of ibnetdiscover's output: its LID and GUID.
struct FabricNode {
  uint32_t lid = 0;
  std::string guid;  // "0x" + 16 hex digits
};

// Finds `name` ("Switch2", "Hca2") in `ibnetdiscover` output. A switch's LID is on its own line
// ("# "Switch2" base port 0 lid 3 lmc 0"), a CA's on its port line ("# lid 4 lmc 0 ...").
FabricNode FindNode(absl::string_view text, absl::string_view name) {
  FabricNode n;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  const std::string tag = absl::StrCat("# \"", name, "\"");
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view l = lines[i];
    const size_t at = l.find(tag);
    if (at == absl::string_view::npos ||
        !(absl::StartsWith(l, "Switch") || absl::StartsWith(l, "Ca"))) {
      continue;
    }
    const size_t q = l.find("\"");  // "S-0000000000200001" / "H-..."
    if (q != absl::string_view::npos && l.size() > q + 19) {
      n.guid = absl::StrCat("0x", l.substr(q + 3, 16));
    }
    absl::string_view lid_line =
        absl::StartsWith(l, "Switch") ? l.substr(at) : (i + 1 < lines.size() ? lines[i + 1] : "");
    const size_t lid = lid_line.find("lid ");
    if (lid != absl::string_view::npos) {
      absl::string_view rest = lid_line.substr(lid + 4);
      (void)absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &n.lid);
    }
    break;
  }
  return n;
}

// Starts ibsim on a net file and OpenSM as its SM; subclasses say which fabric and where the
// tools attach (SIM_HOST; empty: the first node of the file).
class IbsimTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ::signal(SIGPIPE, SIG_IGN); }
  virtual std::string NetFile() const = 0;
  virtual std::string SimHost() const { return ""; }

  void SetUp() override {
    for (const char* f : {kIbsim, kIbsimRun, kUmad2sim}) {
      if (::access(f, R_OK) != 0) {
        GTEST_SKIP() << f << " is missing (Debian packages ibsim-utils, libumad2sim0)";
      }
    }
    for (const char* tool : {"/usr/sbin/opensm", "/usr/sbin/perfquery", "/usr/sbin/smpquery",
                             "/usr/sbin/ibnetdiscover"}) {
      if (::access(tool, X_OK) != 0)
        GTEST_SKIP() << tool << " is missing (opensm, infiniband-diags)";
    }
    scan_tool_ = testing::BinaryPath("collectors/ringside-fabric-scan");
    ASSERT_EQ(::access(scan_tool_.c_str(), X_OK), 0) << scan_tool_;
    static int instance = 0;
    env_ = {{"IBSIM_SOCKNAME", absl::StrCat("ringside-", getpid(), "-", instance++)},
            {"OSM_TMP_DIR", tmp_.path()},
            {"OSM_CACHE_DIR", tmp_.path()}};
    if (!SimHost().empty()) env_.emplace_back("SIM_HOST", SimHost());

    ibsim_ = std::make_unique<Child>(std::vector<std::string>{kIbsim, "-s", NetFile()}, tmp_.path(),
                                     "ibsim", env_, /*stdin_pipe=*/true);
    ASSERT_TRUE(ibsim_->started());
    if (!WaitUntil([&] { return absl::StrContains(ibsim_->Stdout(), "sim>"); },
                   absl::Seconds(10))) {
      GTEST_SKIP() << "ibsim did not start: " << ibsim_->Stdout() << ibsim_->Stderr();
    }
    // OpenSM as the SM of the simulated fabric; no periodic sweeps, so the only MADs after
    // "SUBNET UP" are the ones a test sends (and the SM's answer to a trap after a link change).
    // Its log is buffered unless told to flush each line, and "SUBNET UP" is what we wait for.
    const std::string osm_log = tmp_.path() + "/osm.log";
    const std::string osm_conf = tmp_.path() + "/opensm.conf";
    {
      std::ofstream conf(osm_conf);
      conf << "force_log_flush TRUE\n";
    }
    opensm_ = std::make_unique<Child>(
        std::vector<std::string>{kIbsimRun, "opensm", "-F", osm_conf, "-s", "0", "-f", osm_log},
        tmp_.path(), "opensm", env_, false);
    ASSERT_TRUE(
        WaitUntil([&] { return absl::StrContains(testing::ReadFileOrEmpty(osm_log), "SUBNET UP"); },
                  absl::Seconds(30)))
        << "OpenSM did not bring the subnet up:\n"
        << opensm_->Stdout() << opensm_->Stderr() << testing::ReadFileOrEmpty(osm_log);
  }

  void TearDown() override {
    // The scanner and the SM first (clients), then the simulator.
    scanner_.reset();
    if (opensm_) opensm_->Stop(absl::Seconds(5));
    if (ibsim_) {
      ibsim_->Send("Quit\n");
      if (ibsim_->Wait(absl::Seconds(2)) == -1) ibsim_->Stop(absl::Seconds(2));
    }
    opensm_.reset();
    ibsim_.reset();
  }

  // Runs a MAD tool under ibsim-run in the test's folder; bounded.
  testing::RunResult Sim(std::vector<std::string> argv,
                         absl::Duration timeout = absl::Seconds(20)) {
    argv.insert(argv.begin(), kIbsimRun);
    static int n = 0;
    Child c(std::move(argv), tmp_.path(), absl::StrCat("run", n++), env_, false);
    testing::RunResult r;
    r.exit_code = c.Wait(timeout);
    if (r.exit_code == -1) c.Stop(absl::Seconds(1));
    r.out = c.Stdout();
    r.err = c.Stderr();
    return r;
  }

  testing::RunResult Scan(std::vector<std::string> args) {
    args.insert(args.begin(), {scan_tool_, "--timeout-ms=200", "--retries=1"});
    return Sim(std::move(args));
  }

  // Sends console commands and waits until ibsim has confirmed `confirmations` more of them
  // (PerformanceSet answers "... has been set to N").
  void Console(const std::string& commands, absl::string_view confirmation = "",
               size_t confirmations = 0) {
    const size_t before = Count(ibsim_->Stdout(), confirmation);
    ASSERT_TRUE(ibsim_->Send(commands));
    if (confirmations == 0) return;
    ASSERT_TRUE(
        WaitUntil([&] { return Count(ibsim_->Stdout(), confirmation) >= before + confirmations; },
                  absl::Seconds(10)))
        << ibsim_->Stdout();
  }

  testing::TempDir tmp_;
  std::vector<std::pair<std::string, std::string>> env_;
  std::string scan_tool_;
  std::unique_ptr<Child> ibsim_;
  std::unique_ptr<Child> opensm_;
  std::unique_ptr<Child> scanner_;
};

// The two-switch, four-HCA example fabric of ibsim; the tools attach to Switch1 (the SM's node).
class IbsimFabricTest : public IbsimTest {
 protected:
  std::string NetFile() const override {
    return testing::SharedDir() + "/fixtures/tool-outputs/ibsim-net/ibsim_net.2sw2path4hca.txt";
  }
  void SetUp() override {
    IbsimTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const testing::RunResult disc = Sim({"ibnetdiscover"});
    ASSERT_EQ(disc.exit_code, 0) << disc.err;
    switch2_ = FindNode(disc.out, "Switch2");
    hca2_ = FindNode(disc.out, "Hca2");
    ASSERT_GT(switch2_.lid, 0u) << disc.out;
    ASSERT_GT(hca2_.lid, 0u) << disc.out;
    ASSERT_EQ(switch2_.guid.size(), 18u) << disc.out;
  }

  FabricNode switch2_;
  FabricNode hca2_;
};

// The real 8-switch, 144-CA fat tree the generated-ibsim fixtures were made from
// (ibnetdiscover/loginoff_sx6036_fdr10-qdr_fat-tree_2014.txt), attached where they were: the CA
// 'stage1 mlx4_0' (LID 57), which is also the SM.
class IbsimRealTopologyTest : public IbsimTest {
 protected:
  std::string NetFile() const override {
    return testing::SharedDir() +
           "/fixtures/tool-outputs/ibnetdiscover/loginoff_sx6036_fdr10-qdr_fat-tree_2014.txt";
  }
  std::string SimHost() const override { return "H-24be05ffff98aba0"; }
};

// Counters of Switch2 port 1 (the switch side of the Switch2–Hca2 link) set through the ibsim
// console; the scan reports what `perfquery -x` and `perfquery` print for that LID and port,
// field by field, and the state `smpquery portinfo` prints. Port 1 carries none of the MADs
// from the SM's node (Switch1) to Switch2, so its counters hold still while the tools run; the
// test checks that by running perfquery before and after the scans.
TEST_F(IbsimFabricTest, SwitchPortScanEqualsPerfquery) {
  const std::vector<std::pair<std::string, uint64_t>> injected = {
      {"PortCounters.SymbolErrorCounter", 77},
      {"PortCounters.LinkErrorRecoveryCounter", 3},
      {"PortCounters.LinkDownedCounter", 2},
      {"PortCounters.PortRcvErrors", 17},
      {"PortCounters.PortRcvRemotePhysicalErrors", 5},
      {"PortCounters.PortRcvSwitchRelayErrors", 2461},
      {"PortCounters.PortXmitDiscards", 1042},
      {"PortCounters.PortXmitConstraintErrors", 7},
      {"PortCounters.PortRcvConstraintErrors", 9},
      {"PortCounters.LocalLinkIntegrityErrors", 4},
      {"PortCounters.ExcessiveBufferOverrunErrors", 3},
      {"PortCounters.VL15Dropped", 6},
      {"PortCounters.PortXmitWait", 4294967295},
      {"PortCounters.PortXmitData", 123456789},
      {"PortCountersExtended.PortXmitData", 178791657177235},
      {"PortCountersExtended.PortRcvData", 178762341961629},
      {"PortCountersExtended.PortXmitPkts", 393094651266},
      {"PortCountersExtended.PortRcvPkts", 387654829341},
      {"PortCountersExtended.PortUnicastXmitPkts", 1234567},
      {"PortCountersExtended.PortUnicastRcvPkts", 7654321},
  };
  std::string commands;
  for (const auto& [field, value] : injected) {
    absl::StrAppend(&commands, "PerformanceSet \"Switch2\"[1] ", field, "=", value, "\n");
  }
  Console(commands, "has been set to", injected.size());

  const std::string lid = absl::StrCat(switch2_.lid);
  const std::string target = absl::StrCat(lid, ":1");
  testing::RunResult pq, pqx, scan, scan_basic, portinfo;
  bool still = false;
  for (int attempt = 0; attempt < 3 && !still; ++attempt) {
    pq = Sim({"perfquery", lid, "1"});
    pqx = Sim({"perfquery", "-x", lid, "1"});
    scan = Scan({target});
    scan_basic = Scan({"--basic", target});
    portinfo = Sim({"smpquery", "portinfo", lid, "1"});
    const testing::RunResult pq2 = Sim({"perfquery", lid, "1"});
    const testing::RunResult pqx2 = Sim({"perfquery", "-x", lid, "1"});
    still = pq.out == pq2.out && pqx.out == pqx2.out;
  }
  ASSERT_TRUE(still) << "the port's counters kept moving while the tools ran";
  ASSERT_EQ(pq.exit_code, 0) << pq.err;
  ASSERT_EQ(pqx.exit_code, 0) << pqx.err;
  ASSERT_EQ(scan.exit_code, 0) << scan.out << scan.err;
  ASSERT_EQ(scan_basic.exit_code, 0) << scan_basic.out << scan_basic.err;

  const auto values = ScanValues(scan.out, switch2_.guid, "1");
  const auto basic_values = ScanValues(scan_basic.out, switch2_.guid, "1");
  const auto blocks = testing::ParsePerfquery(pq.out);
  const auto xblocks = testing::ParsePerfquery(pqx.out);
  ASSERT_EQ(blocks.size(), 1u) << pq.out;
  ASSERT_EQ(xblocks.size(), 1u) << pqx.out;
  EXPECT_EQ(blocks[0].lid, switch2_.lid);
  EXPECT_EQ(blocks[0].port, 1u);

  // perfquery -x: every field, against the (extended) scan.
  std::map<std::string, bool> covered;  // scan counters checked
  int checked = 0;
  for (const auto& [name, value] : xblocks[0].fields) {
    const std::string counter(testing::ScanCounterOf(name));
    if (counter.empty()) continue;
    ASSERT_TRUE(values.count(counter)) << counter << "\n" << scan.out;
    EXPECT_EQ(values.at(counter).status, "ok") << counter;
    EXPECT_EQ(values.at(counter).raw, value) << name << " (perfquery -x) vs " << counter;
    EXPECT_EQ(values.at(counter).width, 64) << counter;
    covered[counter] = true;
    ++checked;
  }
  EXPECT_EQ(checked, 8);
  // perfquery: the error counters and PortXmitWait against both scans; its 32-bit data and
  // packet counters against the --basic scan.
  checked = 0;
  for (const auto& [name, value] : blocks[0].fields) {
    const std::string counter(testing::ScanCounterOf(name));
    if (counter.empty()) continue;
    const bool data = xblocks[0].fields.count(name) > 0;  // also in PortCountersExtended
    ASSERT_TRUE(basic_values.count(counter)) << counter << "\n" << scan_basic.out;
    EXPECT_EQ(basic_values.at(counter).raw, value) << name << " (perfquery) vs --basic " << counter;
    if (!data) {
      ASSERT_TRUE(values.count(counter)) << counter;
      EXPECT_EQ(values.at(counter).raw, value) << name << " (perfquery) vs " << counter;
      covered[counter] = true;
    } else {
      EXPECT_EQ(basic_values.at(counter).width, 32) << counter;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 17);
  // PortInfo, against smpquery.
  const auto states = PortInfoStates(portinfo.out);
  ASSERT_EQ(states.size(), 2u) << portinfo.out;
  for (const auto& [counter, id] : states) {
    ASSERT_TRUE(values.count(counter)) << counter;
    EXPECT_EQ(values.at(counter).raw, id) << counter;
    EXPECT_EQ(values.at(counter).unit, "enum") << counter;
    covered[counter] = true;
  }
  EXPECT_EQ(values.at("state").raw, 4u);       // ACTIVE
  EXPECT_EQ(values.at("phys_state").raw, 5u);  // LinkUp
  // Nothing in the scan that perfquery or smpquery did not confirm.
  EXPECT_EQ(covered.size(), values.size());
  for (const auto& [counter, v] : values) EXPECT_TRUE(covered.count(counter)) << counter;

  // The injected values are what was compared (so the comparison was not of zeros).
  EXPECT_EQ(values.at("symbol_error").raw, 77u);
  EXPECT_EQ(values.at("port_rcv_switch_relay_errors").raw, 2461u);
  EXPECT_EQ(values.at("local_link_integrity_errors").raw, 4u);
  EXPECT_EQ(values.at("excessive_buffer_overrun_errors").raw, 3u);
  EXPECT_EQ(values.at("port_xmit_wait").raw, 4294967295u);
  EXPECT_EQ(values.at("port_xmit_data").raw, 178791657177235u);
  EXPECT_EQ(values.at("port_xmit_data").unit, "4-byte-words");
  EXPECT_EQ(values.at("unicast_rcv_packets").raw, 7654321u);
  EXPECT_EQ(basic_values.at("port_xmit_data").raw, 123456789u);
  // The node line names the switch.
  EXPECT_TRUE(absl::StrContains(
      scan.out, absl::StrCat("node device=", switch2_.guid, " counters=extended lid=", lid,
                             " node_desc=\"Switch2\" node_type=switch num_ports=8")))
      << scan.out;
}

// Both ends of the Switch2–Hca2 link: the HCA's error counters set through the console equal
// perfquery's. (Its data counters move with every MAD addressed to it, so they are checked to
// lie between two perfquery readings taken around the scan.)
TEST_F(IbsimFabricTest, BothEndsOfALink) {
  Console(
      "PerformanceSet \"Hca2\"[1] PortCounters.PortRcvErrors=17\n"
      "PerformanceSet \"Hca2\"[1] PortCounters.SymbolErrorCounter=250\n",
      "has been set to", 2);
  const std::string hca_lid = absl::StrCat(hca2_.lid);
  const testing::RunResult before = Sim({"perfquery", "-x", hca_lid, "1"});
  const testing::RunResult errors = Sim({"perfquery", hca_lid, "1"});
  const testing::RunResult scan =
      Scan({absl::StrCat(switch2_.lid, ":1;", hca_lid)});  // no ports: the CA's own port
  const testing::RunResult after = Sim({"perfquery", "-x", hca_lid, "1"});
  ASSERT_EQ(scan.exit_code, 0) << scan.out << scan.err;

  const auto hca = ScanValues(scan.out, hca2_.guid, "1");
  const auto sw = ScanValues(scan.out, switch2_.guid, "1");
  ASSERT_FALSE(hca.empty()) << scan.out;
  ASSERT_FALSE(sw.empty()) << scan.out;
  EXPECT_EQ(hca.at("state").raw, 4u);
  EXPECT_EQ(sw.at("state").raw, 4u);
  const auto eb = testing::ParsePerfquery(errors.out);
  ASSERT_EQ(eb.size(), 1u) << errors.out;
  for (const char* name : {"SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter",
                           "PortRcvErrors", "PortXmitDiscards", "VL15Dropped"}) {
    const std::string counter(testing::ScanCounterOf(name));
    EXPECT_EQ(hca.at(counter).raw, eb[0].fields.at(name)) << name;
  }
  EXPECT_EQ(hca.at("port_rcv_errors").raw, 17u);
  EXPECT_EQ(hca.at("symbol_error").raw, 250u);
  const auto b = testing::ParsePerfquery(before.out);
  const auto a = testing::ParsePerfquery(after.out);
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(a.size(), 1u);
  for (const char* name : {"PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts"}) {
    const std::string counter(testing::ScanCounterOf(name));
    EXPECT_GE(hca.at(counter).raw, b[0].fields.at(name)) << name;
    EXPECT_LE(hca.at(counter).raw, a[0].fields.at(name)) << name;
  }
  EXPECT_TRUE(absl::StrContains(scan.out, "node_desc=\"Hca2\" node_type=ca num_ports=2"))
      << scan.out;
}

// A link taken down and up in the ibsim console is two transitions of the switch port, down then
// up, seen by a scan that repeats every 100 ms. The HCA behind the link cannot be reached while
// it is down: its queries fail (errors), and it reports no transition of its own.
TEST_F(IbsimFabricTest, SwitchPortFlapIsTwoTransitions) {
  const std::string targets = absl::StrCat(switch2_.lid, ":1;", hca2_.lid);
  scanner_ = std::make_unique<Child>(
      std::vector<std::string>{kIbsimRun, scan_tool_, "--timeout-ms=50", "--retries=0",
                               "--scans=3000", "--interval-ms=100", targets},
      tmp_.path(), "scanner", env_, false);
  auto ends = [&] { return Count(scanner_->Stdout(), "\nend "); };
  ASSERT_TRUE(WaitUntil([&] { return ends() >= 2; }, absl::Seconds(20)))
      << scanner_->Stdout() << scanner_->Stderr();

  const std::string state_line =
      absl::StrCat("value device=", switch2_.guid, " port=1 counter=state status=ok raw=");
  auto state_seen_after = [&](size_t offset, int state) {
    const std::string out = scanner_->Stdout();
    return out.size() > offset &&
           absl::StrContains(out.substr(offset), absl::StrCat(state_line, state, " "));
  };

  size_t offset = scanner_->Stdout().size();
  Console("Unlink \"Switch2\"[1]\n");
  ASSERT_TRUE(WaitUntil([&] { return state_seen_after(offset, 1); }, absl::Seconds(20)))
      << scanner_->Stdout().substr(offset);
  size_t scans = ends();
  ASSERT_TRUE(WaitUntil([&] { return ends() >= scans + 2; }, absl::Seconds(20)));

  offset = scanner_->Stdout().size();
  Console("ReLink \"Switch2\"[1]\n");
  ASSERT_TRUE(WaitUntil([&] { return state_seen_after(offset, 4); }, absl::Seconds(20)))
      << scanner_->Stdout().substr(offset);
  scans = ends();
  ASSERT_TRUE(WaitUntil([&] { return ends() >= scans + 2; }, absl::Seconds(20)));

  const int rc = scanner_->Stop(absl::Seconds(5));
  EXPECT_TRUE(rc == 0 || rc == 1) << rc;  // ended by SIGTERM at a scan boundary
  const std::string out = scanner_->Stdout();

  std::vector<ScanEvent> port_events;
  for (const ScanEvent& e : ScanEvents(out)) {
    EXPECT_EQ(e.device, switch2_.guid) << "only the switch port saw the flap";
    if (e.device == switch2_.guid && e.port == "1") port_events.push_back(e);
  }
  ASSERT_EQ(port_events.size(), 2u) << out;
  EXPECT_EQ(port_events[0].from, "up");
  EXPECT_EQ(port_events[0].to, "down");
  EXPECT_EQ(port_events[1].from, "down");
  EXPECT_EQ(port_events[1].to, "up");
  EXPECT_TRUE(absl::StrContains(out, "detail=\"PortInfo ACTIVE/LinkUp -> DOWN/Polling\"")) << out;
  // While the link was down, the HCA behind it did not answer.
  EXPECT_TRUE(absl::StrContains(out, absl::StrCat("error \"DEADLINE_EXCEEDED: ", hca2_.guid)))
      << out;
}

// A LID nobody has: the scan says so and exits 1, as perfquery fails on it.
TEST_F(IbsimFabricTest, UnknownLidIsAnError) {
  const testing::RunResult scan = Scan({"999"});
  EXPECT_EQ(scan.exit_code, 1) << scan.out << scan.err;
  EXPECT_TRUE(absl::StrContains(
      scan.out,
      "error \"DEADLINE_EXCEEDED: discovery of LID 999: SMP Get attr 0x11 mod 0 to "
      "LID 999: no response\""))
      << scan.out;
  EXPECT_FALSE(absl::StrContains(scan.out, "value ")) << scan.out;
  const testing::RunResult pq = Sim({"perfquery", "-t", "200", "999", "1"});
  EXPECT_NE(pq.exit_code, 0);
}

// The counter injections the generated-ibsim fixtures were made with, replayed through the console
// on the same fabric: the scan reads the error counters those stored perfquery outputs show (a
// switch port with SymbolErrorCounter 65535, LocalLinkIntegrityErrors 4,
// ExcessiveBufferOverrunErrors 3; an HCA port with PortRcvErrors 17), and equals, field by field,
// what perfquery prints now for the switch port. Data counters are not compared with the stored
// files: they count the MADs of whatever ran before.
TEST_F(IbsimRealTopologyTest, ScanMatchesTheStoredPerfqueryOutputs) {
  const std::string dir = testing::SharedDir() + "/fixtures/tool-outputs/generated-ibsim/";
  std::string commands;
  size_t injections = 0;
  for (absl::string_view line : absl::StrSplit(
           testing::ReadFileOrEmpty(dir + "ibsim_PerformanceSet_injections.txt"), '\n')) {
    if (!absl::StartsWith(line, "PerformanceSet")) continue;
    absl::StrAppend(&commands, line, "\n");
    ++injections;
  }
  ASSERT_EQ(injections, 18u);
  Console(commands, "has been set to", injections);

  const std::string sw_guid = "0xf4521403007eaa70";   // LID 18, 'MF0;ib7:SX6036/U1'
  const std::string hca_guid = "0x24be05ffff980030";  // LID 105, 'stage114 mlx4_0'
  testing::RunResult pq, scan, pq2;
  for (int attempt = 0; attempt < 3; ++attempt) {
    pq = Sim({"perfquery", "18", "9"});
    scan = Scan({"18;105:1"});  // every port of the switch
    pq2 = Sim({"perfquery", "18", "9"});
    if (pq.out == pq2.out) break;
  }
  ASSERT_EQ(pq.out, pq2.out) << "the port's counters kept moving while the tools ran";
  ASSERT_EQ(scan.exit_code, 0) << scan.out << scan.err;
  EXPECT_TRUE(absl::StrContains(
      scan.out, absl::StrCat("node device=", sw_guid,
                             " counters=extended lid=18 "
                             "node_desc=\"MF0;ib7:SX6036/U1\" node_type=switch num_ports=36")))
      << scan.out;
  EXPECT_TRUE(absl::StrContains(scan.out, absl::StrCat("node device=", hca_guid)));
  for (int port = 1; port <= 36; ++port) {
    EXPECT_FALSE(ScanValues(scan.out, sw_guid, absl::StrCat(port)).empty()) << port;
  }

  const auto sw = ScanValues(scan.out, sw_guid, "9");
  const auto hca = ScanValues(scan.out, hca_guid, "1");
  ASSERT_FALSE(sw.empty());
  ASSERT_FALSE(hca.empty());
  auto data_field = [](absl::string_view name) {
    return absl::StrContains(name, "Data") || absl::StrContains(name, "Pkts");
  };
  int checked = 0;
  for (const auto& [file, values] : {std::pair{"perfquery_lid18_p9_switch-errors.stdout.txt", &sw},
                                     std::pair{"perfquery_lid105_p1.stdout.txt", &hca}}) {
    const auto stored = testing::ParsePerfquery(testing::ReadFileOrEmpty(dir + file));
    ASSERT_EQ(stored.size(), 1u) << file;
    for (const auto& [name, value] : stored[0].fields) {
      const std::string counter(testing::ScanCounterOf(name));
      if (counter.empty() || data_field(name)) continue;
      ASSERT_TRUE(values->count(counter)) << counter;
      EXPECT_EQ(values->at(counter).raw, value) << file << " " << name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * 13);
  EXPECT_EQ(sw.at("symbol_error").raw, 65535u);  // saturated 16-bit counter
  EXPECT_EQ(hca.at("port_rcv_errors").raw, 17u);
  EXPECT_GE(hca.at("port_xmit_data").raw, 178791657177235u);  // injected 64-bit value

  // Now, every field of the switch port.
  const auto live = testing::ParsePerfquery(pq.out);
  ASSERT_EQ(live.size(), 1u);
  checked = 0;
  for (const auto& [name, value] : live[0].fields) {
    const std::string counter(testing::ScanCounterOf(name));
    if (counter.empty() || data_field(name)) continue;
    EXPECT_EQ(sw.at(counter).raw, value) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 13);
  const testing::RunResult pqx = Sim({"perfquery", "-x", "18", "9"});
  const testing::RunResult scan_x = Scan({"18:9"});
  const testing::RunResult pqx2 = Sim({"perfquery", "-x", "18", "9"});
  ASSERT_EQ(pqx.out, pqx2.out);
  const auto live_x = testing::ParsePerfquery(pqx.out);
  ASSERT_EQ(live_x.size(), 1u);
  const auto sw_x = ScanValues(scan_x.out, sw_guid, "9");
  for (const auto& [name, value] : live_x[0].fields) {
    const std::string counter(testing::ScanCounterOf(name));
    if (!counter.empty()) {
      EXPECT_EQ(sw_x.at(counter).raw, value) << name;
    }
  }
}

}  // namespace
}  // namespace ringside
