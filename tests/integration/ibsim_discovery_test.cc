// Subnet discovery (ringside-fabric-scan --discover, collectors/ibmad/subnet_discovery.h) against
// a simulated InfiniBand fabric: Debian's ibsim runs the two-spine, four-leaf, sixteen-HCA fat
// tree of tests/data/ibsim/fat_tree_2spine_4leaf_16hca.net, OpenSM (under ibsim-run) assigns
// LIDs, and the discovery and `ibnetdiscover` both run under ibsim-run (libumad2sim). Links are
// taken down and up through ibsim's console.
//
// The harness (Child, the ibsim + OpenSM fixture) is the one of ibsim_fabric_test.cc; see there
// for the isolation: abstract sockets named per test, a temporary folder per test, every wait
// bounded, every process killed in TearDown.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <ostream>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "analysis/topology.h"
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
  size_t n = 0;
  for (size_t at = text.find(needle); at != absl::string_view::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// ---- the fabric as the net file describes it ----

struct End {
  std::string node;  // the node's id in the net file, which ibsim makes its NodeDescription
  int port = 0;
  bool operator<(const End& o) const { return std::tie(node, port) < std::tie(o.node, o.port); }
  bool operator==(const End& o) const { return node == o.node && port == o.port; }
};
using Link = std::pair<End, End>;  // ordered: first < second

std::ostream& operator<<(std::ostream& os, const End& e) {
  return os << '"' << e.node << "\"[" << e.port << "]";
}

Link MakeLink(End a, End b) { return b < a ? Link{b, a} : Link{a, b}; }

struct NetNode {
  std::string type;  // "switch" / "ca"
  int ports = 0;
  bool operator==(const NetNode& o) const { return type == o.type && ports == o.ports; }
};

std::ostream& operator<<(std::ostream& os, const NetNode& n) {
  return os << n.type << "/" << n.ports;
}

struct Fabric {
  std::map<std::string, NetNode> nodes;  // by description
  std::set<Link> links;
};

// ibsim's net format: `Switch|Hca N "id"` headers, then `[p] "peer"[q]` lines.
Fabric ParseNetFile(const std::string& text) {
  Fabric f;
  std::string cur;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> q = absl::StrSplit(line, '"');
    if (absl::StartsWith(line, "Switch") || absl::StartsWith(line, "Hca")) {
      cur = q.at(1);
      NetNode n;
      n.type = absl::StartsWith(line, "Switch") ? "switch" : "ca";
      EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(
                                       absl::string_view(q.at(0)).substr(n.type == "ca" ? 3 : 6)),
                                   &n.ports))
          << line;
      f.nodes[cur] = n;
    } else if (line[0] == '[') {
      int lp = 0, rp = 0;
      EXPECT_TRUE(absl::SimpleAtoi(absl::StripSuffix(absl::StripPrefix(q.at(0), "["), "]\t"), &lp))
          << line;
      absl::string_view r = q.at(2);
      EXPECT_TRUE(absl::SimpleAtoi(absl::StripSuffix(absl::StripPrefix(r, "["), "]"), &rp)) << line;
      f.links.insert(MakeLink({cur, lp}, {q.at(1), rp}));
    }
  }
  return f;
}

// ---- the graph as ringside-fabric-scan --discover prints it ----

struct Graph {
  struct Node {
    std::string type;
    int ports = 0;
    int lid = 0;
    std::string desc;
    std::map<int, std::string> port_state;  // port → PortInfo LinkState name
  };
  std::map<std::string, Node> nodes;  // by GUID
  std::set<std::pair<std::pair<std::string, int>, std::pair<std::string, int>>> links;  // GUIDs
  int passes = 0;
  uint64_t mads = 0;
  int64_t duration_ms = 0;
  bool complete = false;
  std::string time;  // the pass's start, as printed

  // Nodes and links by description (what the net file names them by).
  Fabric ByDescription() const {
    Fabric f;
    for (const auto& [guid, n] : nodes) f.nodes[n.desc] = NetNode{n.type, n.ports};
    for (const auto& [a, b] : links) {
      f.links.insert(MakeLink({nodes.at(a.first).desc, a.second}, {nodes.at(b.first).desc, b.second}));
    }
    return f;
  }
};

