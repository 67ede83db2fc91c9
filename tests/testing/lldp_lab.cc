#include "tests/testing/lldp_lab.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace ringside::testing {
namespace {

constexpr char kLldpd[] = "/usr/sbin/lldpd";
constexpr char kLldpcli[] = "/usr/sbin/lldpcli";
constexpr char kIp[] = "/usr/sbin/ip";

RunResult Sh(const std::string& cmd) { return Run({"/bin/sh", "-c", cmd}, "", absl::Seconds(20)); }

absl::Status ShOk(const std::string& cmd) {
  RunResult r = Sh(cmd);
  if (r.exit_code == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(cmd, ": exit ", r.exit_code, ": ", r.err));
}

}  // namespace

bool LldpLab::LldpdInstalled() {
  return std::filesystem::exists(kLldpd) && std::filesystem::exists(kLldpcli);
}

LldpLab::LldpLab(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::permissions(dir_, std::filesystem::perms(0755), ec);
}

LldpLab::~LldpLab() {
  for (auto& [ns, p] : lldpd_) p->Signal(SIGTERM);
  for (auto& [ns, p] : lldpd_) p->Wait(absl::Seconds(5));
  lldpd_.clear();
  for (const std::string& ns : namespaces_) Sh(absl::StrCat(kIp, " netns del ", ns));
}

absl::StatusOr<std::string> LldpLab::AddNamespace(const std::string& tag) {
  const std::string ns = absl::StrCat(tag, "-", getpid());
  if (Sh(absl::StrCat(kIp, " netns add ", ns)).exit_code != 0) {
    return absl::FailedPreconditionError("cannot create a network namespace");
  }
  namespaces_.push_back(ns);
  if (absl::Status s = ShOk(absl::StrCat(kIp, " -n ", ns, " link set lo up")); !s.ok()) return s;
  return ns;
}

absl::Status LldpLab::Cable(const std::string& host_ns, const std::string& host_if,
                            const std::string& switch_ns, const std::string& switch_port,
                            const std::string& switch_addr) {
  if (absl::Status s = ShOk(absl::StrCat(kIp, " link add ", host_if, " netns ", host_ns,
                                         " type veth peer name ", switch_port, " netns ",
                                         switch_ns));
      !s.ok()) {
    return s;
  }
  if (!switch_addr.empty()) {
    if (absl::Status s =
            ShOk(absl::StrCat(kIp, " -n ", switch_ns, " addr add ", switch_addr, " dev ", switch_port));
        !s.ok()) {
      return s;
    }
  }
  return ShOk(absl::StrCat(kIp, " -n ", switch_ns, " link set ", switch_port, " up && ", kIp, " -n ",
                           host_ns, " link set ", host_if, " up"));
}

absl::Status LldpLab::Uncable(const std::string& ns, const std::string& netdev) {
  return ShOk(absl::StrCat(kIp, " -n ", ns, " link del ", netdev));
}

std::string LldpLab::Socket(const std::string& ns) const {
  return absl::StrCat(dir_, "/", ns, ".sock");
}

absl::Status LldpLab::StartLldpd(const std::string& ns, const std::string& pattern,
                                 const std::string& name) {
  const std::string sock = Socket(ns);
  auto p = std::make_unique<Process>(
      std::vector<std::string>{kIp, "netns", "exec", ns, kLldpd, "-d", "-u", sock, "-I", pattern,
                               "-S", "ringside test " + name},
      dir_);
  Process& lldpd = *p;
  lldpd_[ns] = std::move(p);
  for (int i = 0; i < 100 && !std::filesystem::exists(sock); ++i) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  if (!std::filesystem::exists(sock)) {
    return absl::UnavailableError(
        absl::StrCat("lldpd in ", ns, " made no socket: ", lldpd.Stderr()));
  }
  for (const std::string& cmd : {absl::StrCat("configure system hostname ", name),
                                 std::string("configure lldp tx-interval 1"),
                                 std::string("configure lldp portidsubtype ifname")}) {
    std::vector<std::string> argv{kLldpcli, "-u", sock};
    for (absl::string_view word : absl::StrSplit(cmd, ' ')) argv.emplace_back(word);
    RunResult r = Run(argv, "", absl::Seconds(10));
    if (r.exit_code != 0) return absl::InternalError(absl::StrCat("lldpcli ", cmd, ": ", r.err));
  }
  return absl::OkStatus();
}

absl::Status LldpLab::StopLldpd(const std::string& ns) {
  auto it = lldpd_.find(ns);
  if (it == lldpd_.end()) return absl::NotFoundError("no lldpd in " + ns);
  it->second->Signal(SIGTERM);
  const int code = it->second->Wait(absl::Seconds(10));
  lldpd_.erase(it);
  if (code < 0) return absl::DeadlineExceededError("lldpd in " + ns + " did not stop");
  return absl::OkStatus();
}

absl::Status LldpLab::WaitForNeighbor(const std::string& ns, const std::string& netdev,
                                      const std::string& neighbor, absl::Duration timeout) {
  const std::string want = absl::StrCat("lldp.", netdev, ".chassis.name=", neighbor);
  const absl::Time deadline = absl::Now() + timeout;
  std::string last;
  while (true) {
    RunResult r = Run({kLldpcli, "-u", Socket(ns), "-f", "keyvalue", "show", "neighbors"}, "",
                      absl::Seconds(10));
    last = r.out + r.err;
    for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
      if (line == want) return absl::OkStatus();
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("lldpd in ", ns, " never saw ", neighbor, " on ", netdev, "; it lists:\n", last));
}

}  // namespace ringside::testing