std::map<std::string, std::string> KeyValues(absl::string_view line) {
  std::map<std::string, std::string> kv;
  // desc="..." may hold spaces: take it out first.
  std::string rest(line);
  if (size_t d = rest.find("desc=\""); d != std::string::npos) {
    const size_t end = rest.find('"', d + 6);
    kv["desc"] = rest.substr(d + 6, end - d - 6);
    rest.erase(d, end - d + 1);
  }
  for (absl::string_view tok : absl::StrSplit(rest, ' ', absl::SkipEmpty())) {
    const size_t eq = tok.find('=');
    if (eq != absl::string_view::npos) kv[std::string(tok.substr(0, eq))] = std::string(tok.substr(eq + 1));
  }
  return kv;
}

std::pair<std::string, int> GuidPort(const std::string& s) {
  std::pair<std::string, int> r;
  const size_t c = s.rfind(':');
  r.first = s.substr(0, c);
  EXPECT_TRUE(absl::SimpleAtoi(s.substr(c + 1), &r.second)) << s;
  return r;
}

// Every pass of the text output, in order.
std::vector<Graph> ParseDiscovery(absl::string_view text) {
  std::vector<Graph> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "discovery ")) {
      out.emplace_back();
      auto kv = KeyValues(line);
      EXPECT_TRUE(absl::SimpleAtoi(kv["mads"], &out.back().mads)) << line;
      EXPECT_TRUE(absl::SimpleAtoi(kv["duration_ms"], &out.back().duration_ms)) << line;
      out.back().complete = kv["complete"] == "1";
      out.back().time = kv["time"];
      continue;
    }
    if (out.empty()) continue;
    Graph& g = out.back();
    auto kv = KeyValues(line);
    if (absl::StartsWith(line, "node ")) {
      Graph::Node& n = g.nodes[kv["guid"]];
      n.type = kv["type"];
      n.desc = kv["desc"];
      EXPECT_TRUE(absl::SimpleAtoi(kv["ports"], &n.ports)) << line;
      EXPECT_TRUE(absl::SimpleAtoi(kv["lid"], &n.lid)) << line;
    } else if (absl::StartsWith(line, "port ")) {
      int p = 0;
      EXPECT_TRUE(absl::SimpleAtoi(kv["port"], &p)) << line;
      g.nodes[kv["guid"]].port_state[p] = kv["state"];
    } else if (absl::StartsWith(line, "link ")) {
      g.links.insert({GuidPort(kv["a"]), GuidPort(kv["b"])});
    } else if (absl::StartsWith(line, "end ")) {
      ++g.passes;
    }
  }
  // A pass cut short by the end of the output is dropped.
  if (!out.empty() && out.back().passes == 0) out.pop_back();
  return out;
}

// The records of ibnetdiscover's text (blank-line separated, comments dropped), as a set.
std::set<std::string> Records(absl::string_view text) {
  std::set<std::string> out;
  for (absl::string_view r : absl::StrSplit(text, "\n\n")) {
    r = absl::StripAsciiWhitespace(r);
    if (!r.empty() && r[0] != '#') out.insert(std::string(r));
  }
  return out;
}

// The records in one set and not the other, for a readable failure.
std::string Difference(const std::set<std::string>& got, const std::set<std::string>& want) {
  std::string out;
  for (const std::string& r : got) {
    if (!want.count(r)) absl::StrAppend(&out, "only discovered:\n", r, "\n");
  }
  for (const std::string& r : want) {
    if (!got.count(r)) absl::StrAppend(&out, "only ibnetdiscover:\n", r, "\n");
  }
  return out;
}

// Starts ibsim on a net file and OpenSM as its SM; subclasses say which fabric and where the
// tools attach (SIM_HOST; empty: the first node of the file).
class IbsimDiscoveryBase : public ::testing::Test {
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
    for (const char* tool : {"/usr/sbin/opensm", "/usr/sbin/ibnetdiscover"}) {
      if (::access(tool, X_OK) != 0)
        GTEST_SKIP() << tool << " is missing (opensm, infiniband-diags)";
    }
    net_file_ = NetFile();
    scan_tool_ = testing::BinaryPath("collectors/ringside-fabric-scan");
    ASSERT_EQ(::access(scan_tool_.c_str(), X_OK), 0) << scan_tool_;
    static int instance = 0;
    env_ = {{"IBSIM_SOCKNAME", absl::StrCat("ringside-disc-", getpid(), "-", instance++)},
            {"OSM_TMP_DIR", tmp_.path()},
            {"OSM_CACHE_DIR", tmp_.path()}};
    if (!SimHost().empty()) env_.emplace_back("SIM_HOST", SimHost());
    ibsim_ = std::make_unique<Child>(std::vector<std::string>{kIbsim, "-s", net_file_}, tmp_.path(),
                                     "ibsim", env_, /*stdin_pipe=*/true);
    ASSERT_TRUE(ibsim_->started());
    if (!WaitUntil([&] { return absl::StrContains(ibsim_->Stdout(), "sim>"); },
                   absl::Seconds(10))) {
      GTEST_SKIP() << "ibsim did not start: " << ibsim_->Stdout() << ibsim_->Stderr();
    }
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
    discoverer_.reset();
    if (opensm_) opensm_->Stop(absl::Seconds(5));
    if (ibsim_) {
      ibsim_->Send("Quit\n");
      if (ibsim_->Wait(absl::Seconds(2)) == -1) ibsim_->Stop(absl::Seconds(2));
    }
    opensm_.reset();
    ibsim_.reset();
  }

  testing::RunResult Sim(std::vector<std::string> argv,
                         absl::Duration timeout = absl::Seconds(30)) {
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

  testing::RunResult Discover(std::vector<std::string> args) {
    args.insert(args.begin(), {scan_tool_, "--discover", "--timeout-ms=200", "--retries=1"});
    return Sim(std::move(args));
  }

  std::string net_file_;
  Fabric fabric_;  // IbsimDiscoveryTest: the net file's
  testing::TempDir tmp_;
  std::vector<std::pair<std::string, std::string>> env_;
  std::string scan_tool_;
  std::unique_ptr<Child> ibsim_;
  std::unique_ptr<Child> opensm_;
  std::unique_ptr<Child> discoverer_;
};

// The test's fat tree; the tools attach to node01's HCA (the file's first node).
class IbsimDiscoveryTest : public IbsimDiscoveryBase {
 protected:
  std::string NetFile() const override {
    return std::string(RINGSIDE_SOURCE_DIR) + "/tests/data/ibsim/fat_tree_2spine_4leaf_16hca.net";
  }
  void SetUp() override {
    fabric_ = ParseNetFile(testing::ReadFileOrEmpty(NetFile()));
    ASSERT_EQ(fabric_.nodes.size(), 22u) << NetFile();
    ASSERT_EQ(fabric_.links.size(), 24u) << NetFile();  // 16 host cables, 8 uplinks
    IbsimDiscoveryBase::SetUp();
  }
};

// The real 8-switch, 144-CA fat tree of the fixtures, attached where its perfquery fixtures were
// made (the CA 'stage1 mlx4_0').
class IbsimRealFabricDiscoveryTest : public IbsimDiscoveryBase {
 protected:
  std::string NetFile() const override {
    return testing::SharedDir() +
           "/fixtures/tool-outputs/ibnetdiscover/loginoff_sx6036_fdr10-qdr_fat-tree_2014.txt";
  }
  std::string SimHost() const override { return "H-24be05ffff98aba0"; }
};


// One pass finds exactly the fabric of the net file — every node with its type and port count,
// every cable with both ends — with every cabled port ACTIVE and every other switch port DOWN; its
// ibnetdiscover text has the same node records as `ibnetdiscover` run on the same fabric (GUIDs,
// LIDs, port GUIDs, link rates); and the topology parsed from both is the same, HCA by HCA.
TEST_F(IbsimDiscoveryTest, GraphIsTheFabricAndEqualsIbnetdiscover) {
  const testing::RunResult run = Discover({"--rate=0"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::vector<Graph> passes = ParseDiscovery(run.out);
  ASSERT_EQ(passes.size(), 1u) << run.out;
  const Graph& g = passes[0];
  EXPECT_TRUE(g.complete);
  const Fabric found = g.ByDescription();
  EXPECT_EQ(found.nodes, fabric_.nodes);
  EXPECT_EQ(found.links, fabric_.links);
  std::set<End> cabled;
  for (const auto& [a, b] : fabric_.links) cabled.insert(a), cabled.insert(b);
  for (const auto& [guid, n] : g.nodes) {
    EXPECT_EQ(guid.size(), 18u) << guid;
    EXPECT_GT(n.lid, 0) << n.desc;
    // A switch: all its ports; a CA: the port it was reached by.
    EXPECT_EQ(n.port_state.size(), n.type == "switch" ? static_cast<size_t>(n.ports) : 1u)
        << n.desc;
    for (const auto& [port, state] : n.port_state) {
      EXPECT_EQ(state, cabled.count({n.desc, port}) ? "ACTIVE" : "DOWN") << n.desc << " " << port;
    }
  }

  // The MADs of the pass, as docs/fabric-scan.md counts them: 2 + S·(P+2) + 2·C + 2·L − N.
  size_t switches = 0, cas = 0, switch_ports = 0;
  for (const auto& [name, n] : fabric_.nodes) {
    if (n.type == "switch") ++switches, switch_ports += n.ports;
    if (n.type == "ca") ++cas;
  }
  EXPECT_EQ(g.mads, 2 + switch_ports + 2 * switches + 2 * cas + 2 * fabric_.links.size() -
                        fabric_.nodes.size());

  const testing::RunResult ibnd = Sim({"ibnetdiscover"});
  ASSERT_EQ(ibnd.exit_code, 0) << ibnd.err;
  const testing::RunResult mine = Discover({"--rate=0", "--format=ibnetdiscover"});
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  EXPECT_EQ(Difference(Records(mine.out), Records(ibnd.out)), "");

  absl::StatusOr<analysis::Topology> from_ibnd = analysis::Topology::Parse(ibnd.out);
  absl::StatusOr<analysis::Topology> from_discovery = analysis::Topology::Parse(mine.out);
  ASSERT_TRUE(from_ibnd.ok()) << from_ibnd.status();
  ASSERT_TRUE(from_discovery.ok()) << from_discovery.status();
  EXPECT_EQ(from_discovery->switches(), 6u);
  EXPECT_EQ(from_discovery->switches(), from_ibnd->switches());
  EXPECT_EQ(from_discovery->cas(), 16u);
  EXPECT_EQ(from_discovery->cas(), from_ibnd->cas());
  EXPECT_EQ(from_discovery->hosts(), 16u);
  EXPECT_EQ(from_discovery->leaves(), 4u);
  auto attachments = [](const analysis::Topology& t) {
    std::set<std::vector<std::string>> out;
    for (const analysis::HcaAttachment& h : t.attachments()) {
      out.insert({h.host, h.device, h.description, h.ca_guid, absl::StrCat(h.ca_port), h.leaf.id,
                  h.leaf.name, absl::StrCat(h.leaf.port)});
    }
    return out;
  };
  EXPECT_EQ(attachments(*from_discovery), attachments(*from_ibnd));
  EXPECT_EQ(from_discovery->attachments().size(), 16u);
  // Each HCA's leaf, as the net file cables it.
  for (const auto& [a, b] : fabric_.links) {
    const End& ca = fabric_.nodes.at(a.node).type == "ca" ? a : b;
    const End& sw = &ca == &a ? b : a;
    if (fabric_.nodes.at(ca.node).type != "ca") continue;
    const std::string host(absl::string_view(ca.node).substr(0, ca.node.find(' ')));
    EXPECT_EQ(from_discovery->LeavesOf(host), from_ibnd->LeavesOf(host)) << host;
    const std::string leaf = from_discovery->LeafOf(host, "mlx5_0");
    EXPECT_EQ(from_discovery->LeafName(leaf), sw.node) << host;
  }
}

// Pacing: --rate=N spaces the SMPs 1/N s apart, so a pass of M MADs lasts at least (M-1)/N s.
TEST_F(IbsimDiscoveryTest, RateLimitPacesThePass) {
  const testing::RunResult run = Discover({"--rate=400"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::vector<Graph> passes = ParseDiscovery(run.out);
  ASSERT_EQ(passes.size(), 1u) << run.out;
  EXPECT_TRUE(passes[0].complete);
  EXPECT_EQ(passes[0].ByDescription().links, fabric_.links);
  EXPECT_GE(passes[0].duration_ms, static_cast<int64_t>((passes[0].mads - 1) * 1000 / 400))
      << passes[0].mads << " MADs";
}

// A periodic discoverer (as the agent's --fabric-discover runs it): a host cable and a spine
// uplink taken down in ibsim are gone from the first pass that starts once ibsim has applied the
// command (the HCA behind the host cable with it, its leaf and spine ports DOWN), and back after
// ReLink.
TEST_F(IbsimDiscoveryTest, LinkTakenDownLeavesTheGraphAtTheNextPass) {
  discoverer_ = std::make_unique<Child>(
      std::vector<std::string>{kIbsimRun, scan_tool_, "--discover", "--rate=0", "--timeout-ms=50",
                               "--retries=0", "--scans=0", "--interval-ms=200"},
      tmp_.path(), "discoverer", env_, false);
  auto ends = [&] { return Count(discoverer_->Stdout(), "\nend "); };
  ASSERT_TRUE(WaitUntil([&] { return ends() >= 2; }, absl::Seconds(20)))
      << discoverer_->Stdout() << discoverer_->Stderr();

  // ibsim prints its prompt again once it has applied a console command.
  auto console = [&](absl::string_view commands, size_t count) {
    const size_t prompts = Count(ibsim_->Stdout(), "sim> ");
    ASSERT_TRUE(ibsim_->Send(commands));
    ASSERT_TRUE(WaitUntil([&] { return Count(ibsim_->Stdout(), "sim> ") >= prompts + count; },
                          absl::Seconds(10)))
        << ibsim_->Stdout();
  };
  const absl::Time down_at = absl::Now();
  console("Unlink \"leaf2\"[3]\nUnlink \"spine2\"[4]\n", 2);
  const absl::Time down_done = absl::Now();
  size_t n = ends();
  ASSERT_TRUE(WaitUntil([&] { return ends() >= n + 3; }, absl::Seconds(20)));
  const absl::Time up_at = absl::Now();
  console("ReLink \"leaf2\"[3]\nReLink \"spine2\"[4]\n", 2);
  const absl::Time up_done = absl::Now();
  n = ends();
  ASSERT_TRUE(WaitUntil([&] { return ends() >= n + 3; }, absl::Seconds(20)));
  discoverer_->Stop(absl::Seconds(5));

  Fabric down = fabric_;
  down.links.erase(MakeLink({"leaf2", 3}, {"node07 mlx5_0", 1}));
  down.links.erase(MakeLink({"leaf4", 8}, {"spine2", 4}));
  down.nodes.erase("node07 mlx5_0");
  ASSERT_EQ(down.links.size(), fabric_.links.size() - 2);

  const std::vector<Graph> passes = ParseDiscovery(discoverer_->Stdout());
  int before = 0, while_down = 0, after = 0;
  for (const Graph& g : passes) {
    absl::Time start;
    std::string err;
    ASSERT_TRUE(absl::ParseTime("%Y-%m-%dT%H:%M:%E3SZ", g.time, &start, &err)) << g.time << err;
    const Fabric f = g.ByDescription();
    EXPECT_TRUE(g.complete);
    if (start < down_at) {
      ++before;
      EXPECT_EQ(f.links, fabric_.links) << g.time;
    } else if (start >= down_done && start < up_at) {
      ++while_down;
      EXPECT_EQ(f.links, down.links) << g.time;
      EXPECT_EQ(f.nodes, down.nodes) << g.time;
      for (const auto& [guid, node] : g.nodes) {
        const int port = node.desc == "leaf2" ? 3 : node.desc == "leaf4" ? 8
                         : node.desc == "spine2"                      ? 4
                                                                      : 0;
        if (port != 0) {
          EXPECT_EQ(node.port_state.at(port), "DOWN") << node.desc;
        }
      }
    } else if (start >= up_done) {
      ++after;
      EXPECT_EQ(f.links, fabric_.links) << g.time;
      EXPECT_EQ(f.nodes, fabric_.nodes) << g.time;
    }
  }
  EXPECT_GE(before, 2);
  EXPECT_GE(while_down, 2);
  EXPECT_GE(after, 2);
}

// End to end: the agent, under ibsim-run with --fabric-discover, streams the graph to a real
// aggregator as info records; the aggregator's DiscoveredFabric builds the topology from them and
// logs each link that goes down in ibsim, and comes back, at the next period.
TEST_F(IbsimDiscoveryTest, AgentStreamsTheGraphToTheAggregator) {
  const std::string agent = testing::BinaryPath("daemon/ringside-agent");
  const std::string aggregator = testing::BinaryPath("daemon/ringside-aggregator");
  ASSERT_EQ(::access(agent.c_str(), X_OK), 0) << agent;
  ASSERT_EQ(::access(aggregator.c_str(), X_OK), 0) << aggregator;
  ASSERT_EQ(::mkdir((tmp_.path() + "/state").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((tmp_.path() + "/sysfs").c_str(), 0700), 0);
  Child agg({aggregator, "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
             "--state-dir=" + tmp_.path() + "/state"},
            tmp_.path(), "aggregator", {}, false);
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(agg.Stderr(), "HTTP (/metrics"); },
                        absl::Seconds(20)))
      << agg.Stderr();
  const std::string err = agg.Stderr();
  const std::string tag = "ingest (gRPC) listening on ";
  const size_t at = err.find(tag);
  ASSERT_NE(at, std::string::npos) << err;
  const size_t port_at = err.find("(port ", at);
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(err.substr(port_at + 6, err.find(')', port_at) - port_at - 6), &port))
      << err;
  Child agent_process({kIbsimRun, agent, "--sysfs-root=" + tmp_.path() + "/sysfs", "--listen=",
                       "--collectives-socket=", "--node-name=disc1",
                       absl::StrCat("--aggregator=127.0.0.1:", port), "--interval=200ms",
                       "--fabric-discover=300ms"},
                      tmp_.path(), "agent", env_, false);
  auto log_has = [&](absl::string_view text) {
    return WaitUntil([&] { return absl::StrContains(agg.Stderr(), text); }, absl::Seconds(20));
  };
  ASSERT_TRUE(log_has("fabric discovery from disc1: 22 nodes, 24 links, 6 switches, 16 CAs on 4 "
                      "leaves"))
      << agg.Stderr() << agent_process.Stderr();
  ASSERT_TRUE(ibsim_->Send("Unlink \"spine2\"[4]\n"));
  EXPECT_TRUE(log_has("fabric discovery from disc1: link gone: \"leaf4\" 0x0000000000200003[8] - "
                      "\"spine2\" 0x0000000000200005[4]"))
      << agg.Stderr();
  ASSERT_TRUE(ibsim_->Send("ReLink \"spine2\"[4]\n"));
  EXPECT_TRUE(log_has("fabric discovery from disc1: new link: \"leaf4\" 0x0000000000200003[8] - "
                      "\"spine2\" 0x0000000000200005[4]"))
      << agg.Stderr();
  EXPECT_EQ(Count(agg.Stderr(), "link gone"), 1u) << agg.Stderr();
  agent_process.Stop(absl::Seconds(5));
  agg.Stop(absl::Seconds(5));
}

// `--fabric-scan=discovered`: with no hand-written target list, the agent's PMA scan reads every
// switch its own discovery found (2 spines, 4 leaves), and follows the fabric when it changes.
TEST_F(IbsimDiscoveryTest, AgentScansEverySwitchItDiscovered) {
  const std::string agent = testing::BinaryPath("daemon/ringside-agent");
  ASSERT_EQ(::mkdir((tmp_.path() + "/sysfs").c_str(), 0700), 0);
  Child agent_process({kIbsimRun, agent, "--sysfs-root=" + tmp_.path() + "/sysfs",
                       "--listen=127.0.0.1:0", "--collectives-socket=", "--node-name=disc1",
                       "--interval=200ms", "--fabric-discover=2s", "--fabric-discover-rate=0",
                       "--fabric-scan=discovered"},
                      tmp_.path(), "agent", env_, false);
  int port = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string err = agent_process.Stderr();
        const size_t at = err.find("serving /metrics on ");
        if (at == std::string::npos) return false;
        const size_t p = err.find("(port ", at);
        return p != std::string::npos &&
               absl::SimpleAtoi(err.substr(p + 6, err.find(')', p) - p - 6), &port);
      },
      absl::Seconds(20)))
      << agent_process.Stderr();
  // The nodes (GUIDs) whose ports the scan reads, from the agent's /metrics.
  std::map<std::string, int> ports_of;  // device → ports scanned
  auto scanned = [&] {
    std::set<std::string> devices;
    ports_of.clear();
    for (absl::string_view line : absl::StrSplit(testing::HttpGet(port, "/metrics"), '\n')) {
      if (!absl::StartsWith(line, "ringside_ib_fabric_port_state{")) continue;
      const size_t at = line.find("node_guid=\"");
      if (at == absl::string_view::npos) continue;
      const size_t end = line.find('"', at + 11);
      const std::string guid(line.substr(at + 11, end - at - 11));
      devices.insert(guid);
      ++ports_of[guid];
    }
    return devices;
  };
  std::set<std::string> devices;
  EXPECT_TRUE(WaitUntil(
      [&] {
        devices = scanned();
        return devices.size() == 6;
      },
      absl::Seconds(30)))
      << "scanned " << devices.size() << " switches\n"
      << agent_process.Stderr();
  // Switches, every port (8 each in this fabric, linked or not; a CA target would be one port).
  for (const auto& [d, n] : ports_of) EXPECT_EQ(n, 8) << d;
  agent_process.Stop(absl::Seconds(5));
}

// On a real fabric's shape (152 nodes, 192 links, dual-cabled CAs) too, discovery's records are
// ibnetdiscover's, but for two things discovery does not ask for: ibnetdiscover reads each
// switch's SwitchInfo ("enhanced port 0" where discovery says "base port 0") and Mellanox's
// vendor-specific extended PortInfo (FDR10, which the IBA PortInfo reports as QDR).
TEST_F(IbsimRealFabricDiscoveryTest, RecordsEqualIbnetdiscover) {
  const testing::RunResult ibnd = Sim({"ibnetdiscover"});
  ASSERT_EQ(ibnd.exit_code, 0) << ibnd.err;
  const testing::RunResult mine = Discover({"--rate=0", "--format=ibnetdiscover"});
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  const std::string ibnd_text = absl::StrReplaceAll(
      ibnd.out, {{"\" enhanced port 0 lid", "\" base port 0 lid"}, {"4xFDR10", "4xQDR"}});
  EXPECT_NE(ibnd_text, ibnd.out);  // both are in this fabric
  const std::set<std::string> want = Records(ibnd_text);
  EXPECT_EQ(want.size(), 152u);
  EXPECT_EQ(Difference(Records(mine.out), want), "");
  absl::StatusOr<analysis::Topology> a = analysis::Topology::Parse(ibnd_text);
  absl::StatusOr<analysis::Topology> b = analysis::Topology::Parse(mine.out);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->switches(), 8u);
  EXPECT_EQ(b->attachments().size(), a->attachments().size());
  for (const analysis::HcaAttachment& h : a->attachments()) {
    if (h.host.empty()) continue;
    EXPECT_EQ(b->LeavesOf(h.host), a->LeavesOf(h.host)) << h.host;
  }
}

}  // namespace
}  // namespace ringside
